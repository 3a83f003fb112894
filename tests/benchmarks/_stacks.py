"""The two retrieval stacks the benchmark compares, built over the same Chroma collections.

- ours: :class:`pipelines.retrieval.retriever.ReactomeRetriever` (one batched embedding of
  all queries, one Chroma query and one BM25 search per query per collection, fused, re-ranked);
- classic: what people build with LangChain today, ``MultiQueryRetriever`` over a
  ``MergerRetriever`` of one ``EnsembleRetriever(BM25Retriever, Chroma retriever)`` per
  collection, from ``langchain_classic``.

Both get the same zero-latency expander, producing the same alternative queries.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

from chromadb.api import ClientAPI
from langchain_chroma import Chroma
from langchain_classic.retrievers import EnsembleRetriever, MergerRetriever, MultiQueryRetriever
from langchain_community.retrievers import BM25Retriever
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.messages import BaseMessage
from langchain_core.retrievers import BaseRetriever

from pipelines.core.composed_chat import ComposedChatModel
from pipelines.core.settings import Settings
from pipelines.index import store
from pipelines.retrieval.expander import _read_expander_prompt
from pipelines.retrieval.retriever import ReactomeRetriever

ALTERNATIVES = 4
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*")
_STOP = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "do",
        "does",
        "for",
        "from",
        "how",
        "in",
        "is",
        "it",
        "of",
        "on",
        "or",
        "the",
        "to",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "with",
    }
)


def alternatives(question: str) -> list[str]:
    """Four fixed rewrites of a question, the same for both stacks."""
    words = [w for w in _WORD.findall(question) if w.lower() not in _STOP]
    core = " ".join(words) or question
    return [core, f"{core} mechanism", f"{core} disease", f"role of {core} in human cells"]


class FixedExpander(ComposedChatModel):
    """A zero-latency expander: ours reads its JSON, the classic stack its lines."""

    collections: list[str]
    json_reply: bool = True

    @property
    def _llm_type(self) -> str:
        return "fixed-expander"

    def reply(self, messages: list[BaseMessage]) -> str:
        if self.json_reply:
            question, _ = _read_expander_prompt(messages)
            return json.dumps(
                {
                    "question": question,
                    "queries": alternatives(question),
                    "collections": self.collections,
                }
            )
        question = str(messages[-1].content).rsplit("Original question: ", 1)[-1].strip()
        return "\n".join(alternatives(question))


def ours(
    settings: Settings,
    client: ClientAPI,
    embeddings: Embeddings,
    collections: Sequence[str],
    *,
    k: int = 10,
    multilingual: Callable[[], Embeddings | None] | None = None,
) -> ReactomeRetriever:
    return ReactomeRetriever(
        settings=settings,
        client=client,
        embeddings=embeddings,
        expander=FixedExpander(collections=list(collections)),
        k=k,
        max_queries=ALTERNATIVES,
        multilingual=multilingual,
    )


def _all_documents(client: ClientAPI, name: str) -> list[Document]:
    version = store.active_version(client, name)
    assert version is not None, f"{name} is not ingested"
    documents: list[Document] = []
    offset, page = 0, 5000
    while True:
        got = version.collection.get(include=["documents", "metadatas"], limit=page, offset=offset)
        for text, metadata in zip(got["documents"] or [], got["metadatas"] or [], strict=True):
            documents.append(Document(page_content=text, metadata=dict(metadata or {})))
        if len(got["ids"]) < page:
            return documents
        offset += page


def classic(
    client: ClientAPI, embeddings: Embeddings, collections: Sequence[str], *, k: int = 10
) -> BaseRetriever:
    per_collection: list[BaseRetriever] = []
    for name in collections:
        version = store.active_version(client, name)
        assert version is not None, f"{name} is not ingested"
        keyword = BM25Retriever.from_documents(_all_documents(client, name), k=k)
        dense = Chroma(
            client=client, collection_name=version.name, embedding_function=embeddings
        ).as_retriever(search_kwargs={"k": k})
        per_collection.append(EnsembleRetriever(retrievers=[keyword, dense], weights=[0.5, 0.5]))
    return MultiQueryRetriever.from_llm(
        retriever=MergerRetriever(retrievers=per_collection),
        llm=FixedExpander(collections=[], json_reply=False),
        include_original=True,
    )
