"""The one top-level retriever: expand, search every collection two ways, fuse, re-rank, cap.

For a question it runs the expander (a child run, so its tokens are visible to callbacks but
tagged as the expander's), embeds the standalone question and every alternative query in one
batch, and for each routed collection runs one dense Chroma query for all of them and one
BM25 search per query. All ranked lists are fused with reciprocal rank fusion, one entry is
kept per entity (stable id or url), candidates less similar to the question than the
threshold are dropped, and the survivors are re-ranked by similarity to the question and
capped. The order of the returned documents is the sources' numbering.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from chromadb.api import ClientAPI
from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from pydantic import ConfigDict, Field, PrivateAttr

from pipelines import store
from pipelines.definitions import check_collection_names
from pipelines.expander import Expansion, expander_messages, parse_expansion, rule_expansion
from pipelines.keyword_index import KeywordIndex
from pipelines.settings import Settings

__all__ = ["EXPANDER_TAG", "ReactomeRetriever"]

EXPANDER_TAG = "reactome-answers:expander"
_RRF_K = 60
_CHUNKS_PER_SOURCE = 2


@dataclass
class _Candidate:
    chunk_id: str
    collection: str
    text: str
    metadata: dict[str, Any]
    embedding: np.ndarray[Any, np.dtype[np.float32]]
    fused: float = 0.0


class ReactomeRetriever(BaseRetriever):
    """Hybrid retrieval over the Reactome collections; ``k`` may be given per call."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    settings: Settings
    client: Any  # chromadb ClientAPI (not a pydantic type)
    embeddings: Embeddings
    expander: BaseChatModel
    k: int = 10
    fetch_k: int = 20
    max_queries: int = 3
    min_similarity: float = 0.3
    collections: list[str] | None = Field(
        default=None, description="fixed collections instead of the expander's routing"
    )
    _keyword_indexes: dict[str, KeywordIndex] = PrivateAttr(default_factory=dict)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    # --- expansion ------------------------------------------------------------------------

    def _expansion_from(
        self, reply: Any, question: str, history: Sequence[tuple[str, str]]
    ) -> Expansion:
        text = str(getattr(reply, "content", reply))
        return parse_expansion(text, question, history, self.max_queries)

    def _fallback(
        self, question: str, history: Sequence[tuple[str, str]], error: Exception
    ) -> Expansion:
        rules = rule_expansion(question, history, self.max_queries)
        return Expansion(rules.queries, rules.collections, fallback=f"expander failed: {error!r}")

    def _expander_call(
        self,
        question: str,
        history: Sequence[tuple[str, str]],
        run_manager: CallbackManagerForRetrieverRun | AsyncCallbackManagerForRetrieverRun,
    ) -> tuple[list[BaseMessage], RunnableConfig]:
        messages = expander_messages(question, history, self.max_queries)
        config: RunnableConfig = {
            "callbacks": run_manager.get_child(),
            "tags": [EXPANDER_TAG],
            "run_name": "expander",
        }
        return messages, config

    def _expand(
        self,
        question: str,
        history: Sequence[tuple[str, str]],
        run_manager: CallbackManagerForRetrieverRun,
    ) -> Expansion:
        messages, config = self._expander_call(question, history, run_manager)
        try:
            reply = self.expander.invoke(messages, config=config)
        except Exception as error:  # the expander must never sink the answer
            return self._fallback(question, history, error)
        return self._expansion_from(reply, question, history)

    async def _aexpand(
        self,
        question: str,
        history: Sequence[tuple[str, str]],
        run_manager: AsyncCallbackManagerForRetrieverRun,
    ) -> Expansion:
        messages, config = self._expander_call(question, history, run_manager)
        try:
            reply = await self.expander.ainvoke(messages, config=config)
        except Exception as error:  # CancelledError is not an Exception: it propagates
            return self._fallback(question, history, error)
        return self._expansion_from(reply, question, history)

    # --- search ---------------------------------------------------------------------------

    def _keyword_index(self, version: str) -> KeywordIndex | None:
        with self._lock:
            if version not in self._keyword_indexes:
                folder = store.keyword_index_dir(self.settings, version)
                if not folder.is_dir():
                    return None
                self._keyword_indexes[version] = KeywordIndex.load(folder)
            return self._keyword_indexes[version]

    def _collections_for(self, expansion: Expansion, override: Sequence[str] | None) -> list[str]:
        chosen = list(override or self.collections or expansion.collections)
        return check_collection_names(chosen) or ["reactome", "disease_variants"]

    def search(self, expansion: Expansion, collections: Sequence[str], k: int) -> list[Document]:
        """Everything after expansion; plain Python, so it can run in a worker thread."""
        client: ClientAPI = self.client
        vectors = np.asarray(self.embeddings.embed_documents(expansion.queries), dtype=np.float32)
        question_vector = vectors[0]
        candidates: dict[str, _Candidate] = {}

        def add(rank: int, chunk_id: str, collection: str, text: str, meta: Any, emb: Any) -> None:
            candidate = candidates.get(chunk_id)
            if candidate is None:
                candidate = _Candidate(
                    chunk_id, collection, text, dict(meta or {}), np.asarray(emb, dtype=np.float32)
                )
                candidates[chunk_id] = candidate
            candidate.fused += 1.0 / (_RRF_K + rank)

        for name in collections:
            version = store.check_embedding_model(client, name, self.settings)
            hits = version.collection.query(
                query_embeddings=vectors,
                n_results=self.fetch_k,
                include=["documents", "metadatas", "embeddings"],
            )
            for q in range(len(expansion.queries)):
                ids = hits["ids"][q]
                documents = (hits["documents"] or [[]] * len(vectors))[q]
                metadatas = (hits["metadatas"] or [[]] * len(vectors))[q]
                embeddings = (hits["embeddings"] or [[]] * len(vectors))[q]
                for rank, chunk_id in enumerate(ids, start=1):
                    add(
                        rank,
                        chunk_id,
                        name,
                        documents[rank - 1],
                        metadatas[rank - 1],
                        embeddings[rank - 1],
                    )
            index = self._keyword_index(version.name)
            if index is None:
                continue
            keyword_lists = [index.search(query, self.fetch_k) for query in expansion.queries]
            wanted = sorted({cid for hits_ in keyword_lists for cid, _ in hits_} - set(candidates))
            fetched: dict[str, tuple[str, Any, Any]] = {}
            if wanted:
                got = version.collection.get(
                    ids=wanted, include=["documents", "metadatas", "embeddings"]
                )
                for position, chunk_id in enumerate(got["ids"]):
                    fetched[chunk_id] = (
                        (got["documents"] or [])[position],
                        (got["metadatas"] or [])[position],
                        (got["embeddings"] if got["embeddings"] is not None else [])[position],
                    )
            for keyword_hits in keyword_lists:
                for rank, (chunk_id, _) in enumerate(keyword_hits, start=1):
                    if chunk_id in candidates:
                        candidates[chunk_id].fused += 1.0 / (_RRF_K + rank)
                    elif chunk_id in fetched:
                        add(rank, chunk_id, name, *fetched[chunk_id])

        # One entry per entity, keyed by what it would be cited as across collections (a
        # variant cited by its disease pathway's id and that pathway are one source, not
        # two). The entity's best chunk leads; its runner-up adds context.
        groups: dict[str, list[_Candidate]] = {}
        for candidate in sorted(candidates.values(), key=lambda c: -c.fused):
            meta = candidate.metadata
            cited_as = meta.get("st_id") or meta.get("url")
            entity = str(
                cited_as or f"{candidate.collection}|{meta.get('entity') or candidate.chunk_id}"
            )
            groups.setdefault(entity, []).append(candidate)

        scored = []
        for group in groups.values():
            similarities = [float(c.embedding @ question_vector) for c in group]
            similarity = max(similarities)
            if similarity >= self.min_similarity:
                scored.append((similarity + group[0].fused, similarity, group[:_CHUNKS_PER_SOURCE]))
        scored.sort(key=lambda item: -item[0])
        return [
            Document(
                page_content="\n\n".join(c.text for c in group),
                id=group[0].chunk_id,
                metadata={**group[0].metadata, "relevance": round(similarity, 4)},
            )
            for _, similarity, group in scored[:k]
        ]

    # --- the retriever interface -----------------------------------------------------------

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        history: Sequence[tuple[str, str]] = (),
        collections: Sequence[str] | None = None,
    ) -> list[Document]:
        expansion = self._expand(query, history, run_manager)
        chosen = self._collections_for(expansion, collections)
        return self.search(expansion, chosen, k or self.k)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        history: Sequence[tuple[str, str]] = (),
        collections: Sequence[str] | None = None,
    ) -> list[Document]:
        expansion = await self._aexpand(query, history, run_manager)
        chosen = self._collections_for(expansion, collections)
        return await asyncio.to_thread(self.search, expansion, chosen, k or self.k)
