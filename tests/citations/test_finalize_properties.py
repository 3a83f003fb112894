"""Properties of the finalizer over generated answers whose markers we know by construction."""

from __future__ import annotations

import re
from typing import TypeVar

from hypothesis import assume, given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from pipelines.citations.finalize import (
    cited_numbers,
    finalize_citations,
    strip_out_of_range_markers,
)
from tests.support.marked_answers import Group, answers, render
from tests.support.markup import ANY_MARKUP, MARKDOWN_PIECES

T = TypeVar("T")


def clusters(segments: list[str | Group]) -> list[list[Group]]:
    """Runs of groups with no prose between them, as the finalizer must see them."""
    runs: list[list[Group]] = []
    previous_was_group = False
    for segment in segments:
        if isinstance(segment, Group):
            if previous_was_group:
                runs[-1].append(segment)
            else:
                runs.append([segment])
        previous_was_group = isinstance(segment, Group)
    return runs


def valid_numbers(group: Group, n_sources: int) -> list[int]:
    return [
        number
        for low, high in group.items
        for number in range(max(low, 1), min(high, n_sources) + 1)
    ]


def first_appearance(segments: list[str | Group], n_sources: int) -> list[int]:
    seen: dict[int, None] = {}
    for segment in segments:
        if isinstance(segment, Group):
            for number in valid_numbers(segment, n_sources):
                seen.setdefault(number)
    return list(seen)


def without_markers(text: str) -> str:
    return re.sub(r"\[[^\]]*\]", "", text)


def tidy(text: str) -> str:
    """Text with the liberties a marker removal may take undone: space runs become one space,
    no space at a line's ends or before punctuation, and no empty lines."""
    text = re.sub(r"[ \t]+", " ", text)
    text = re.sub(r" (?=[.,;:!?)\n])|(?<=\n) | $|^ ", "", text)
    return re.sub(r"\n+", "\n", text).strip("\n")


def finalize_pipeline(text: str, sources: list[T]) -> tuple[str, list[T]]:
    return finalize_citations(strip_out_of_range_markers(text, len(sources)), sources)


@given(answers())
def test_markers_become_one_to_k_in_first_appearance_order(
    answer: tuple[int, list[str | Group]],
) -> None:
    n_sources, segments = answer
    sources = [f"source-{i}" for i in range(1, n_sources + 1)]
    order = first_appearance(segments, n_sources)
    text, kept = finalize_pipeline(render(segments), sources)

    if order:
        assert cited_numbers(text) == list(range(1, len(order) + 1))
        assert kept == [sources[number - 1] for number in order]
        assert re.fullmatch(r"(?:[^\[\]]|\[[0-9]+\])*", text), "only single markers remain"
    else:
        assert kept == sources
        assert cited_numbers(text) == []


@given(answers())
def test_each_cluster_keeps_exactly_its_own_sources(answer: tuple[int, list[str | Group]]) -> None:
    n_sources, segments = answer
    sources = [f"source-{i}" for i in range(1, n_sources + 1)]
    assume(first_appearance(segments, n_sources))
    text, kept = finalize_pipeline(render(segments), sources)

    expected = [
        {sources[n - 1] for group in run for n in valid_numbers(group, n_sources)}
        for run in clusters(segments)
    ]
    actual = [
        {kept[int(n) - 1] for n in re.findall(r"[0-9]+", run)}
        for run in re.findall(r"(?:\[[0-9]+\])+", text)
    ]
    assert actual == [cited for cited in expected if cited]


@given(answers())
def test_text_outside_markers_is_preserved(answer: tuple[int, list[str | Group]]) -> None:
    n_sources, segments = answer
    original = render(segments)
    text, _ = finalize_pipeline(original, [f"s{i}" for i in range(n_sources)])
    # Only spaces next to a removed marker, and the line break of a marker alone on its
    # line, may change; every other character, and every other line break, stays.
    assert tidy(without_markers(text)) == tidy(without_markers(original))


@given(answers())
def test_removal_leaves_tidy_text(answer: tuple[int, list[str | Group]]) -> None:
    n_sources, segments = answer
    original = render(segments)
    untidy = re.compile(r"[ \t]{2}|[ \t][.,;:!?]")
    assume(not untidy.search(original))
    text, _ = finalize_pipeline(original, [f"s{i}" for i in range(n_sources)])
    assert not untidy.search(text), text


@given(answers())
def test_both_functions_are_idempotent(answer: tuple[int, list[str | Group]]) -> None:
    n_sources, segments = answer
    sources = [f"s{i}" for i in range(n_sources)]
    original = render(segments)
    stripped = strip_out_of_range_markers(original, n_sources)
    assert strip_out_of_range_markers(stripped, n_sources) == stripped
    once = finalize_citations(stripped, sources)
    assert finalize_citations(*once) == once


@given(answers())
def test_untouched_list_iff_nothing_valid_cited(answer: tuple[int, list[str | Group]]) -> None:
    n_sources, segments = answer
    sources = [f"s{i}" for i in range(n_sources)]
    order = first_appearance(segments, n_sources)
    stripped = strip_out_of_range_markers(render(segments), n_sources)
    text, kept = finalize_citations(stripped, sources)
    if not order:
        assert (text, kept) == (stripped, sources)
    else:
        assert len(kept) == len(order)
        # The full list can only come back when every source is cited in its own order.
        assert (kept == sources) == (order == list(range(1, n_sources + 1)))


@given(st.text(ANY_MARKUP, max_size=200) | st.text(max_size=200), st.integers(-2, 50))
def test_arbitrary_text_never_raises_and_stays_stable(text: str, n_sources: int) -> None:
    sources = list(range(max(n_sources, 0)))
    stripped = strip_out_of_range_markers(text, n_sources)
    assert strip_out_of_range_markers(stripped, n_sources) == stripped
    once = finalize_citations(text, sources)
    assert finalize_citations(*once) == once
    final_text, kept = finalize_pipeline(text, sources)
    assert all(1 <= n <= len(kept) for n in cited_numbers(final_text))


@given(
    st.lists(
        st.sampled_from(
            ["[2](https://reactome.org)", "`x[1]`", "\n```\n[3]\n```\n", "[a]", "[^1]", "[3-1]"]
        ),
        min_size=1,
        max_size=6,
    ),
    st.lists(st.integers(0, 6), max_size=4),
)
def test_things_that_are_not_markers_survive_verbatim(
    not_markers: list[str], numbers: list[int]
) -> None:
    markers = " ".join(f"cites [{n}]." for n in numbers)
    text = "Intro " + " and ".join(not_markers) + " then " + markers
    final_text, _ = finalize_pipeline(text, ["a", "b", "c", "d"])
    position = 0
    for piece in not_markers:
        found = final_text.find(piece, position)
        assert found >= 0, (piece, final_text)
        position = found + len(piece)


def markers_commonmark_sees(text: str) -> list[int]:
    """Numbers in bracket groups that a CommonMark parser leaves as plain text (not code)."""
    numbers: dict[int, None] = {}
    for token in MarkdownIt("commonmark").parse(text):
        if token.type != "inline":
            continue
        lines = "".join(
            child.content if child.type == "text" else "\n" for child in token.children or []
        )
        for match in re.finditer(r"\[ *([0-9]+(?: *, *[0-9]+)*) *\]", lines):
            for number in match.group(1).split(","):
                numbers.setdefault(int(number))
    return list(numbers)


@given(st.lists(st.sampled_from(MARKDOWN_PIECES), max_size=60).map("".join))
def test_code_and_markers_agree_with_a_commonmark_parser(text: str) -> None:
    # Indented code blocks are the one CommonMark construct we deliberately do not treat as
    # code: answers indent list continuations far more often than they indent code.
    assume(not re.search(r"(?:^|\n) {4}", text))
    assert cited_numbers(text) == markers_commonmark_sees(text)
