"""How the retriever orders what it found: arithmetic over ids, ranks and scores.

Nothing here touches Chroma, embeddings or LangChain (Haystack's ``DocumentJoiner`` is the
model): the retriever hands in ranked id lists and scores, and gets back which sources to
show and in which order.

- :func:`reciprocal_rank_fusion` joins ranked lists (dense and BM25, one per query and
  collection) into one score per id.
- :func:`keyword_evidence` is what an id's BM25 standing and the question's rare words add to
  its similarity to the question (the ``hybrid_rerank`` score).
- :func:`rank_sources` keeps one entry per entity, drops those under the threshold, cuts the
  collections far behind another's best (:func:`gate_collections`), orders and caps;
  :func:`rank_with_outcomes` does the same and says what became of every chunk it was given.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

__all__ = [
    "CHUNKS_PER_SOURCE",
    "CHUNK_OUTCOMES",
    "RRF_K",
    "ChunkOutcome",
    "RankedSources",
    "ScoredChunk",
    "SourceEntry",
    "best_first",
    "blended_similarity",
    "entity_of",
    "gate_collections",
    "keyword_evidence",
    "one_per_entity",
    "rank_sources",
    "rank_with_outcomes",
    "reciprocal_rank_fusion",
]

Key = TypeVar("Key", bound=Hashable)

# The usual constant of reciprocal rank fusion: rank 1 adds 1/61, rank 20 adds 1/80, so a
# chunk found by several lists beats one found first by a single list.
RRF_K = 60
# A source shows its best chunk and its runner-up (context), no more.
CHUNKS_PER_SOURCE = 2


def blended_similarity(own: float, second: float, scale: tuple[float, float]) -> float:
    """A chunk's similarity to a question searched by two models: the better of the first
    model's cosine (``own``) and the second's brought onto the first's scale
    (``slope * second + intercept``, at most 1 as a cosine is): for a question in another
    language the first model, trained on English, often sees little, and the second lands
    near the English passage."""
    slope, intercept = scale
    return max(own, min(1.0, slope * second + intercept))


def reciprocal_rank_fusion(
    ranked_lists: Iterable[Sequence[Key]], k: int = RRF_K
) -> dict[Key, float]:
    """Each id's fused score: over the lists holding it, the sum of ``1 / (k + rank)``, the
    first of a list at rank 1. Ids come in the order they first appear, so a stable sort by
    score breaks ties the same way on every run (lists given in collection order)."""
    fused: dict[Key, float] = {}
    for ranked in ranked_lists:
        for rank, key in enumerate(ranked, start=1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (k + rank)
    return fused


def best_first(scores: Mapping[Key, float], n: int) -> list[Key]:
    """The ``n`` keys of highest score, best first; ties keep the mapping's order."""
    return sorted(scores, key=lambda key: -scores[key])[:n]


def keyword_evidence(
    keyword_lists: Iterable[Sequence[tuple[str, float]]],
    rare_shares: Mapping[str, float],
    *,
    z_weight: float,
    share_weight: float,
    rare_weight: float,
) -> dict[str, float]:
    """What each id's keyword matches add to its similarity. BM25 scores are only comparable
    within a list, so each counts by how far it stands above its list (``z_weight`` per
    standard deviation above the list's mean, ``share_weight`` times its share of the list's
    best), taking the id's best list among the queries; plus ``rare_weight`` times its share
    of the question's rare words (``rare_shares``)."""
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
    return {
        chunk_id: z_weight * standing.get(chunk_id, 0.0)
        + share_weight * share.get(chunk_id, 0.0)
        + rare_weight * rare_shares.get(chunk_id, 0.0)
        for chunk_id in standing.keys() | rare_shares.keys()
    }


def entity_of(collection: str, chunk_id: str, metadata: Mapping[str, Any]) -> str:
    """What a chunk would be cited as, across collections: a variant cited by its disease
    pathway's id and that pathway are one source, not two. A chunk cited by neither id nor
    url is its collection's entity (or itself)."""
    cited_as = metadata.get("st_id") or metadata.get("url")
    return str(cited_as or f"{collection}|{metadata.get('entity') or chunk_id}")


@dataclass(frozen=True)
class ScoredChunk:
    """One chunk read in full, as ranking sees it."""

    chunk_id: str
    collection: str
    entity: str  # see entity_of
    fused: float  # reciprocal rank fusion
    similarity: float  # to the question
    score: float  # what hybrid_rerank ranks by: similarity plus keyword evidence


@dataclass(frozen=True)
class SourceEntry:
    """One source to show: its chunks, best first, what it is ordered by and the best
    similarity to the question among all its chunks."""

    rank_by: float
    similarity: float
    chunks: tuple[ScoredChunk, ...]

    @property
    def collection(self) -> str:
        """The collection of its leading chunk."""
        return self.chunks[0].collection


def _entity_groups(chunks: Iterable[ScoredChunk], *, rerank: bool) -> list[list[ScoredChunk]]:
    """The chunks of each entity, entities in order of their best fused chunk; each group in
    the order its entry would show them (by score with ``rerank``, else fused)."""
    groups: dict[str, list[ScoredChunk]] = {}
    for chunk in sorted(chunks, key=lambda c: -c.fused):
        groups.setdefault(chunk.entity, []).append(chunk)
    if rerank:
        for group in groups.values():
            group.sort(key=lambda c: -c.score)
    return list(groups.values())


def _entry(
    group: Sequence[ScoredChunk], *, rerank: bool, min_similarity: float
) -> SourceEntry | None:
    """The entry an entity's group makes, or None when it is not similar enough."""
    similarity = max(c.similarity for c in group)
    if rerank:
        if group[0].score >= min_similarity:
            return SourceEntry(group[0].score, similarity, tuple(group[:CHUNKS_PER_SOURCE]))
    elif similarity >= min_similarity:
        return SourceEntry(group[0].fused, similarity, tuple(group[:CHUNKS_PER_SOURCE]))
    return None


def one_per_entity(
    chunks: Iterable[ScoredChunk], *, rerank: bool, min_similarity: float
) -> list[SourceEntry]:
    """One entry per entity, in order of its best fused chunk. With ``rerank`` its chunks
    are ordered by score and it needs a lead scoring ``min_similarity``; otherwise they keep
    their fused order and its best similarity must reach ``min_similarity``. Each keeps at
    most :data:`CHUNKS_PER_SOURCE` chunks: the lead, and a runner-up for context."""
    entries = (
        _entry(group, rerank=rerank, min_similarity=min_similarity)
        for group in _entity_groups(chunks, rerank=rerank)
    )
    return [entry for entry in entries if entry is not None]


def _similar_enough(entries: Sequence[SourceEntry], min_similarity: float) -> bool:
    return bool(entries) and max(entry.similarity for entry in entries) >= min_similarity


def gate_collections(
    entries: Sequence[SourceEntry], *, min_similarity: float, margin: float | None
) -> list[SourceEntry]:
    """The entries worth showing, by similarity to the question (comparable across
    collections, unlike keyword evidence). Nothing when no entry is similar enough: an
    off-topic question's rare words must not conjure sources. And no entry of a collection
    whose best trails another's best by more than ``margin`` (None keeps every collection):
    the user guide's disease list for a question about one disease, or pathways for a
    question listing variants."""
    if not _similar_enough(entries, min_similarity):
        return []
    if margin is None:
        return list(entries)
    best: dict[str, float] = {}
    for entry in entries:
        best[entry.collection] = max(best.get(entry.collection, entry.similarity), entry.similarity)
    floor = max(best.values()) - margin
    return [entry for entry in entries if best[entry.collection] >= floor]


def rank_sources(
    chunks: Iterable[ScoredChunk],
    *,
    rerank: bool,
    min_similarity: float,
    collection_margin: float | None,
    k: int,
) -> list[SourceEntry]:
    """The sources to show, in the order they are numbered: one per entity
    (:func:`one_per_entity`), gated by collection when re-ranking
    (:func:`gate_collections`), by ``rank_by`` descending (ties keep their order), at most
    ``k``."""
    entries = one_per_entity(chunks, rerank=rerank, min_similarity=min_similarity)
    if rerank:
        entries = gate_collections(entries, min_similarity=min_similarity, margin=collection_margin)
    return sorted(entries, key=lambda entry: -entry.rank_by)[:k]


# What became of a chunk given to rank_with_outcomes.
ChunkOutcome = Literal[
    "kept", "runner_up", "duplicate", "below_threshold", "collection_cut", "over_cap"
]
CHUNK_OUTCOMES: tuple[ChunkOutcome, ...] = (
    "kept",
    "runner_up",
    "duplicate",
    "below_threshold",
    "collection_cut",
    "over_cap",
)


@dataclass(frozen=True)
class RankedSources:
    """:func:`rank_sources`' entries, and the outcome of every chunk it was given, by
    ``(collection, chunk_id)``."""

    entries: list[SourceEntry]
    outcomes: dict[tuple[str, str], ChunkOutcome]


def rank_with_outcomes(
    chunks: Iterable[ScoredChunk],
    *,
    rerank: bool,
    min_similarity: float,
    collection_margin: float | None,
    k: int,
) -> RankedSources:
    """What :func:`rank_sources` returns (the same entries, by the same steps) and what
    became of each chunk. A chunk's outcome is its entity's when the entity is dropped:

    - ``below_threshold``: the entity's lead scores (with ``rerank``; else its best
      similarity is) under ``min_similarity``, or no entity at all is that similar, so
      nothing is shown;
    - ``collection_cut``: :func:`gate_collections` cut the entity's collection;
    - ``over_cap``: beyond the ``k`` best.

    Of an entity that is shown, its lead is ``kept`` (one per source: the chunk the source
    is numbered and cited by), the next chunk is ``runner_up`` (its text joins the lead's in
    the same source, as context, so it is given to the model but is no source of its own),
    and any further chunk is a ``duplicate``."""
    groups = _entity_groups(chunks, rerank=rerank)
    by_entity = {group[0].entity: group for group in groups}
    reasons: dict[str, ChunkOutcome] = {}
    entries: list[SourceEntry] = []
    for group in groups:
        entry = _entry(group, rerank=rerank, min_similarity=min_similarity)
        if entry is None:
            reasons[group[0].entity] = "below_threshold"
        else:
            entries.append(entry)
    if rerank:
        gated = gate_collections(entries, min_similarity=min_similarity, margin=collection_margin)
        cut: ChunkOutcome = (
            "collection_cut" if _similar_enough(entries, min_similarity) else "below_threshold"
        )
        passed = {entry.chunks[0].entity for entry in gated}
        reasons.update(
            (e.chunks[0].entity, cut) for e in entries if e.chunks[0].entity not in passed
        )
        entries = gated
    ordered = sorted(entries, key=lambda entry: -entry.rank_by)
    reasons.update((entry.chunks[0].entity, "over_cap") for entry in ordered[k:])
    shown = ordered[:k]

    outcomes: dict[tuple[str, str], ChunkOutcome] = {}
    for entity, reason in reasons.items():
        outcomes.update(((c.collection, c.chunk_id), reason) for c in by_entity[entity])
    for entry in shown:
        group = by_entity[entry.chunks[0].entity]
        for position, c in enumerate(group):
            outcome: ChunkOutcome = (
                "kept"
                if position == 0
                else "runner_up"
                if position < CHUNKS_PER_SOURCE
                else "duplicate"
            )
            outcomes[(c.collection, c.chunk_id)] = outcome
    return RankedSources(shown, outcomes)
