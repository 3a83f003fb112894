"""The one top-level retriever: expand, search every collection two ways, fuse, re-rank, cap.

For a question it runs the expander (a child run, so its tokens are visible to callbacks but
tagged as the expander's), embeds the standalone question and every alternative query in one
batch, and for each routed collection runs one dense Chroma query for all of them and one
BM25 search per query. All ranked lists are fused with reciprocal rank fusion and the best
fused chunks are read in full. Each is scored by its similarity to the question plus its
keyword evidence (how far it stands out in the BM25 lists, and the question's rare words it
holds); one entry is kept per entity (stable id or url), entries scoring under the threshold
are dropped, and so are the collections whose best entry is far less similar to the question
than another collection's best. The survivors are ranked by score and capped. The order of
the returned documents is the sources' numbering.
"""

from __future__ import annotations

import asyncio
import functools
import math
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
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

from pipelines.catalog.catalog import Catalog, catalog_for
from pipelines.core.errors import EventHandlerError, PersonalAdviceError, ReactomeAnswersError
from pipelines.core.redaction import one_line, redact_secrets
from pipelines.core.settings import Settings
from pipelines.core.tags import EXPANDER_TAG
from pipelines.index import store
from pipelines.index.chunk_table import ChunkRecord
from pipelines.index.keyword_index import KeywordIndex, keyword_tokens
from pipelines.index.version_index import VersionIndex, build_from_store
from pipelines.retrieval.advice import AdviceGate
from pipelines.retrieval.expander import (
    Expansion,
    expander_messages,
    parse_expansion,
    rule_expansion,
)

__all__ = ["EXPANSION", "EXPANSION_FALLBACK", "RANKINGS", "Ranking", "ReactomeRetriever"]

# The custom callback event that says the expander's own expansion was not used, and why;
# the event log records it.
EXPANSION_FALLBACK = "reactome-answers:expansion-fallback"
# The custom callback event that records what was searched for: the standalone question (made
# from the history) first, then the alternative queries, and the collections. The event log
# keeps it, so a conversation's follow-up shows what it was taken to mean.
EXPANSION = "reactome-answers:expansion"


def _expansion_data(expansion: Expansion, collections: Sequence[str]) -> dict[str, Any]:
    return {
        "queries": [redact_secrets(query) for query in expansion.queries],
        "collections": list(collections),
    }


def stop_if_personal_advice(expansion: Expansion) -> None:
    """Raise :class:`PersonalAdviceError` when the expander said the question asks for
    personal medical advice: nothing is searched, and the pipeline answers ``refused``."""
    if expansion.personal_advice:
        raise PersonalAdviceError(
            "the query expander judged this a request for personal medical advice",
            detail={"personal_advice": True, "question": redact_secrets(expansion.question)},
        )


def _fallback_data(expansion: Expansion) -> dict[str, Any]:
    return {
        "reason": expansion.fallback,
        "queries": [redact_secrets(query) for query in expansion.queries],
        "collections": expansion.collections,
    }


_RRF_K = 60
# How candidates are found and ordered; the default is the last. The others exist so the
# evaluation (tests/benchmarks/eval_quality.py) can compare them on the same index.
Ranking = Literal["dense", "bm25", "hybrid", "hybrid_rerank"]
RANKINGS: tuple[Ranking, ...] = ("dense", "bm25", "hybrid", "hybrid_rerank")
_CHUNKS_PER_SOURCE = 2
_VERSION_TTL_S = 5.0
# A keyword index that could not be built is tried again after this long.
_REBUILD_AFTER_S = 30.0


class _ReadWriteGate:
    """Many readers at once, or one writer alone; a waiting writer lets no new reader in."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._readers = 0
        self._writing = False

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._condition:
            self._condition.wait_for(lambda: not self._writing)
            self._readers += 1
        try:
            yield
        finally:
            with self._condition:
                self._readers -= 1
                self._condition.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        with self._condition:
            self._condition.wait_for(lambda: not self._writing)
            self._writing = True
            self._condition.wait_for(lambda: self._readers == 0)
        try:
            yield
        finally:
            with self._condition:
                self._writing = False
                self._condition.notify_all()


@dataclass
class _Candidate:
    chunk_id: str
    collection: str
    text: str
    metadata: dict[str, Any]
    embedding: np.ndarray[Any, np.dtype[np.float32]]
    fused: float = 0.0
    similarity: float = 0.0  # to the question
    score: float = 0.0  # what hybrid_rerank ranks by: similarity plus keyword evidence


class ReactomeRetriever(BaseRetriever):
    """Hybrid retrieval over the Reactome collections; ``k`` may be given per call."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    settings: Settings
    client: Any = Field(
        default=None,
        description="a chromadb ClientAPI; unset means the process's own client for the "
        "settings' store, which is reopened when a new version goes live (so Chroma lets go "
        "of the retired one)",
    )
    embeddings: Embeddings
    expander: BaseChatModel
    k: int = 10
    fetch_k: int = 20
    pool_size: int = Field(
        default=100, description="chunks read in full and re-ranked, best fused first"
    )
    max_queries: int = 3
    min_similarity: float = Field(
        default=0.3,
        description="nothing is returned unless some entry is at least this similar to the "
        "question; with hybrid_rerank each entry's score (similarity plus keyword evidence) "
        "must reach it too, otherwise its similarity",
    )
    # Keyword evidence added to a chunk's similarity (hybrid_rerank). Similarity alone misses
    # the questions asked through a name only one summary mentions (a drug, a syndrome, a
    # gene): the summary is about something broader, so its embedding is far from the
    # question, while BM25 puts it first by a wide margin. Tuned on the dev questions of
    # tests/benchmarks/eval_questions.yaml.
    bm25_z_weight: float = Field(
        default=0.04,
        description="per standard deviation a chunk's BM25 score stands above its list's "
        "mean (its best list among the queries)",
    )
    bm25_share_weight: float = Field(
        default=0.05, description="times the chunk's BM25 score over its list's best"
    )
    rare_term_weight: float = Field(
        default=0.15,
        description="times the IDF-weighted share of the question's rare words the chunk holds",
    )
    rare_term_max_df: int = Field(
        default=2, description="a word is rare in a collection held by at most this many chunks"
    )
    collection_margin: float | None = Field(
        default=0.08,
        description="drop a collection's entries when its most similar entry trails the most "
        "similar entry of another collection by more than this (hybrid_rerank; None keeps all)",
    )
    exact_search_max_chunks: int = Field(
        default=20_000,
        description="a collection of at most this many chunks is searched exhaustively over "
        "its chunk table's vectors rather than through Chroma's HNSW index: exact, and faster "
        "below about this size (each Chroma query costs a fixed 2 ms or so)",
    )
    advice_gate: AdviceGate | None = Field(
        default=None,
        description="refuses requests for personal medical advice once the question is "
        "embedded, before any search (pipelines.retrieval.advice); None: only the expander's "
        "verdict",
    )
    collections: list[str] | None = Field(
        default=None, description="fixed collections instead of the expander's routing"
    )
    ranking: Ranking = Field(
        default="hybrid_rerank",
        description="dense or BM25 alone, both fused (RRF), or fused then re-ranked by "
        "similarity to the question",
    )
    _indexes: dict[str, VersionIndex] = PrivateAttr(default_factory=dict)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _versions: dict[str, tuple[float, store.StoredVersion]] = PrivateAttr(default_factory=dict)
    _gate: _ReadWriteGate = PrivateAttr(default_factory=lambda: _ReadWriteGate())
    _reopen_wanted: bool = PrivateAttr(default=False)

    @property
    def catalog(self) -> Catalog:
        """The collections the settings declare (bundled, plus ``collections_path``)."""
        return catalog_for(self.settings)

    # --- expansion ------------------------------------------------------------------------

    def _expansion_from(
        self, reply: Any, question: str, history: Sequence[tuple[str, str]]
    ) -> Expansion:
        text = str(getattr(reply, "content", reply))
        return parse_expansion(text, question, history, self.max_queries, self.catalog)

    def _fallback(
        self, question: str, history: Sequence[tuple[str, str]], error: Exception
    ) -> Expansion:
        # The question alone (made standalone from the history), routed by the rules: a
        # failing model is no reason to search for anything the user did not ask.
        alone = rule_expansion(question, history, max_queries=0, catalog=self.catalog)
        reason = f"expander failed ({one_line(error)}); searched the question alone"
        return Expansion(alone.queries, alone.collections, fallback=reason)

    def _expander_call(
        self,
        question: str,
        history: Sequence[tuple[str, str]],
        run_manager: CallbackManagerForRetrieverRun | AsyncCallbackManagerForRetrieverRun,
    ) -> tuple[list[BaseMessage], RunnableConfig]:
        messages = expander_messages(question, history, self.max_queries, self.catalog)
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
        except EventHandlerError:
            raise  # our own handler broke, not the expander
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
        except EventHandlerError:
            raise
        except Exception as error:  # CancelledError is not an Exception: it propagates
            return self._fallback(question, history, error)
        return self._expansion_from(reply, question, history)

    # --- search ---------------------------------------------------------------------------

    def version_index(self, version: store.StoredVersion) -> VersionIndex:
        """The keyword index and chunk table of ``version`` on this machine: loaded, or built
        from the store when this machine has none (an instance sharing a Chroma server with
        the machine that ingested). One that cannot be built is missing, with the reason
        (the search then ranks by vectors alone, and says so), and is tried again later."""
        with self._lock:
            found = self._indexes.get(version.name)
        if found is not None and (
            found.keyword is not None or time.monotonic() - found.built_at < _REBUILD_AFTER_S
        ):
            return found
        chunks = version.metadata.get(store.CHUNKS)
        try:
            found = build_from_store(
                version.collection,
                store.keyword_index_dir(self.settings, version.name),
                lock=store.keyword_index_lock(self.settings, version.name),
                chunks=chunks if isinstance(chunks, int) else None,
            )
        except Exception as error:  # the disk or the store: answered by vectors meanwhile
            found = VersionIndex.missing(
                f"keyword index of {version.name} not available ({one_line(error)})"
            )
        with self._lock:
            # Only a live version's is kept: one a request pinned before an ingest replaced it
            # would stay open (deleted files held) long after housekeeping removed the version,
            # since only the swap (`_live_version`) or a reopen drops cached indexes.
            if any(live.name == version.name for _, live in self._versions.values()):
                self._indexes[version.name] = found
        return found

    def live_versions(
        self, names: Sequence[str]
    ) -> dict[str, tuple[store.StoredVersion, VersionIndex]]:
        """The live version of each ingested collection of ``names`` with its local indexes,
        as a search would use them now (built here if this machine has none yet); a
        collection that is not ingested, or not readable with these settings, is left out."""
        found = {}
        for name in names:
            try:
                version = self._live_version(name)
            except ReactomeAnswersError:
                continue
            found[name] = (version, self.version_index(version))
        return found

    def _collections_for(self, expansion: Expansion, override: Sequence[str] | None) -> list[str]:
        chosen = list(override or self.collections or expansion.collections)
        return self.catalog.check(chosen) if chosen else self.catalog.default_names

    def search(
        self,
        expansion: Expansion,
        collections: Sequence[str],
        k: int,
        *,
        question: str | None = None,
        versions: Mapping[str, str] | None = None,
    ) -> list[Document]:
        """Everything after expansion; plain Python, so it can run in a worker thread.

        ``versions`` pins the collection versions searched (by name: what the request's log
        header recorded); otherwise each collection's live version is searched.

        With an :attr:`advice_gate` and the ``question`` as asked, the gate judges it once the
        queries are embedded (reusing the standalone question's vector when it is the same
        text) and :class:`PersonalAdviceError` stops the search."""
        vectors = np.asarray(self.embeddings.embed_documents(expansion.queries), dtype=np.float32)
        if self.advice_gate is not None and question is not None:
            same = expansion.queries[0].strip() == question.strip()
            verdict = self.advice_gate.check(question, vectors[0] if same else None)
            if verdict.refused:
                raise PersonalAdviceError(
                    "the advice gate judged this a request for personal medical advice",
                    detail=verdict.detail(),
                    reason="similar_examples",
                )
        if self._reopen_wanted:
            self._reopen_client()
        with self._gate.reading():  # a search never sees the client closed under it
            try:
                return self._search_once(expansion, vectors, collections, k, versions or {})
            except ReactomeAnswersError:
                raise
            except Exception:
                # A cached version may have been replaced by an ingest since: look again once.
                forgotten = [name for name in collections if self._forget_version(name)]
                if not forgotten:
                    raise
                return self._search_once(expansion, vectors, collections, k, versions or {})

    def _store_client(self) -> Any:
        if self.client is None:
            self.client = store.open_client(self.settings)
        return self.client

    def _reopen_client(self) -> None:
        """A new version went live: once no search is running, reopen the client so that
        Chroma closes what it held of the versions it replaced."""
        with self._gate.writing():
            if not self._reopen_wanted:
                return  # another thread reopened it meanwhile
            self._reopen_wanted = False
            if self.client is not None:
                self.client = store.reopen_client(self.settings, self.client)
            with self._lock:
                self._versions.clear()  # their collections belong to the closed client
                # And the indexes of the versions seen so far: a retired one's would stay
                # (its chunk table's memory maps hold file descriptors) since no lookup would
                # see it replaced. No search is running, so none is using them.
                self._indexes.clear()

    def _search_once(
        self,
        expansion: Expansion,
        vectors: np.ndarray[Any, np.dtype[np.float32]],
        collections: Sequence[str],
        k: int,
        pinned: Mapping[str, str],
    ) -> list[Document]:
        question_vector = vectors[0]

        # Stage 1, ids only: every ranked list of every collection, fused (RRF). Lists are
        # merged in collection order, so ties break the same way on every run.
        fused: dict[tuple[str, str], float] = {}
        evidence: dict[tuple[str, str], float] = {}
        versions = {name: self._version_for(name, pinned.get(name)) for name in collections}
        # Tokenized once for every collection's BM25 search and rare words (tokenizing costs
        # more than looking the words up).
        query_tokens = keyword_tokens(expansion.queries) if self.ranking != "dense" else []
        for name in collections:
            lists, keyword = self._ranked_ids(versions[name], query_tokens, vectors)
            for ranked in lists:
                for rank, chunk_id in enumerate(ranked, start=1):
                    fused[(name, chunk_id)] = fused.get((name, chunk_id), 0.0) + 1.0 / (
                        _RRF_K + rank
                    )
            evidence.update(((name, chunk_id), value) for chunk_id, value in keyword.items())

        # Stage 2: only the most promising chunks are read in full (text, metadata, vector);
        # reading every hit of every list was most of the time a question took.
        pool = sorted(fused, key=lambda key: -fused[key])[: self.pool_size]
        wanted: dict[str, list[str]] = {}
        for name, chunk_id in pool:
            wanted.setdefault(name, []).append(chunk_id)
        read: dict[tuple[str, str], _Candidate] = {}
        for name, ids in wanted.items():
            for chunk_id, record in self._read_chunks(versions[name], ids):
                key = (name, chunk_id)
                candidate = _Candidate(
                    chunk_id, name, record.text, record.metadata, record.vector, fused[key]
                )
                candidate.similarity = float(candidate.embedding @ question_vector)
                candidate.score = candidate.similarity + evidence.get((name, chunk_id), 0.0)
                read[(name, chunk_id)] = candidate
        candidates = {key: read[key] for key in pool if key in read}

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

        rerank = self.ranking == "hybrid_rerank"
        entries: list[tuple[float, float, list[_Candidate]]] = []  # score, similarity, chunks
        for group in groups.values():
            similarity = max(c.similarity for c in group)
            if rerank:
                group.sort(key=lambda c: -c.score)
                if group[0].score >= self.min_similarity:
                    entries.append((group[0].score, similarity, group[:_CHUNKS_PER_SOURCE]))
            elif similarity >= self.min_similarity:
                entries.append((group[0].fused, similarity, group[:_CHUNKS_PER_SOURCE]))
        if rerank:
            entries = self._gated(entries)
        entries.sort(key=lambda entry: -entry[0])
        return [
            Document(
                page_content="\n\n".join(c.text for c in group),
                id=group[0].chunk_id,
                metadata={**group[0].metadata, "relevance": round(similarity, 4)},
            )
            for _, similarity, group in entries[:k]
        ]

    def _read_chunks(
        self, version: store.StoredVersion, ids: list[str]
    ) -> Iterator[tuple[str, ChunkRecord]]:
        """Text, metadata and vector of each chunk of ``ids`` that exists: from the version's
        chunk table, or from Chroma for a version ingested before tables existed."""
        index = self.version_index(version)
        if index.table is not None:
            present = [chunk_id for chunk_id in ids if chunk_id in index.rows]
            records = index.table.read([index.rows[chunk_id] for chunk_id in present])
            yield from zip(present, records, strict=True)
            return
        included: Any = ["documents", "metadatas", "embeddings"]
        got = version.collection.get(ids=ids, include=included)
        documents, metadatas = got["documents"] or [], got["metadatas"] or []
        embeddings = got["embeddings"] if got["embeddings"] is not None else []
        for position, chunk_id in enumerate(got["ids"]):
            vector = np.asarray(embeddings[position], dtype=np.float32)
            yield (
                chunk_id,
                ChunkRecord(documents[position], dict(metadatas[position] or {}), vector),
            )

    def _gated(
        self, entries: list[tuple[float, float, list[_Candidate]]]
    ) -> list[tuple[float, float, list[_Candidate]]]:
        """The entries worth showing, by similarity to the question (comparable across
        collections, unlike keyword evidence). Nothing when no entry is similar enough: an
        off-topic question's rare words must not conjure sources. And no entry of a
        collection whose best is far behind another's: the user guide's disease list for a
        question about one disease, or pathways for a question listing variants."""
        if not entries or max(similarity for _, similarity, _ in entries) < self.min_similarity:
            return []
        if self.collection_margin is None:
            return entries
        best: dict[str, float] = {}
        for _, similarity, group in entries:
            name = group[0].collection
            best[name] = max(best.get(name, similarity), similarity)
        floor = max(best.values()) - self.collection_margin
        return [entry for entry in entries if best[entry[2][0].collection] >= floor]

    def _live_version(self, name: str) -> store.StoredVersion:
        """The live version of a collection, looked up at most every few seconds: listing
        Chroma's collections costs more than a query."""
        now = time.monotonic()
        with self._lock:
            cached = self._versions.get(name)
        if cached is not None and now - cached[0] < _VERSION_TTL_S:
            return cached[1]
        version = store.check_embedding_model(self._store_client(), name, self.settings)
        with self._lock:
            self._versions[name] = (now, version)
            if cached is not None and cached[1].name != version.name:
                # Swapped by an ingest: the old version's keyword index is not needed again,
                # and the client is reopened before the next search to release its vectors.
                self._indexes.pop(cached[1].name, None)
                self._reopen_wanted = True
        return version

    def _version_for(self, name: str, wanted: str | None) -> store.StoredVersion:
        """The version ``wanted`` of collection ``name`` when given (an ingest may have made
        another live since the request began: it still reads the one it started on), else
        the live one."""
        live = self._live_version(name)
        if wanted is None or live.name == wanted:
            return live
        return store.version_named(self._store_client(), wanted)

    def _forget_version(self, name: str) -> bool:
        with self._lock:
            return self._versions.pop(name, None) is not None

    def _ranked_ids(
        self,
        version: store.StoredVersion,
        query_tokens: Sequence[Sequence[str]],
        vectors: np.ndarray[Any, np.dtype[np.float32]],
    ) -> tuple[list[list[str]], dict[str, float]]:
        """One collection's ranked chunk ids: a dense list per query, then a BM25 list per
        query (``query_tokens``, the standalone question's first), as the ranking asks; and,
        for hybrid_rerank, each chunk's keyword evidence."""
        lists: list[list[str]] = []
        evidence: dict[str, float] = {}
        stored = self.version_index(version)
        if self.ranking != "bm25":
            table, keyword_index = stored.table, stored.keyword
            if (
                table is not None
                and keyword_index is not None
                and (len(table) <= self.exact_search_max_chunks)
            ):
                ids = keyword_index.chunk_ids
                nearest = table.nearest(vectors, self.fetch_k)
                lists += [[ids[row] for row in rows] for rows in nearest]
            else:
                found = version.collection.query(
                    query_embeddings=vectors, n_results=self.fetch_k, include=["distances"]
                )
                lists += [list(ids) for ids in found["ids"]]
        if self.ranking != "dense":
            index = stored.keyword
            if index is not None:
                keyword_lists = index.search_tokens(query_tokens, self.fetch_k)
                lists += [[chunk_id for chunk_id, _ in ranked] for ranked in keyword_lists]
                if self.ranking == "hybrid_rerank":
                    evidence = self._keyword_evidence(index, query_tokens[0], keyword_lists)
        return lists, evidence

    def _keyword_evidence(
        self,
        index: KeywordIndex,
        question_tokens: Sequence[str],
        keyword_lists: list[list[tuple[str, float]]],
    ) -> dict[str, float]:
        """What each chunk's keyword matches add to its similarity. BM25 scores are only
        comparable within a list, so each counts by how far it stands above its list (in
        standard deviations, and as a share of the list's best), taking the chunk's best
        list among the queries."""
        standing: dict[str, float] = {}
        share: dict[str, float] = {}
        for ranked in keyword_lists:
            if not ranked:
                continue
            # Plain Python: for twenty scores numpy's call overhead costs more than the sums.
            top, mean = ranked[0][1], sum(score for _, score in ranked) / len(ranked)
            spread = math.sqrt(sum((score - mean) ** 2 for _, score in ranked) / len(ranked))
            for chunk_id, score in ranked:
                z = (score - mean) / spread if spread > 0 else 0.0
                standing[chunk_id] = max(standing.get(chunk_id, 0.0), z)
                share[chunk_id] = max(share.get(chunk_id, 0.0), score / top)
        rare = index.rare_term_shares(question_tokens, self.rare_term_max_df)
        return {
            chunk_id: self.bm25_z_weight * standing.get(chunk_id, 0.0)
            + self.bm25_share_weight * share.get(chunk_id, 0.0)
            + self.rare_term_weight * rare.get(chunk_id, 0.0)
            for chunk_id in standing.keys() | rare.keys()
        }

    # --- the retriever interface -----------------------------------------------------------

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        history: Sequence[tuple[str, str]] = (),
        collections: Sequence[str] | None = None,
        versions: Mapping[str, str] | None = None,
    ) -> list[Document]:
        expansion = self._expand(query, history, run_manager)
        stop_if_personal_advice(expansion)
        if expansion.fallback:
            run_manager.get_child().on_custom_event(
                EXPANSION_FALLBACK, _fallback_data(expansion), run_id=run_manager.run_id
            )
        chosen = self._collections_for(expansion, collections)
        run_manager.get_child().on_custom_event(
            EXPANSION, _expansion_data(expansion, chosen), run_id=run_manager.run_id
        )
        return self.search(expansion, chosen, k or self.k, question=query, versions=versions)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        history: Sequence[tuple[str, str]] = (),
        collections: Sequence[str] | None = None,
        versions: Mapping[str, str] | None = None,
    ) -> list[Document]:
        expansion = await self._aexpand(query, history, run_manager)
        stop_if_personal_advice(expansion)
        if expansion.fallback:
            await run_manager.get_child().on_custom_event(
                EXPANSION_FALLBACK, _fallback_data(expansion), run_id=run_manager.run_id
            )
        chosen = self._collections_for(expansion, collections)
        await run_manager.get_child().on_custom_event(
            EXPANSION, _expansion_data(expansion, chosen), run_id=run_manager.run_id
        )
        return await asyncio.to_thread(
            functools.partial(
                self.search, expansion, chosen, k or self.k, question=query, versions=versions
            )
        )
