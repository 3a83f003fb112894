"""Live citation numbering: for any text and any split of it into tokens, the released pieces
join to exactly what the batch finalizer makes of the whole text, with the same references."""

from __future__ import annotations

import itertools
import re
from typing import TypeVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipelines.citations.finalize import (
    cited_numbers,
    finalize_citations,
    strip_out_of_range_markers,
)
from pipelines.citations.live import LiveCitations
from tests.support.citation_tables import FINALIZE_TABLE, SOURCES, STRIP_TABLE
from tests.support.marked_answers import answers, render
from tests.support.markup import ANY_MARKUP, MARKDOWN_PIECES

T = TypeVar("T")

# Pieces that exercise every hold: markers split anywhere, links, reference definitions,
# fences of both kinds, closing marks after a removed marker, line ends of both kinds.
_PIECES = [
    *MARKDOWN_PIECES,
    "[1]", "[9]", "[2, 3]", "[1-3]", "[0]", "[99999999999999999999]", "](x)", "(", ")",
    ":", "```", "~~~", "**", '"', "\t", "\r\n", "\n\n", "-", "\u2013", ";", "[[", "]]", "x",
]  # fmt: skip


def batch(text: str, sources: list[T]) -> tuple[str, list[T]]:
    """What the pipeline does after generation: strip, then finalize."""
    return finalize_citations(strip_out_of_range_markers(text, len(sources)), sources)


def live(tokens: list[str], sources: list[T]) -> tuple[str, list[T], list[str]]:
    """The live output joined, the references in the order they were released, and the
    pieces (one per token, then the close)."""
    numbering = LiveCitations(sources)
    pieces = []
    for token in tokens:
        pieces.append(numbering.feed(token))
        if pieces[-1]:
            # Every marker released names a source already in the final list.
            assert set(cited_numbers(pieces[-1])) <= set(range(1, numbering.n_cited + 1))
    pieces.append(numbering.close())
    cited = numbering.cited
    return "".join(pieces), cited, pieces


def split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({0, len(text), *(cut % (len(text) + 1) for cut in cuts)})
    return [text[a:b] for a, b in itertools.pairwise(points)]


def assert_live_equals_batch(text: str, tokens: list[str], sources: list[T]) -> None:
    assert "".join(tokens) == text
    final_text, kept = batch(text, sources)
    live_text, cited, _ = live(tokens, sources)
    assert live_text == final_text
    if cited:
        assert cited == kept
    else:
        # Nothing cited: no reference was released, and the answer keeps the untouched list.
        assert not cited_numbers(final_text)
        assert kept == sources


texts = st.one_of(
    answers().map(lambda answer: render(answer[1])),
    st.text(ANY_MARKUP, max_size=120),
    st.lists(st.sampled_from(_PIECES), max_size=40).map("".join),
    st.text(max_size=60),
)


@given(texts, st.integers(0, 14), st.lists(st.integers(0, 10_000), max_size=40))
def test_any_text_split_anywhere_streams_what_the_batch_finalizer_makes(
    text: str, n_sources: int, cuts: list[int]
) -> None:
    assert_live_equals_batch(text, split(text, cuts), list(range(1, n_sources + 1)))


@given(texts, st.integers(0, 14))
def test_one_character_per_token_streams_what_the_batch_finalizer_makes(
    text: str, n_sources: int
) -> None:
    assert_live_equals_batch(text, list(text), list(range(1, n_sources + 1)))


# Markers in the shapes models write most, which the live rewrite renumbers without its
# general path: numbers, lists and ranges (some descending, some past the sources), right
# after a word or a space after it, settled by punctuation, with markup around them.
_items = st.one_of(
    st.integers(0, 16).map(str),
    st.tuples(st.integers(1, 16), st.integers(1, 16)).map(lambda r: f"{r[0]}-{r[1]}"),
)
_groups = st.tuples(st.lists(_items, min_size=1, max_size=3), st.sampled_from([", ", ","])).map(
    lambda group: "[" + group[1].join(group[0]) + "]"
)
_common_markers = st.lists(
    st.tuples(
        st.sampled_from(["Word", "two words", "x\n", "\n\n", "`code`", "**bold**", "[1](u)"]),
        st.sampled_from(["", " ", "  "]),
        st.lists(_groups, min_size=1, max_size=3).map("".join),
        st.sampled_from([".", ",", ";", "!", "?", ":", "(x)", " and", ""]),
    ).map("".join),
    min_size=1,
    max_size=8,
).map(" ".join)


@given(_common_markers, st.integers(0, 14), st.lists(st.integers(0, 10_000), max_size=40))
def test_markers_in_their_common_shapes_stream_what_the_batch_finalizer_makes(
    text: str, n_sources: int, cuts: list[int]
) -> None:
    assert_live_equals_batch(text, split(text, cuts), list(range(1, n_sources + 1)))


@given(_common_markers, st.integers(0, 14), st.lists(st.integers(0, 10_000), max_size=40))
def test_a_marker_in_a_common_shape_goes_out_with_the_punctuation_after_it(
    text: str, n_sources: int, cuts: list[int]
) -> None:
    numbering = LiveCitations(list(range(1, n_sources + 1)))
    fed = ""
    for token in split(text, cuts):
        numbering.feed(token)
        fed += token
        if re.search(r"\][.,;!?]$", fed):
            assert numbering.pending == "", fed  # nothing held once the marker is settled


@given(_common_markers, st.integers(0, 14))
def test_markers_in_their_common_shapes_one_character_at_a_time(text: str, n_sources: int) -> None:
    assert_live_equals_batch(text, list(text), list(range(1, n_sources + 1)))


@pytest.mark.parametrize(("text", "n_sources", "expected"), STRIP_TABLE)
@pytest.mark.parametrize("tokens", ["whole", "characters", "pairs"])
def test_the_strip_table_through_the_live_path(
    text: str, n_sources: int, expected: str, tokens: str
) -> None:
    sources = list(range(1, n_sources + 1))
    pieces = {"whole": [text], "characters": list(text), "pairs": split(text, [*range(0, 99, 2)])}
    live_text, _, _ = live(pieces[tokens], sources)
    assert live_text == batch(expected, sources)[0]


@pytest.mark.parametrize(("text", "expected_text", "expected_sources"), FINALIZE_TABLE)
@pytest.mark.parametrize("tokens", ["whole", "characters", "pairs"])
def test_the_finalize_table_through_the_live_path(
    text: str, expected_text: str, expected_sources: list[str], tokens: str
) -> None:
    pieces = {"whole": [text], "characters": list(text), "pairs": split(text, [*range(1, 99, 2)])}
    live_text, cited, _ = live(pieces[tokens], SOURCES)
    assert live_text == expected_text
    assert (cited or SOURCES) == expected_sources


def test_a_marker_is_released_rewritten_once_the_next_character_settles_it() -> None:
    numbering = LiveCitations(["A", "B", "C"])
    assert numbering.feed("ABCA1 exports cholesterol ") == "ABCA1 exports cholesterol"
    assert numbering.feed("[") == ""
    assert numbering.feed("3") == ""
    assert (numbering.feed("]"), numbering.cited) == ("", [])  # "(" would make it a link
    assert (numbering.feed("."), numbering.cited) == (" [1].", ["C"])
    assert numbering.feed(" Next [7]") == " Next"
    assert numbering.close() == ""  # the out-of-range marker and its space go
    assert numbering.text == "ABCA1 exports cholesterol [1]. Next"


def test_a_link_and_a_cluster_are_told_apart_by_what_follows() -> None:
    numbering = LiveCitations(["A", "B", "C"])
    assert numbering.feed("See [2]") == "See"
    assert numbering.feed("(x)") == " [2](x)"  # a link: left as written
    assert numbering.feed(" and [3]") == " and"
    assert numbering.feed("[1]") == ""
    assert numbering.feed(" too") == " [1][2] too"  # one cluster, ascending


def test_prose_without_markers_is_held_only_for_its_trailing_spaces() -> None:
    numbering = LiveCitations(["A"])
    words = ["Cholesterol", "efflux", "needs", "ABCA1", ",", "and", "HDL", "forms", "."]
    for index, word in enumerate(words):
        assert numbering.feed(word + " ") == (" " if index else "") + word
        assert numbering.pending == " "
    assert numbering.held == 1


def test_inline_code_is_held_until_it_closes_or_its_paragraph_ends() -> None:
    numbering = LiveCitations(["A", "B"])
    assert numbering.feed("Use `x") == "Use"
    assert numbering.feed("[2]") == ""
    assert numbering.feed(" y` then [2].") == " `x[2] y` then [1]."
    assert numbering.feed("\n\nA lone ` tick [1]") == "\n\nA lone"
    # The blank line ends the paragraph: nothing can close that backtick any more.
    assert numbering.feed(" here.\n\n") == " ` tick [2] here.\n\n"
    assert numbering.feed("Next") == "Next"


@pytest.mark.parametrize(
    "text",
    [
        "Cholesterol efflux needs ABCA1.",  # cites nothing: the untouched list
        "Only [9] here.",  # only out of range: cites nothing once stripped
        "X [3, 1] and [4][4] but not [9].",
        "CDK5 [2].",
        "a [3] b [1-2] c [3, 5] `[8]` [x](y) [9](z)",
        "[[9]0[9]][1]1",  # two removals in one pass make a new group
        "8[9\t[9]]9",  # so does a tab that a removal takes along
        # Found by review: a line of spaces not yet ended is no blank line...
        "```-``[9]`\n ``",
        "Use ```x``[9]`\n  `` [2]",
        # ...a removal can open code that later text closes...
        ")```'```[2]`]``[9]`3``",
        # ...and a line that starts like a fence may turn out not to be one.
        "\\[1]```[``1\n```[3]```",
        # ...and a lone carriage return starts a line for reference definitions too.
        "\r[3]\n[3][2]:",
        "[1] a\r[9]\n[3][3]: y",
        "",
    ],
)
def test_the_other_finalizer_examples_through_the_live_path(text: str) -> None:
    for n_sources in (0, 1, 2, 4):
        for tokens in ([text], list(text), split(text, [len(text) - 2])):
            assert_live_equals_batch(text, tokens, SOURCES[:n_sources])


@pytest.mark.parametrize(
    "text",
    [
        "~~[9]~\n" + "x [1]\n" * 800,  # the removal opens a fence: held to the end
        "` " * 2500,
        "[1]" + " " * 5000,
        "[" + "1" * 5000,
        "Use `x" + " and [1]" * 600,  # a code span that may still close
    ],
)
def test_degenerate_text_one_character_at_a_time_still_matches(text: str) -> None:
    # Held text is retried only once it doubles (or, for an ordinary hold, when a character
    # that can end it comes), so these finish in well under a second each.
    assert_live_equals_batch(text, list(text), SOURCES[:1])
