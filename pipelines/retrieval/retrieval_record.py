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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from pipelines.core.redaction import redact_secrets
from pipelines.retrieval.ranking import ChunkOutcome, ScoredChunk, SourceEntry

__all__ = ["OUTCOMES", "RECORD_BOUND", "Outcome", "QueryLists", "retrieval_record"]

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
# The chunks whose text the model was given: always in the record, whatever the bound.
_GIVEN = frozenset({"kept", "context", "runner_up"})

Key = tuple[str, str]  # (collection, chunk id)


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
) -> dict[str, Any]:
    """The record of one search. ``pool``: the chunks read and ranked, best fused first;
    ``metadata``: each one's; ``outcomes``: :func:`rank_with_outcomes`' for them; ``entries``
    the sources it returned, in order, with ``numbers`` the ``n`` each was given (None:
    unnumbered context)."""
    numbered: dict[Key, int | None] = {}
    context: set[Key] = set()
    for entry, n in zip(entries, numbers, strict=True):
        lead = entry.chunks[0]
        for c in entry.chunks:
            numbered[(c.collection, c.chunk_id)] = n
        if n is None:
            context.add((lead.collection, lead.chunk_id))

    def outcome(key: Key) -> Outcome:
        found = outcomes.get(key, "below_threshold")
        return "context" if found == "kept" and key in context else found

    chosen = [
        c
        for position, c in enumerate(pool)
        if position < bound or outcome((c.collection, c.chunk_id)) in _GIVEN
    ]
    wanted: dict[str, set[str]] = {}
    for c in chosen:
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
    for c in chosen:
        key = (c.collection, c.chunk_id)
        meta = metadata.get(key, {})
        st_id, url = meta.get("st_id"), meta.get("url")
        title = str(meta.get("display_name") or meta.get("title") or "").strip()
        ranks: list[dict[str, int | None]] = [
            {
                "dense": _at(dense.get(c.collection, []), number, c.chunk_id),
                "keyword": _at(keyword.get(c.collection, []), number, c.chunk_id),
            }
            for number in range(len(queries))
        ]
        if second:  # only when the multilingual model searched: English records as before
            for number, rank in enumerate(ranks):
                rank["multilingual"] = _at(second.get(c.collection, []), number, c.chunk_id)
        candidates.append(
            {
                "collection": c.collection,
                "st_id": st_id if isinstance(st_id, str) and st_id else None,
                "url": url if isinstance(url, str) and url else None,
                "title": title,
                "chunk_id": c.chunk_id,
                "ranks": ranks,
                "fused": _round(c.fused),
                "similarity": _round(c.similarity),
                "keyword_evidence": _round(c.score - c.similarity),
                "score": _round(c.score),
                "outcome": outcome(key),
                "n": numbered.get(key),
            }
        )
    return {
        # Redacted as the expansion record's: a credential pasted into the question is
        # searched for, but must not reach the disk.
        "queries": [redact_secrets(query) for query in queries],
        "collections": list(collections),
        "bound": bound,
        "considered": considered,
        "read": len(pool),
        "candidates": candidates,
    }


def _at(per_query: Sequence[Mapping[str, int]], number: int, chunk_id: str) -> int | None:
    return per_query[number].get(chunk_id) if number < len(per_query) else None
