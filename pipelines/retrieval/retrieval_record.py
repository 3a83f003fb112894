"""The retrieval record: the candidates one search considered and what became of each.

The retriever sends it as the custom callback event ``reactome-answers:retrieval``
(:data:`pipelines.core.tags.RETRIEVAL_RECORD`) before it returns, so the event log holds it
before the citations; ``replay --candidates``, ``logs show --candidates`` and the log page
read it. Plain arithmetic over what the search already has: nothing here reads a store.

Its shape (floats rounded to 4 digits, to keep logs small)::

    {"queries": [...], "collections": [...], "bound": B, "considered": C, "read": R,
     "candidates": [{"collection", "st_id", "url", "title", "chunk_id",
                     "ranks": [{"dense": int | None, "keyword": int | None} per query],
                     "fused", "similarity", "keyword_evidence", "score", "outcome", "n"}]}

``considered`` counts every chunk some ranked list found (the fused candidates); ``read`` the
ones read in full and ranked (the pool, at most ``pool_size``); ``candidates`` are the
:data:`RECORD_BOUND` best fused of those, plus every chunk whose text went to the model
should it rank lower, best fused first. Ranks are 1-based, within the chunk's collection,
per query in the order of ``queries`` (the standalone question first); None where that
search did not find it (or did not run: BM25 with ``ranking="dense"``). A question searched
through the multilingual model too (decision 0037) has a third rank per query,
``"multilingual"``; other records have none.

Outcomes (:data:`OUTCOMES`): ``kept`` is a source's lead chunk with the ``n`` the handler
numbers it by, so the ``kept`` candidates in order of ``n`` are exactly the citation events;
``context`` a lead the model was given without a number (a user-guide page when urls are not
cited), ``n`` None; ``runner_up`` a shown source's second chunk, whose text joins its lead's
(``n`` is that source's number, or None); ``duplicate`` a further chunk of a shown source;
``below_threshold``, ``collection_cut`` and ``over_cap`` as
:func:`pipelines.retrieval.ranking.rank_with_outcomes` says. Every chunk of a dropped entity
carries the entity's reason.

:class:`RetrievalRecord` is that shape typed: :func:`retrieval_record` builds one, its
:meth:`~RetrievalRecord.record` is what the log holds, and :meth:`~RetrievalRecord.read` is
the one reader (``callbacks.log_records.read_retrieval_record``), with the log header's
tolerance rule (``callbacks.log_header``): a missing field takes its default, and a field
holding what this program never writes is read as missing and named in ``problems``, so a log
altered by hand still shows what it can.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, NamedTuple, get_args

from pipelines.core.json_text import finite_number
from pipelines.core.redaction import redact_secrets
from pipelines.retrieval.ranking import ChunkOutcome, ScoredChunk, SourceEntry

__all__ = [
    "OUTCOMES",
    "RECORD_BOUND",
    "Candidate",
    "CandidateOutcome",
    "CandidateRanks",
    "Outcome",
    "PendingRecord",
    "QueryLists",
    "RetrievalRecord",
    "candidate_outcomes",
    "retrieval_record",
]

# Half the default pool: enough to see what just missed the cut (k is 10, each source up to
# two chunks); the record is then about 20 KB, a third of a typical log.
RECORD_BOUND = 50

Outcome = Literal[
    "kept",
    "context",
    "runner_up",
    "duplicate",
    "below_threshold",
    "collection_cut",
    "over_cap",
]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
_OUTCOME_NAMES = frozenset(OUTCOMES)
# The chunks whose text the model was given: always in the record, whatever the bound.
_GIVEN = frozenset({"kept", "context", "runner_up"})

Key = tuple[str, str]  # (collection, chunk id)


@dataclass(frozen=True)
class CandidateRanks:
    """A candidate's 1-based ranks for one query; None where that search did not find it."""

    dense: int | None = None
    keyword: int | None = None
    multilingual: int | None = None  # only when the multilingual model searched


@dataclass(frozen=True)
class Candidate:
    """One chunk the search considered, and what became of it."""

    collection: str = ""
    chunk_id: str = ""
    st_id: str | None = None
    url: str | None = None
    title: str = ""
    ranks: tuple[CandidateRanks, ...] = ()  # per query, in the record's order
    fused: float | None = None
    similarity: float | None = None
    keyword_evidence: float | None = None
    score: float | None = None
    outcome: Outcome | None = None  # None: a log altered by hand named none we know
    n: int | None = None

    def record(self, multilingual: bool) -> dict[str, Any]:
        ranks: list[dict[str, int | None]] = []
        for rank in self.ranks:
            written: dict[str, int | None] = {"dense": rank.dense, "keyword": rank.keyword}
            if multilingual:  # only when the multilingual model searched: English as before
                written["multilingual"] = rank.multilingual
            ranks.append(written)
        return {
            "collection": self.collection,
            "st_id": self.st_id,
            "url": self.url,
            "title": self.title,
            "chunk_id": self.chunk_id,
            "ranks": ranks,
            "fused": self.fused,
            "similarity": self.similarity,
            "keyword_evidence": self.keyword_evidence,
            "score": self.score,
            "outcome": self.outcome,
            "n": self.n,
        }


@dataclass(frozen=True)
class RetrievalRecord:
    """The record of one search (the module's docstring gives its shape)."""

    queries: tuple[str, ...] = ()
    collections: tuple[str, ...] = ()
    bound: int | None = None
    considered: int | None = None
    ranked: int | None = None  # "read" in the log: read in full and ranked
    candidates: tuple[Candidate, ...] = ()
    multilingual: bool = False  # the ranks hold the multilingual model's too
    # Each field read as missing because it held what we never write: why, in words.
    problems: Mapping[str, str] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The record as the log holds it (the data of the custom event)."""
        return {
            "queries": list(self.queries),
            "collections": list(self.collections),
            "bound": self.bound,
            "considered": self.considered,
            "read": self.ranked,
            "candidates": [c.record(self.multilingual) for c in self.candidates],
        }

    @classmethod
    def read(cls, data: Mapping[str, Any], *, brief: bool = False) -> RetrievalRecord:
        """The record in ``data`` (a log's custom event data), by the module's rule. ``brief``
        leaves the candidates unread (none), for a trace, drawn for every answer:
        :func:`candidate_outcomes` reads what it shows of them."""
        problems: dict[str, str] = {}
        rows = [] if brief else data.get("candidates", [])
        if not isinstance(rows, list):
            _problem(problems, "", "candidates", "are not a list")
            rows = []
        candidates = tuple(
            _read_candidate(row, f"candidate {number}", problems)
            for number, row in enumerate(rows, start=1)
        )
        multilingual = any(
            isinstance(row, Mapping)
            and isinstance(row.get("ranks"), list)
            and any(isinstance(rank, Mapping) and "multilingual" in rank for rank in row["ranks"])
            for row in rows
        )
        return cls(
            queries=_texts(data, "queries", problems),
            collections=_texts(data, "collections", problems),
            bound=_count(data, "bound", "", problems),
            considered=_count(data, "considered", "", problems),
            ranked=_count(data, "read", "", problems),
            candidates=candidates,
            multilingual=multilingual,
            problems=problems,
        )


def _problem(problems: dict[str, str], where: str, key: str, why: str) -> None:
    """Name the field (``candidate 3.fused``) and say, in words, why it was read as missing."""
    name = f"{where}.{key}" if where else key
    owner = f"{where}'s" if where else "its"
    problems[name] = f"{owner} {key} {why}"


def _count(data: Mapping[str, Any], key: str, where: str, problems: dict[str, str]) -> int | None:
    value = data.get(key)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    _problem(problems, where, key, "is not a whole number")
    return None


def _number(
    data: Mapping[str, Any], key: str, where: str, problems: dict[str, str]
) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    number = finite_number(value)
    if number is not None:
        return number
    _problem(problems, where, key, "is not a finite number")
    return None


def _text(data: Mapping[str, Any], key: str, where: str, problems: dict[str, str]) -> str | None:
    value = data.get(key)
    if value is None or isinstance(value, str):
        return value
    _problem(problems, where, key, "is not text")
    return None


def _texts(data: Mapping[str, Any], key: str, problems: dict[str, str]) -> tuple[str, ...]:
    value = data.get(key, [])
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    _problem(problems, "", key, "are not a list of text")
    return ()


def _read_ranks(value: object, where: str, problems: dict[str, str]) -> tuple[CandidateRanks, ...]:
    if not isinstance(value, list):
        _problem(problems, where, "ranks", "are not a list")
        return ()
    ranks = []
    for number, rank in enumerate(value, start=1):
        if not isinstance(rank, Mapping):
            _problem(problems, where, f"rank {number}", "is not an object")
            rank = {}
        at = f"{where} rank {number}"
        ranks.append(CandidateRanks(*(_count(rank, name, at, problems) for name in _RANK_NAMES)))
    return tuple(ranks)


_RANK_NAMES = ("dense", "keyword", "multilingual")


def _read_candidate(row: object, where: str, problems: dict[str, str]) -> Candidate:
    if not isinstance(row, Mapping):
        problems[where] = f"{where} is not an object"
        return Candidate()
    outcome = row.get("outcome")
    if outcome is not None and outcome not in OUTCOMES:
        _problem(problems, where, "outcome", "is none this program writes")
        outcome = None
    return Candidate(
        collection=_text(row, "collection", where, problems) or "",
        chunk_id=_text(row, "chunk_id", where, problems) or "",
        st_id=_text(row, "st_id", where, problems),
        url=_text(row, "url", where, problems),
        title=_text(row, "title", where, problems) or "",
        ranks=_read_ranks(row.get("ranks", []), where, problems),
        fused=_number(row, "fused", where, problems),
        similarity=_number(row, "similarity", where, problems),
        keyword_evidence=_number(row, "keyword_evidence", where, problems),
        score=_number(row, "score", where, problems),
        outcome=outcome,
        n=_count(row, "n", where, problems),
    )


class CandidateOutcome(NamedTuple):
    """What became of one candidate, as a summary shows it: its source's id (a chunk id for
    a source with neither), its outcome, its score and its number."""

    id: str
    outcome: Outcome
    score: float | None
    n: int | None


def candidate_outcomes(data: Mapping[str, Any]) -> list[CandidateOutcome]:
    """The record's candidates in ``data`` as :class:`CandidateOutcome`, in order, each field
    read by :meth:`RetrievalRecord.read`'s rule (what this program never writes is missing);
    a candidate with no outcome it writes, or that is not an object, is left out. A fraction
    of reading every field (the ranks most of all), for a trace drawn for every answer."""
    rows = data.get("candidates")
    found = []
    make = CandidateOutcome._make
    for row in rows if isinstance(rows, list) else ():
        if type(row) is not dict and not isinstance(row, Mapping):
            continue
        get = row.get
        outcome = get("outcome")
        if not isinstance(outcome, str) or outcome not in _OUTCOME_NAMES:
            continue
        identifier = _source_id(get("st_id"), get("url"), get("chunk_id"))
        score, n = get("score"), get("n")
        if type(score) is not float or not math.isfinite(score):
            score = None if score is None else finite_number(score)
        if not isinstance(n, int) or isinstance(n, bool):
            n = None
        found.append(make((identifier, outcome, score, n)))
    return found


def _source_id(st_id: object, url: object, chunk_id: object) -> str:
    """A candidate's source as a summary names it: its stable id, else its url, else its
    chunk's id ("" when it has none of them as text)."""
    for identifier in (st_id, url):
        if isinstance(identifier, str) and identifier:
            return identifier
    return chunk_id if isinstance(chunk_id, str) else ""


@dataclass(frozen=True)
class QueryLists:
    """One collection's ranked chunk ids, one list per query for each search that ran."""

    dense: Sequence[Sequence[str]] = field(default_factory=list)
    keyword: Sequence[Sequence[str]] = field(default_factory=list)
    # The multilingual model's, for a question not in English (decision 0037).
    multilingual: Sequence[Sequence[str]] = field(default_factory=list)


def _ranks(lists: Sequence[Sequence[str]], wanted: set[str]) -> list[dict[str, int]]:
    return [
        {chunk_id: rank for rank, chunk_id in enumerate(ranked, start=1) if chunk_id in wanted}
        for ranked in lists
    ]


def _round(value: float) -> float:
    return round(value, 4)


def retrieval_record(
    *,
    queries: Sequence[str],
    collections: Sequence[str],
    considered: int,
    pool: Sequence[ScoredChunk],
    metadata: Mapping[Key, Mapping[str, Any]],
    lists: Mapping[str, QueryLists],
    outcomes: Mapping[Key, ChunkOutcome],
    entries: Sequence[SourceEntry],
    numbers: Sequence[int | None],
    bound: int = RECORD_BOUND,
) -> RetrievalRecord:
    """The record of one search. ``pool``: the chunks read and ranked, best fused first;
    ``metadata``: each one's; ``outcomes``: :func:`rank_with_outcomes`' for them; ``entries``
    the sources it returned, in order, with ``numbers`` the ``n`` each was given (None:
    unnumbered context)."""
    chosen = _Chosen(pool, outcomes, entries, numbers, bound)
    wanted: dict[str, set[str]] = {}
    for c in chosen.chunks:
        wanted.setdefault(c.collection, set()).add(c.chunk_id)
    dense = {name: _ranks(lists[name].dense, ids) for name, ids in wanted.items() if name in lists}
    keyword = {
        name: _ranks(lists[name].keyword, ids) for name, ids in wanted.items() if name in lists
    }
    second = {
        name: _ranks(lists[name].multilingual, ids)
        for name, ids in wanted.items()
        if name in lists and lists[name].multilingual
    }
    candidates = []
    for c in chosen.chunks:
        key = (c.collection, c.chunk_id)
        meta = metadata.get(key, {})
        st_id, url = meta.get("st_id"), meta.get("url")
        candidates.append(
            Candidate(
                collection=c.collection,
                chunk_id=c.chunk_id,
                st_id=st_id if isinstance(st_id, str) and st_id else None,
                url=url if isinstance(url, str) and url else None,
                title=str(meta.get("display_name") or meta.get("title") or "").strip(),
                ranks=tuple(
                    CandidateRanks(
                        dense=_at(dense.get(c.collection, []), number, c.chunk_id),
                        keyword=_at(keyword.get(c.collection, []), number, c.chunk_id),
                        multilingual=_at(second.get(c.collection, []), number, c.chunk_id),
                    )
                    for number in range(len(queries))
                ),
                fused=_round(c.fused),
                similarity=_round(c.similarity),
                keyword_evidence=_round(c.score - c.similarity),
                score=_round(c.score),
                outcome=chosen.outcome(key),
                n=chosen.numbered.get(key),
            )
        )
    record = _bare_record(queries, collections, bound, considered, len(pool), bool(second))
    return replace(record, candidates=tuple(candidates))


def _bare_record(
    queries: Sequence[str],
    collections: Sequence[str],
    bound: int,
    considered: int,
    ranked: int,
    multilingual: bool,
) -> RetrievalRecord:
    """A record with no candidates."""
    return RetrievalRecord(
        # Redacted as the expansion record's: a credential pasted into the question is
        # searched for, but must not reach the disk.
        queries=tuple(redact_secrets(query) for query in queries),
        collections=tuple(collections),
        bound=bound,
        considered=considered,
        ranked=ranked,
        multilingual=multilingual,
    )


class _Chosen:
    """The candidates a record holds (the ``bound`` best fused, and every chunk whose text
    the model was given), each one's outcome and ``n``."""

    def __init__(
        self,
        pool: Sequence[ScoredChunk],
        outcomes: Mapping[Key, ChunkOutcome],
        entries: Sequence[SourceEntry],
        numbers: Sequence[int | None],
        bound: int,
    ) -> None:
        self.numbered: dict[Key, int | None] = {}
        self._context: set[Key] = set()
        self._outcomes = outcomes
        for entry, n in zip(entries, numbers, strict=True):
            lead = entry.chunks[0]
            for c in entry.chunks:
                self.numbered[(c.collection, c.chunk_id)] = n
            if n is None:
                self._context.add((lead.collection, lead.chunk_id))
        self.chunks = [
            c
            for position, c in enumerate(pool)
            if position < bound or self.outcome((c.collection, c.chunk_id)) in _GIVEN
        ]

    def outcome(self, key: Key) -> Outcome:
        found = self._outcomes.get(key, "below_threshold")
        return "context" if found == "kept" and key in self._context else found


@dataclass(frozen=True, eq=False)  # (compared, it would compare whole searches)
class PendingRecord:
    """A search's record not made yet: what :func:`retrieval_record` makes it from (the
    search's own lists, which nothing changes once it has returned). The retriever sends
    it in the record's place to handlers that read their records only once the answer has
    ended (a trace with no log, drawn in the shipper's thread): making the record was most
    of what tracing added to an answer's path."""

    queries: Sequence[str]
    collections: Sequence[str]
    considered: int
    pool: Sequence[ScoredChunk]
    metadata: Mapping[Key, Mapping[str, Any]]
    lists: Mapping[str, QueryLists]
    outcomes: Mapping[Key, ChunkOutcome]
    entries: Sequence[SourceEntry]
    numbers: Sequence[int | None]
    bound: int = RECORD_BOUND

    def made(self) -> RetrievalRecord:
        return retrieval_record(**{f.name: getattr(self, f.name) for f in fields(self)})

    def record(self) -> dict[str, Any]:
        """The record as the log holds it."""
        return self.made().record()

    def brief(self) -> tuple[RetrievalRecord, list[CandidateOutcome]]:
        """What a trace shows of it, as :meth:`RetrievalRecord.read` with ``brief`` and
        :func:`candidate_outcomes` read it from :meth:`record`, at a fraction of the cost
        (no ranks, no candidate made): the record without its candidates, and what became
        of each."""
        chosen = _Chosen(self.pool, self.outcomes, self.entries, self.numbers, self.bound)
        found = []
        for c in chosen.chunks:
            key = (c.collection, c.chunk_id)
            meta = self.metadata.get(key, {})
            score = _round(c.score)
            found.append(
                CandidateOutcome(
                    _source_id(meta.get("st_id"), meta.get("url"), c.chunk_id),
                    chosen.outcome(key),
                    score if math.isfinite(score) else None,
                    chosen.numbered.get(key),
                )
            )
        searched = {c.collection for c in chosen.chunks if c.collection in self.lists}
        multilingual = any(self.lists[name].multilingual for name in searched)
        record = _bare_record(
            self.queries,
            self.collections,
            self.bound,
            self.considered,
            len(self.pool),
            multilingual,
        )
        return record, found


def _at(per_query: Sequence[Mapping[str, int]], number: int, chunk_id: str) -> int | None:
    return per_query[number].get(chunk_id) if number < len(per_query) else None
