"""Every marker form and every rule of the citation contract, one row each (the rows are in
tests/support/citation_tables.py: the live numbering runs them too)."""

from __future__ import annotations

import pytest

from pipelines.citations.finalize import (
    cited_numbers,
    finalize_citations,
    strip_out_of_range_markers,
)
from tests.support.citation_tables import FINALIZE_TABLE, SOURCES, STRIP_TABLE


@pytest.mark.parametrize(("text", "n_sources", "expected"), STRIP_TABLE)
def test_strip_out_of_range_markers(text: str, n_sources: int, expected: str) -> None:
    assert strip_out_of_range_markers(text, n_sources) == expected


@pytest.mark.parametrize(("text", "expected_text", "expected_sources"), FINALIZE_TABLE)
def test_finalize_citations(text: str, expected_text: str, expected_sources: list[str]) -> None:
    assert finalize_citations(text, SOURCES) == (expected_text, expected_sources)


def test_uncited_text_keeps_the_untouched_list() -> None:
    text = "Cholesterol efflux needs ABCA1."
    assert finalize_citations(text, SOURCES) == (text, SOURCES)


def test_only_invalid_markers_count_as_citing_nothing() -> None:
    # finalize alone leaves an all-invalid text as it is; the pipeline strips first.
    assert finalize_citations("Only [9] here.", SOURCES) == ("Only [9] here.", SOURCES)
    stripped = strip_out_of_range_markers("Only [9] here.", len(SOURCES))
    assert finalize_citations(stripped, SOURCES) == ("Only here.", SOURCES)


def test_untouched_list_is_a_copy() -> None:
    _, sources = finalize_citations("nothing cited", SOURCES)
    sources.append("E")
    assert SOURCES == ["A", "B", "C", "D"]


def test_generic_over_source_type() -> None:
    sources = [{"st_id": "R-HSA-5682113"}, {"st_id": "R-HSA-8862803"}]
    text, kept = finalize_citations("CDK5 [2].", sources)
    assert (text, kept) == ("CDK5 [1].", [{"st_id": "R-HSA-8862803"}])


def test_finalized_pair_is_stable() -> None:
    once = finalize_citations("X [3, 1] and [4][4] but not [9].", SOURCES)
    assert once == ("X [1][2] and [3] but not.", ["C", "A", "D"])
    assert finalize_citations(*once) == once


def test_cited_numbers_expands_ranges_within_a_bound() -> None:
    assert len(cited_numbers("[1-999999999999]")) == 10_001


def test_cited_numbers_reads_markers_in_order() -> None:
    assert cited_numbers("a [3] b [1-2] c [3, 5] `[8]` [x](y) [9](z)") == [3, 1, 2, 5]
