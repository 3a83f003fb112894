"""How the retriever orders what it found, as plain arithmetic: no store, no embeddings.

Each test feeds ranked ids and scores and checks what a user would see: which sources are
shown and in which order. Scores sit far from every threshold they are compared with.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipelines.retrieval.ranking import (
    CHUNK_OUTCOMES,
    CHUNKS_PER_SOURCE,
    RRF_K,
    ChunkOutcome,
    ScoredChunk,
    SourceEntry,
    best_first,
    entity_of,
    keyword_evidence,
    rank_sources,
    rank_with_outcomes,
    reciprocal_rank_fusion,
)

Key = TypeVar("Key", bound=Hashable)

# The retriever's defaults (ReactomeRetriever): threshold, collection margin, evidence weights.
THRESHOLD = 0.3
MARGIN = 0.08
WEIGHTS = {"z_weight": 0.04, "share_weight": 0.05, "rare_weight": 0.15}


def fused_order(*lists: list[Key]) -> list[Key]:
    fused = reciprocal_rank_fusion(lists)
    return best_first(fused, len(fused))


# --- fusion ---------------------------------------------------------------------------------


def test_an_id_first_in_two_lists_beats_one_first_in_a_single_list() -> None:
    # dense and BM25 both put "shared" first; "dense-only" leads one list alone.
    assert fused_order(["shared", "b"], ["shared", "c"], ["dense-only"]) == [
        "shared",
        "dense-only",
        "b",
        "c",
    ]


def test_fused_score_is_the_sum_of_reciprocal_ranks() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c"]])
    assert fused == {
        "a": pytest.approx(1 / (RRF_K + 1)),
        "b": pytest.approx(1 / (RRF_K + 2)),
        "c": pytest.approx(1 / (RRF_K + 3) + 1 / (RRF_K + 1)),
    }


def test_found_by_many_lists_low_down_beats_found_first_by_one() -> None:
    # Twentieth in three lists (3/80) against first in one (1/61): agreement wins.
    lists = [["lone"]] + [[*(f"{q}-{n}" for n in range(19)), "agreed"] for q in "abc"]
    assert fused_order(*lists)[:2] == ["agreed", "lone"]


def test_ties_keep_the_order_the_ids_first_appear_in() -> None:
    # The same two ranks each: equal sums, so the order lists are given in decides, every run.
    assert fused_order(["x", "y"], ["y", "x"]) == ["x", "y"]
    assert fused_order(["y", "x"], ["x", "y"]) == ["y", "x"]


def test_only_the_best_fused_are_kept_for_reading() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c", "d"], ["d"]])
    assert best_first(fused, 2) == ["d", "a"]


def test_keys_may_be_collection_and_chunk_pairs() -> None:
    # The same chunk id in two collections is two chunks.
    lists = [[("reactome", "1"), ("userguide", "1")], [("userguide", "1")]]
    assert fused_order(*lists) == [("userguide", "1"), ("reactome", "1")]


# --- keyword evidence -------------------------------------------------------------------------


def test_the_chunk_bm25_puts_far_ahead_gains_the_most() -> None:
    ranked = [("standout", 10.0), ("b", 2.0), ("c", 2.0), ("d", 2.0)]
    evidence = keyword_evidence([ranked], {}, **WEIGHTS)
    # Mean 4, deviation sqrt(12): the standout is sqrt(3) deviations above, and the list's best.
    assert evidence["standout"] == pytest.approx(0.04 * 3**0.5 + 0.05 * 1.0)
    # The others sit below the mean: only their share of the best counts.
    assert evidence["b"] == pytest.approx(0.05 * 0.2)
    assert max(evidence, key=evidence.__getitem__) == "standout"


def test_a_chunk_counts_by_its_best_list_among_the_queries() -> None:
    question = [("a", 9.0), ("b", 1.0), ("c", 1.0), ("d", 1.0)]
    alternative = [("b", 9.0), ("a", 1.0), ("c", 1.0), ("d", 1.0)]
    evidence = keyword_evidence([question, alternative], {}, **WEIGHTS)
    assert evidence["a"] == pytest.approx(evidence["b"])
    assert evidence["a"] > 5 * evidence["c"]


def test_rare_words_count_even_for_a_chunk_no_list_holds() -> None:
    ranked = [("listed", 4.0), ("other", 4.0)]
    evidence = keyword_evidence([ranked], {"rare": 1.0, "listed": 0.5}, **WEIGHTS)
    assert evidence["rare"] == pytest.approx(0.15)
    # Equal scores: no deviation above the mean, each the list's best.
    assert evidence["listed"] == pytest.approx(0.05 + 0.15 * 0.5)
    assert evidence["other"] == pytest.approx(0.05)


def test_no_keyword_lists_and_no_rare_words_add_nothing() -> None:
    assert keyword_evidence([[], []], {}, **WEIGHTS) == {}


# --- one entry per entity ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({"st_id": "R-HSA-1", "url": "https://x", "entity": "e"}, "R-HSA-1"),
        (
            {"url": "https://reactome.org/userguide", "entity": "e"},
            "https://reactome.org/userguide",
        ),
        ({"entity": "variant-7"}, "disease_variants|variant-7"),
        ({}, "disease_variants|chunk-3"),
    ],
)
def test_a_chunk_is_the_entity_it_would_be_cited_as(
    metadata: dict[str, str], expected: str
) -> None:
    assert entity_of("disease_variants", "chunk-3", metadata) == expected


def chunk(
    chunk_id: str,
    similarity: float,
    *,
    score: float | None = None,
    fused: float = 0.01,
    entity: str | None = None,
    collection: str = "reactome",
) -> ScoredChunk:
    return ScoredChunk(
        chunk_id,
        collection,
        entity or chunk_id,
        fused,
        similarity,
        similarity if score is None else score,
    )


def shown(entries: list[SourceEntry]) -> list[list[str]]:
    """What the user sees: each source's chunks, sources in their numbered order."""
    return [[c.chunk_id for c in entry.chunks] for entry in entries]


def ranked(chunks: list[ScoredChunk], *, rerank: bool = True, k: int = 10) -> list[list[str]]:
    return shown(
        rank_sources(chunks, rerank=rerank, min_similarity=THRESHOLD, collection_margin=MARGIN, k=k)
    )


def test_an_entity_shows_once_led_by_its_best_chunk_with_one_runner_up() -> None:
    chunks = [
        chunk("pathway:0", 0.5, fused=0.03, entity="R-HSA-1"),
        chunk("variant:0", 0.8, fused=0.02, entity="R-HSA-1"),
        chunk("pathway:1", 0.6, fused=0.01, entity="R-HSA-1"),
        chunk("other", 0.7, fused=0.001),
    ]
    assert ranked(chunks) == [["variant:0", "pathway:1"], ["other"]]
    assert CHUNKS_PER_SOURCE == 2


def test_sources_under_the_threshold_are_dropped_and_the_rest_ranked_by_score() -> None:
    chunks = [
        chunk("weak", 0.1, fused=0.05),
        chunk("good", 0.5, fused=0.02),
        chunk("boosted", 0.4, score=0.9, fused=0.01),  # keyword evidence lifts it first
    ]
    assert ranked(chunks) == [["boosted"], ["good"]]


def test_keyword_evidence_alone_does_not_conjure_sources() -> None:
    # An off-topic question whose rare words match: high scores, nothing similar enough.
    chunks = [chunk("a", 0.1, score=0.9), chunk("b", 0.05, score=0.7)]
    assert ranked(chunks) == []


def test_a_collection_far_behind_another_best_is_cut() -> None:
    chunks = [
        chunk("pathway", 0.7, collection="reactome"),
        chunk("guide-page", 0.45, collection="userguide"),
        chunk("variant", 0.66, collection="disease_variants"),
    ]
    assert ranked(chunks) == [["pathway"], ["variant"]]
    kept_all = rank_sources(
        chunks, rerank=True, min_similarity=THRESHOLD, collection_margin=None, k=10
    )
    assert shown(kept_all) == [["pathway"], ["variant"], ["guide-page"]]


def test_a_collection_is_judged_by_its_best_entry() -> None:
    # userguide's weaker page stays: its best page is close to reactome's best.
    chunks = [
        chunk("pathway", 0.7, collection="reactome"),
        chunk("guide-best", 0.68, collection="userguide"),
        chunk("guide-weak", 0.4, collection="userguide"),
    ]
    assert ranked(chunks) == [["pathway"], ["guide-best"], ["guide-weak"]]


def test_at_most_k_sources_the_best_first() -> None:
    chunks = [chunk(f"c{n}", 0.4 + n / 10) for n in range(5)]
    assert ranked(chunks, k=3) == [["c4"], ["c3"], ["c2"]]


def test_without_rerank_sources_keep_their_fused_order() -> None:
    chunks = [
        chunk("similar", 0.9, fused=0.01),
        chunk("fused-first", 0.5, fused=0.03),
        chunk("weak", 0.1, fused=0.05),
        chunk("far-collection", 0.4, fused=0.02, collection="userguide"),
    ]
    # No collection cut and no keyword score: similarity only decides what is dropped.
    assert ranked(chunks, rerank=False) == [["fused-first"], ["far-collection"], ["similar"]]


def test_nothing_found_shows_nothing() -> None:
    assert ranked([]) == []
    assert ranked([], rerank=False) == []


# --- what became of each chunk ------------------------------------------------------------------


def outcomes(
    chunks: list[ScoredChunk], *, rerank: bool = True, k: int = 10
) -> dict[str, ChunkOutcome]:
    """Each chunk's outcome by its id; the entries must be exactly rank_sources' too."""
    ranked = rank_with_outcomes(
        chunks, rerank=rerank, min_similarity=THRESHOLD, collection_margin=MARGIN, k=k
    )
    same = rank_sources(
        chunks, rerank=rerank, min_similarity=THRESHOLD, collection_margin=MARGIN, k=k
    )
    assert ranked.entries == same
    assert set(ranked.outcomes) == {(c.collection, c.chunk_id) for c in chunks}
    return {chunk_id: outcome for (_, chunk_id), outcome in ranked.outcomes.items()}


def test_a_shown_source_keeps_its_lead_its_runner_up_and_drops_the_rest_as_duplicates() -> None:
    chunks = [
        chunk("pathway:0", 0.5, fused=0.04, entity="R-HSA-1"),
        chunk("variant:0", 0.8, fused=0.03, entity="R-HSA-1"),
        chunk("pathway:1", 0.6, fused=0.02, entity="R-HSA-1"),
        chunk("other", 0.7, fused=0.01),
    ]
    assert outcomes(chunks) == {
        "variant:0": "kept",
        "pathway:1": "runner_up",
        "pathway:0": "duplicate",
        "other": "kept",
    }


def test_an_entity_under_the_threshold_is_below_threshold_every_chunk_of_it() -> None:
    chunks = [
        chunk("good", 0.5, fused=0.02),
        chunk("weak", 0.1, fused=0.05, entity="R-HSA-9"),
        chunk("weak:1", 0.05, fused=0.01, entity="R-HSA-9"),
    ]
    assert outcomes(chunks) == {
        "good": "kept",
        "weak": "below_threshold",
        "weak:1": "below_threshold",
    }


def test_when_nothing_is_similar_enough_keyword_scores_are_below_threshold_too() -> None:
    # Scores over the threshold (keyword evidence), similarity under it: nothing shown.
    chunks = [chunk("a", 0.1, score=0.9), chunk("b", 0.05, score=0.7)]
    assert outcomes(chunks) == {"a": "below_threshold", "b": "below_threshold"}


def test_a_cut_collection_is_collection_cut() -> None:
    chunks = [
        chunk("pathway", 0.7, collection="reactome"),
        chunk("guide-page", 0.45, collection="userguide"),
        chunk("variant", 0.66, collection="disease_variants"),
    ]
    assert outcomes(chunks) == {
        "pathway": "kept",
        "guide-page": "collection_cut",
        "variant": "kept",
    }


def test_beyond_k_is_over_cap() -> None:
    chunks = [chunk(f"c{n}", 0.4 + n / 10) for n in range(5)]
    assert outcomes(chunks, k=3) == {
        "c4": "kept",
        "c3": "kept",
        "c2": "kept",
        "c1": "over_cap",
        "c0": "over_cap",
    }


def test_without_rerank_no_collection_is_cut_and_similarity_decides() -> None:
    chunks = [
        chunk("similar", 0.9, fused=0.01),
        chunk("weak", 0.1, fused=0.05),
        chunk("far-collection", 0.4, fused=0.02, collection="userguide"),
    ]
    assert outcomes(chunks, rerank=False, k=1) == {
        "far-collection": "kept",
        "similar": "over_cap",
        "weak": "below_threshold",
    }


_similarities = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["R-HSA-1", "R-HSA-2", "R-HSA-3", "R-HSA-4", "R-HSA-5"]),
            st.sampled_from(["reactome", "userguide", "disease_variants"]),
            _similarities,
            st.floats(min_value=0.0, max_value=0.3, allow_nan=False),
            st.floats(min_value=0.0, max_value=0.1, allow_nan=False),
        ),
        max_size=20,
    ),
    st.booleans(),
    st.integers(min_value=1, max_value=6),
)
def test_every_chunk_has_one_outcome_and_each_shown_source_one_kept_lead(
    rows: list[tuple[str, str, float, float, float]], rerank: bool, k: int
) -> None:
    chunks = [
        chunk(f"chunk-{n}", similarity, score=similarity + evidence, fused=fused,
              entity=entity, collection=collection)
        for n, (entity, collection, similarity, evidence, fused) in enumerate(rows)
    ]  # fmt: skip
    ranked = rank_with_outcomes(
        chunks, rerank=rerank, min_similarity=THRESHOLD, collection_margin=MARGIN, k=k
    )
    assert ranked.entries == rank_sources(
        chunks, rerank=rerank, min_similarity=THRESHOLD, collection_margin=MARGIN, k=k
    )
    assert set(ranked.outcomes.values()) <= set(CHUNK_OUTCOMES)
    kept = [key for key, outcome in ranked.outcomes.items() if outcome == "kept"]
    leads = [(entry.chunks[0].collection, entry.chunks[0].chunk_id) for entry in ranked.entries]
    assert sorted(kept) == sorted(leads)
    for entry in ranked.entries:
        for runner_up in entry.chunks[1:]:
            assert ranked.outcomes[(runner_up.collection, runner_up.chunk_id)] == "runner_up"
