"""The one top-level retriever: expand, search every collection two ways, fuse, re-rank, cap.

For a question it runs the expander (a child run, so its tokens are visible to callbacks but
tagged as the expander's; ``expander_run``), embeds the standalone question and every
alternative query in one batch, and for each routed collection runs one dense query for all
of them and one BM25 search per query, on the versions ``active_versions`` keeps. All ranked
lists are fused with reciprocal rank fusion and the best fused chunks are read in full. Each
is scored by its similarity to the question plus its keyword evidence (how far it stands out
in the BM25 lists, and the question's rare words it holds); one entry is kept per entity
(stable id or url), entries scoring under the threshold are dropped, and so are the
collections whose best entry is far less similar to the question than another collection's
best. The survivors are ranked by score and capped (the arithmetic is ``ranking``'s). The
order of the returned documents is the sources' numbering.

A question in another language than English is also searched through the multilingual model
when one is configured and the chunk tables hold its vectors (decision 0037): its ranked lists
join the fusion, and a chunk's similarity is the better of the two models', the multilingual
one's brought onto the English model's scale (``ranking.blended_similarity``). It also gets
its English as one more query, so that the keyword search has words to match: translated by
Apertium where its pairs are installed (Spanish, French, Italian, Portuguese:
``pipelines.language.english_translation``), a Chinese or Japanese question's words from a
dictionary (``pipelines.language.english_gloss``).

Before it returns, the retriever sends the candidates it considered and what became of each
(kept with the number the handler gives it, or why it was dropped) as the custom callback
event ``reactome-answers:retrieval``, which the event log keeps (``retrieval_record``). When
every handler that takes it reads its records only once the answer has ended (a trace with
no log), it sends what makes the record instead (``PendingRecord``), made then, off the
answer's path (decision 0044).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
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
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr

from pipelines.catalog.catalog import Catalog, catalog_for
from pipelines.citations.sources import number_sources
from pipelines.core.errors import PersonalAdviceError, ReactomeAnswersError
from pipelines.core.memory import give_back_freed_memory
from pipelines.core.options import RequestOptions
from pipelines.core.settings import Settings
from pipelines.core.tags import ADVICE_RECORD, RETRIEVAL_RECORD
from pipelines.index import store
from pipelines.index.chunk_sentences import pooling_model
from pipelines.index.chunk_table import ChunkRecord, multilingual_key
from pipelines.index.keyword_index import keyword_tokens
from pipelines.index.version_index import VersionIndex
from pipelines.language import (
    DEFAULT_LANGUAGE,
    detect_language,
    english_gloss,
    english_translation,
)
from pipelines.retrieval.active_versions import ActiveVersions
from pipelines.retrieval.advice import AdviceGate, AdviceVerdict
from pipelines.retrieval.expander import Expansion
from pipelines.retrieval.expander_run import (
    EXPANSION,
    EXPANSION_FALLBACK,
    aexpand,
    expand,
    expansion_data,
    fallback_data,
    stop_if_personal_advice,
)
from pipelines.retrieval.ranking import (
    ScoredChunk,
    best_first,
    blended_similarity,
    entity_of,
    keyword_evidence,
    rank_sources,
    rank_with_outcomes,
    reciprocal_rank_fusion,
)
from pipelines.retrieval.retrieval_record import (
    RECORD_BOUND,
    PendingRecord,
    QueryLists,
    RetrievalRecord,
)

__all__ = [
    "EXPANSION",
    "EXPANSION_FALLBACK",
    "RANKINGS",
    "RETRIEVAL_RECORD",
    "Ranking",
    "ReactomeRetriever",
]

# How candidates are found and ordered; the default is the last. The others exist so the
# evaluation (tests/benchmarks/eval_quality.py) can compare them on the same index.
Ranking = Literal["dense", "bm25", "hybrid", "hybrid_rerank"]
RANKINGS: tuple[Ranking, ...] = ("dense", "bm25", "hybrid", "hybrid_rerank")

_Matrix = np.ndarray[Any, np.dtype[np.float32]]


# The languages written in Han characters, whose words a dictionary gives in English.
_GLOSSED = frozenset({"zh", "ja"})


@functools.cache
def _after_the_first_gloss() -> None:
    # The first gloss read the dictionary, and glibc kept what its parse freed (a dict of
    # 175,000 strings): a server's memory grew by 19 MB, of which the packed table is 7.5.
    give_back_freed_memory()


_beside_pool: ThreadPoolExecutor | None = None
_beside_lock = threading.Lock()


def _beside() -> ThreadPoolExecutor:
    """The threads that embed a question by the multilingual model beside the English one
    (one per core: each embedding is single-threaded)."""
    global _beside_pool
    with _beside_lock:
        if _beside_pool is None:
            _beside_pool = ThreadPoolExecutor(
                os.cpu_count() or 1, thread_name_prefix="multilingual-question"
            )
        return _beside_pool


@dataclass(frozen=True)
class _SecondSearch:
    """The question embedded by the multilingual model (one row), and what a chunk table
    records of that model (its vectors are searched only where they match)."""

    vectors: _Matrix
    key: dict[str, Any]


def _second_search(model: Embeddings, question: str) -> _SecondSearch:
    vector = np.asarray(model.embed_query(question), dtype=np.float32)
    return _SecondSearch(vector[np.newaxis], multilingual_key(model))


# Who takes a run's custom events: nobody (None); only handlers that read them once the
# answer has ended ("later"); some handler as they come ("now").
_Listening = Literal["later", "now"] | None


def _listening(
    run_manager: CallbackManagerForRetrieverRun | AsyncCallbackManagerForRetrieverRun,
) -> _Listening:
    """Who takes the run's custom events (they go to its children's handlers, the
    inheritable ones): the expansion, the advice gate's ruling and the retrieval record are
    made for them, and not made when none would read them (the pipeline's handler with no
    log and no trace takes none); for handlers that all read their records only once the
    answer has ended (``reads_records_later``: a trace with no log), the retrieval record
    is made then, off the answer's path."""
    takers = [h for h in run_manager.inheritable_handlers if not h.ignore_custom_event]
    if not takers:
        return None
    return "later" if all(getattr(h, "reads_records_later", False) for h in takers) else "now"


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
    multilingual: Callable[[], Embeddings | None] | None = Field(
        default=None,
        description="gives the multilingual model (loaded on first use) searched beside "
        "`embeddings` for a question not in English, where the chunk tables hold its vectors "
        "(decision 0037); None: every question is searched by `embeddings` alone",
    )
    translation: Callable[[str, str], str | None] | None = Field(
        default=english_translation,
        description="(question, language) -> the question in English, or None: one more "
        "query for a question in another language where the multilingual search is on "
        "(by default Apertium where its pairs are installed, decision 0037)",
    )
    multilingual_scale: tuple[float, float] = Field(
        # Chosen on the development half of the translated questions
        # (tests/benchmarks/fit_multilingual_scale.py, decision 0037): the slope by their MRR
        # (it rises to 8 and is flat beyond), the intercept so that the median multilingual
        # cosine of a translation to the chunks its English form finds best lands on the
        # median cosine of that English form to them.
        default=(8.0, -6.065),
        description="(slope, intercept) bringing the multilingual model's cosine onto the "
        "scale of `embeddings`' cosine, so thresholds and margins mean the same for both",
    )
    multilingual_collection_margin: float | None = Field(
        default=0.2,
        description="collection_margin for a search through the multilingual model too: its "
        "scale is stretched (slope 8 where a least-squares fit gives 3.1), so the English "
        "margin would cut collections at a third of the difference it means",
    )
    collections: list[str] | None = Field(
        default=None, description="fixed collections instead of the expander's routing"
    )
    ranking: Ranking = Field(
        default="hybrid_rerank",
        description="dense or BM25 alone, both fused (RRF), or fused then re-ranked by "
        "similarity to the question",
    )
    record_candidates: bool = Field(
        default=True,
        description="send the candidates considered and their outcomes (the retrieval "
        f"record, at most {RECORD_BOUND} besides those given to the model) as a custom "
        "callback event before returning; off only to measure what it costs",
    )
    # The live versions, their local indexes and the client; from `client` at construction.
    _live: ActiveVersions = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        self._live = ActiveVersions(
            self.settings,
            self.client,
            self._multilingual_model,
            lambda: pooling_model(self.embeddings),
        )

    def _multilingual_model(self) -> Embeddings | None:
        return self.multilingual() if self.multilingual is not None else None

    def _across_languages(
        self, expansion: Expansion, question: str | None
    ) -> tuple[Expansion, Future[_SecondSearch] | None]:
        """For a question not in English, where the multilingual search is on: the expansion
        with the question in English as one more query (translated by Apertium where it can
        be, or a Chinese or Japanese question's words from the dictionary), and the
        multilingual search of the question, started in the background. Otherwise the
        expansion as it is, and None."""
        if self.multilingual is None:
            return expansion, None
        language = detect_language(question if question is not None else expansion.queries[0])
        if language == DEFAULT_LANGUAGE:
            return expansion, None
        model = self._multilingual_model()
        if model is None:
            return expansion, None
        pending = None
        if self.ranking != "bm25":
            # The question as asked (or made standalone) only: the alternative queries are
            # its content words, or a generative expander's rewrites, which the English model
            # reads; embedding them too cost a fifth more time for no better ranking (decision
            # 0037). On a core of its own, while the question is translated and the English
            # model embeds the queries.
            pending = _beside().submit(_second_search, model, expansion.queries[0])
        english = None
        if self.translation is not None and self.settings.translation:
            english = self.translation(expansion.queries[0], language)
        if english is None and language in _GLOSSED and self.ranking != "dense":
            english = english_gloss(expansion.queries[0])
            _after_the_first_gloss()
        if english and english not in expansion.queries:
            # The English form stands in for the alternative queries written in the question's
            # language (the rule expander's are its own words), which the English model and
            # index read poorly: on the development half they added nothing beside it, and
            # embedding them took a quarter of the search's time. Those in English (a symbol, a
            # generative expander's rewrite) are kept.
            asked, *alternatives = expansion.queries
            kept = [q for q in alternatives if detect_language(q) == DEFAULT_LANGUAGE]
            expansion = dataclasses.replace(expansion, queries=[asked, *kept, english])
        return expansion, pending

    @property
    def catalog(self) -> Catalog:
        """The collections the settings declare (bundled, plus ``collections_path``)."""
        return catalog_for(self.settings)

    # --- search ---------------------------------------------------------------------------

    def version_index(self, version: store.StoredVersion) -> VersionIndex:
        """The keyword index and chunk table of ``version`` on this machine: loaded, or built
        from the store when this machine has none (an instance sharing a Chroma server with
        the machine that ingested). One that cannot be built is missing, with the reason
        (the search then ranks by vectors alone, and says so), and is tried again later."""
        return self._live.index(version)

    def active_versions(
        self, names: Sequence[str]
    ) -> dict[str, tuple[store.StoredVersion, VersionIndex]]:
        """The live version of each ingested collection of ``names`` with its local indexes,
        as a search would use them now (built here if this machine has none yet); a
        collection that is not ingested, or not readable with these settings, is left out."""
        return self._live.active_versions(names)

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
        documents, _ = self._search(expansion, collections, k, question, versions, None, False)
        return documents

    def search_recorded(
        self,
        expansion: Expansion,
        collections: Sequence[str],
        k: int,
        *,
        question: str | None = None,
        versions: Mapping[str, str] | None = None,
        cite_urls: bool | None = None,
        record: bool = True,
        judged: list[tuple[AdviceVerdict, float, float]] | None = None,
    ) -> tuple[list[Document], RetrievalRecord | None]:
        """:meth:`search`, and its retrieval record (``retrieval_record``; None when
        ``record`` or :attr:`record_candidates` is off). The record numbers the sources as
        the handler will, with ``pipelines.citations.number_sources`` and ``cite_urls``
        (None: the settings' ``cite_urls``). ``judged`` receives the advice gate's verdict
        and when it started and ended, should the gate rule."""
        documents, pending = self._search(
            expansion, collections, k, question, versions, cite_urls, record, judged
        )
        return documents, pending.made() if pending is not None else None

    def _search_for(
        self,
        listening: _Listening,
        expansion: Expansion,
        collections: Sequence[str],
        k: int,
        *,
        question: str,
        options: RequestOptions,
        numbered: bool,
        judged: list[tuple[AdviceVerdict, float, float]],
    ) -> tuple[list[Document], dict[str, Any] | PendingRecord | None]:
        """:meth:`search`, and the retrieval record's event data for the handlers
        ``listening``: the record, or one to make once the answer has ended for handlers
        that read it only then; None for none, or without the request's ``options``
        (``numbered``), as :meth:`search_recorded` has it."""
        documents, pending = self._search(
            expansion,
            collections,
            k,
            question,
            options.versions,
            options.cite_urls,
            numbered and listening is not None,
            judged,
        )
        if pending is None or listening == "later":
            return documents, pending
        return documents, pending.record()

    def _search(
        self,
        expansion: Expansion,
        collections: Sequence[str],
        k: int,
        question: str | None,
        versions: Mapping[str, str] | None,
        cite_urls: bool | None,
        record: bool,
        judged: list[tuple[AdviceVerdict, float, float]] | None = None,
    ) -> tuple[list[Document], PendingRecord | None]:
        """The documents, and with ``record`` (and :attr:`record_candidates`) the retrieval
        record still to be made, numbered with ``cite_urls`` (None: the settings')."""
        cite = self.settings.cite_urls if cite_urls is None else cite_urls
        record_cite_urls = cite if self.record_candidates and record else None
        expansion, pending = self._across_languages(expansion, question)
        vectors = np.asarray(self.embeddings.embed_documents(expansion.queries), dtype=np.float32)
        # Before the gate, which judges such a question by the same vector (the model keeps
        # its last questions' vectors): one embedding, not two at once.
        second = pending.result() if pending is not None else None
        if self.advice_gate is not None and question is not None:
            same = expansion.queries[0].strip() == question.strip()
            started = time.perf_counter()
            verdict = self.advice_gate.check(question, vectors[0] if same else None)
            if judged is not None:
                judged.append((verdict, started, time.perf_counter()))
            if verdict.refused:
                raise PersonalAdviceError(
                    "the advice gate judged this a request for personal medical advice",
                    detail=verdict.detail(),
                    reason="similar_examples",
                )
        with self._live.searching():  # a search never sees the client closed under it
            arguments = (
                expansion,
                vectors,
                collections,
                k,
                versions or {},
                record_cite_urls,
                second,
            )
            try:
                return self._search_once(*arguments)
            except ReactomeAnswersError:
                raise
            except Exception:
                # A cached version may have been replaced by an ingest since: look again once.
                forgotten = [name for name in collections if self._live.forget(name)]
                if not forgotten:
                    raise
                return self._search_once(*arguments)

    def _search_once(
        self,
        expansion: Expansion,
        vectors: np.ndarray[Any, np.dtype[np.float32]],
        collections: Sequence[str],
        k: int,
        pinned: Mapping[str, str],
        record_cite_urls: bool | None = None,
        second: _SecondSearch | None = None,
    ) -> tuple[list[Document], PendingRecord | None]:
        """The documents, and the retrieval record numbered with ``record_cite_urls``, to be
        made (none when None); ``second``: the multilingual search, if any."""
        question_vector = vectors[0]

        # Stage 1, ids only: every ranked list of every collection, fused (RRF). Lists are
        # given in collection order, so ties break the same way on every run.
        lists: list[list[tuple[str, str]]] = []
        by_collection: dict[str, QueryLists] = {}
        evidence: dict[tuple[str, str], float] = {}
        versions = {name: self._live.version_for(name, pinned.get(name)) for name in collections}
        # Tokenized once for every collection's BM25 search and rare words (tokenizing costs
        # more than looking the words up).
        query_tokens = keyword_tokens(expansion.queries) if self.ranking != "dense" else []
        for name in collections:
            ranked, keyword = self._ranked_ids(versions[name], query_tokens, vectors, second)
            by_collection[name] = ranked
            for ranked_ids in (*ranked.dense, *ranked.keyword, *ranked.multilingual):
                lists.append([(name, chunk_id) for chunk_id in ranked_ids])
            evidence.update(((name, chunk_id), value) for chunk_id, value in keyword.items())
        fused = reciprocal_rank_fusion(lists)

        # Stage 2: only the most promising chunks are read in full (text, metadata, vector);
        # reading every hit of every list was most of the time a question took.
        pool = best_first(fused, self.pool_size)
        wanted: dict[str, list[str]] = {}
        for name, chunk_id in pool:
            wanted.setdefault(name, []).append(chunk_id)
        records: dict[tuple[str, str], ChunkRecord] = {}
        scored: dict[tuple[str, str], ScoredChunk] = {}
        for name, ids in wanted.items():
            blend = second is not None and bool(by_collection[name].multilingual)
            for chunk_id, record in self._read_chunks(versions[name], ids, multilingual=blend):
                key = (name, chunk_id)
                similarity = float(record.vector @ question_vector)
                if blend and second is not None and record.multilingual is not None:
                    similarity = blended_similarity(
                        similarity,
                        float(record.multilingual @ second.vectors[0]),
                        self.multilingual_scale,
                    )
                records[key] = record
                scored[key] = ScoredChunk(
                    chunk_id,
                    name,
                    entity_of(name, chunk_id, record.metadata),
                    fused[key],
                    similarity,
                    similarity + evidence.get(key, 0.0),
                )

        read = [scored[key] for key in pool if key in scored]
        rerank = self.ranking == "hybrid_rerank"
        blended = second is not None and any(lists.multilingual for lists in by_collection.values())
        margin = self.multilingual_collection_margin if blended else self.collection_margin
        outcomes = None
        if record_cite_urls is None:
            entries = rank_sources(
                read,
                rerank=rerank,
                min_similarity=self.min_similarity,
                collection_margin=margin,
                k=k,
            )
        else:  # the same entries, and what became of every chunk
            ranked_sources = rank_with_outcomes(
                read,
                rerank=rerank,
                min_similarity=self.min_similarity,
                collection_margin=margin,
                k=k,
            )
            entries, outcomes = ranked_sources.entries, ranked_sources.outcomes
        documents = []
        for entry in entries:
            chunks = [records[(c.collection, c.chunk_id)] for c in entry.chunks]
            documents.append(
                Document(
                    page_content="\n\n".join(chunk.text for chunk in chunks),
                    id=entry.chunks[0].chunk_id,
                    metadata={**chunks[0].metadata, "relevance": round(entry.similarity, 4)},
                )
            )
        if outcomes is None or record_cite_urls is None:
            return documents, None
        # Numbered exactly as the handler will number them, so the record's n cannot drift.
        sources, _ = number_sources(documents, cite_urls=record_cite_urls)
        number_of = {id(source.document): source.n for source in sources}
        return documents, PendingRecord(
            queries=expansion.queries,
            collections=collections,
            considered=len(fused),
            pool=read,
            metadata={key: records[key].metadata for key in scored},
            lists=by_collection,
            outcomes=outcomes,
            entries=entries,
            numbers=[number_of.get(id(document)) for document in documents],
        )

    def _read_chunks(
        self, version: store.StoredVersion, ids: list[str], *, multilingual: bool = False
    ) -> Iterator[tuple[str, ChunkRecord]]:
        """Text, metadata and vector of each chunk of ``ids`` that exists: from the version's
        chunk table (with its multilingual vector too, when asked), or from Chroma for a
        version ingested before tables existed."""
        index = self.version_index(version)
        if index.table is not None:
            present = [chunk_id for chunk_id in ids if chunk_id in index.rows]
            rows = [index.rows[chunk_id] for chunk_id in present]
            records = index.table.read(rows, multilingual=multilingual)
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

    def _ranked_ids(
        self,
        version: store.StoredVersion,
        query_tokens: Sequence[Sequence[str]],
        vectors: np.ndarray[Any, np.dtype[np.float32]],
        second: _SecondSearch | None = None,
    ) -> tuple[QueryLists, dict[str, float]]:
        """One collection's ranked chunk ids: a dense list per query and a BM25 list per
        query (``query_tokens``, the standalone question's first), as the ranking asks, and
        a multilingual list per query for ``second`` where the chunk table holds that
        model's vectors; and, for hybrid_rerank, each chunk's keyword evidence."""
        multilingual: list[list[str]] = []
        dense: list[list[str]] = []
        keyword: list[list[str]] = []
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
                dense = [[ids[row] for row in rows] for rows in nearest]
            else:
                found = version.collection.query(
                    query_embeddings=vectors, n_results=self.fetch_k, include=["distances"]
                )
                dense = [list(ids) for ids in found["ids"]]
            if second is not None and table is not None and keyword_index is not None:
                held = table.multilingual
                if held is not None and held.describe() == second.key:
                    ids = keyword_index.chunk_ids
                    nearest = table.nearest(second.vectors, self.fetch_k, multilingual=True)
                    multilingual = [[ids[row] for row in rows] for rows in nearest]
        if self.ranking != "dense":
            index = stored.keyword
            if index is not None:
                keyword_lists = index.search_tokens(query_tokens, self.fetch_k)
                keyword = [[chunk_id for chunk_id, _ in ranked] for ranked in keyword_lists]
                if self.ranking == "hybrid_rerank":
                    evidence = keyword_evidence(
                        keyword_lists,
                        index.rare_term_shares(query_tokens[0], self.rare_term_max_df),
                        z_weight=self.bm25_z_weight,
                        share_weight=self.bm25_share_weight,
                        rare_weight=self.rare_term_weight,
                    )
        return QueryLists(dense, keyword, multilingual), evidence

    # --- the retriever interface -----------------------------------------------------------

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        options: RequestOptions | None = None,
    ) -> list[Document]:
        # Without the request's options (a retriever handed to the pipeline from outside, or
        # called on its own) the record could number sources by other cite_urls than the
        # handler's: then there is none.
        numbered = options is not None
        options = options or RequestOptions()
        expansion = expand(
            self.expander,
            query,
            options.history,
            max_queries=self.max_queries,
            catalog=self.catalog,
            run_manager=run_manager,
        )
        stop_if_personal_advice(expansion)
        # The records below are built only for a handler that takes them.
        listening = _listening(run_manager)
        if expansion.fallback and listening:
            run_manager.get_child().on_custom_event(
                EXPANSION_FALLBACK, fallback_data(expansion), run_id=run_manager.run_id
            )
        chosen = self._collections_for(expansion, options.collections)
        if listening:
            run_manager.get_child().on_custom_event(
                EXPANSION, expansion_data(expansion, chosen), run_id=run_manager.run_id
            )
        judged: list[tuple[AdviceVerdict, float, float]] = []
        try:
            documents, record = self._search_for(
                listening,
                expansion,
                chosen,
                k or self.k,
                question=query,
                options=options,
                numbered=numbered,
                judged=judged,
            )
        finally:  # the gate's ruling, refusal or not, for the log and the trace
            for verdict, started, ended in judged if listening else ():
                run_manager.get_child().on_custom_event(
                    ADVICE_RECORD, verdict.timed(started, ended), run_id=run_manager.run_id
                )
        if record is not None:  # before returning: the log holds it before the citations
            run_manager.get_child().on_custom_event(
                RETRIEVAL_RECORD, record, run_id=run_manager.run_id
            )
        return documents

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        options: RequestOptions | None = None,
    ) -> list[Document]:
        # Without the request's options (a retriever handed to the pipeline from outside, or
        # called on its own) the record could number sources by other cite_urls than the
        # handler's: then there is none.
        numbered = options is not None
        options = options or RequestOptions()
        expansion = await aexpand(
            self.expander,
            query,
            options.history,
            max_queries=self.max_queries,
            catalog=self.catalog,
            run_manager=run_manager,
        )
        stop_if_personal_advice(expansion)
        # The records below are built only for a handler that takes them.
        listening = _listening(run_manager)
        if expansion.fallback and listening:
            await run_manager.get_child().on_custom_event(
                EXPANSION_FALLBACK, fallback_data(expansion), run_id=run_manager.run_id
            )
        chosen = self._collections_for(expansion, options.collections)
        if listening:
            await run_manager.get_child().on_custom_event(
                EXPANSION, expansion_data(expansion, chosen), run_id=run_manager.run_id
            )
        judged: list[tuple[AdviceVerdict, float, float]] = []
        try:
            documents, record = await asyncio.to_thread(
                functools.partial(
                    self._search_for,
                    listening,
                    expansion,
                    chosen,
                    k or self.k,
                    question=query,
                    options=options,
                    numbered=numbered,
                    judged=judged,
                )
            )
        finally:  # the gate's ruling, refusal or not, for the log and the trace
            for verdict, started, ended in judged if listening else ():
                await run_manager.get_child().on_custom_event(
                    ADVICE_RECORD, verdict.timed(started, ended), run_id=run_manager.run_id
                )
        if record is not None:  # before returning: the log holds it before the citations
            await run_manager.get_child().on_custom_event(
                RETRIEVAL_RECORD, record, run_id=run_manager.run_id
            )
        return documents
