"""Make an answer's ``[n]`` markers and its Sources list agree.

Two passes run after generation, in this order:

1. :func:`strip_out_of_range_markers` removes markers that point at no source.
2. :func:`finalize_citations` keeps only the sources the text cites, renumbers them in
   first-citation order and rewrites the markers to match.

A *marker* is a bracket group of 1-based numbers and ascending ranges, as models write them:
``[3]``, ``[1, 3]``, ``[1,3]``, ``[1; 3]``, ``[1-3]`` (also with an en dash, em dash or minus
sign), with optional spaces inside the brackets. Groups written with nothing between them
(``[1][3]``) form one *cluster*. These are not markers: a Markdown link ``[1](url)`` and its
text ``[[1]](url)``, a link reference definition ``[1]: url`` at the start of a line (a cluster
there too), a descending range, and anything inside inline code or a fenced code block.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterator, Sequence
from typing import NamedTuple, TypeVar

__all__ = [
    "cited_numbers",
    "drop_citations",
    "finalize_citations",
    "marker_clusters",
    "strip_out_of_range_markers",
]

T = TypeVar("T")

_DASHES = "-\u2013\u2014\u2212"  # hyphen, en dash, em dash, minus sign
_ITEM = rf"[0-9]+(?: *[{_DASHES}] *[0-9]+)?"
_GROUP_RE = re.compile(rf"\[ *({_ITEM}(?: *[,;] *{_ITEM})*) *\]")
_ITEM_RE = re.compile(rf"([0-9]+)(?: *[{_DASHES}] *([0-9]+))?")
_FENCE_RE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_LINE_RE = re.compile(r"[^\n]*\n?")

# Numbers longer than this cannot index any real source list; capping them keeps int()
# away from Python's limit on huge digit strings, so no input can make us raise.
_MAX_DIGITS = 15
_HUGE = 10**_MAX_DIGITS

# cited_numbers() expands ranges; a bound keeps [1-999999999] from filling memory.
_MAX_RANGE_EXPANSION = 10_000

_HSPACE = " \t"
# A removed marker takes the space before it along when what follows would otherwise sit
# after a stray space: the end of the text or line, punctuation, a closing bracket...
_CLOSERS = frozenset(" \t\r\n.,;:!?)]")
# ...or a closing emphasis or quote mark, told from an opening one by what comes after it.
_CLOSING_MARKS = frozenset("*_\"'\u2019\u201d\u00bb")


class _Group(NamedTuple):
    start: int
    end: int
    items: tuple[tuple[int, int], ...]  # inclusive (low, high); a single number has low == high
    lowest: int
    highest: int


class _Cluster(NamedTuple):
    start: int
    end: int
    groups: tuple[_Group, ...]


def _number(digits: str) -> int:
    digits = digits.lstrip("0") or "0"
    return _HUGE if len(digits) > _MAX_DIGITS else int(digits)


def _parse_items(body: str) -> tuple[tuple[int, int], ...] | None:
    items = []
    for match in _ITEM_RE.finditer(body):
        low = _number(match.group(1))
        high = low if match.group(2) is None else _number(match.group(2))
        if high < low:
            # A descending range is not something we know how to read; leave the text alone.
            return None
        items.append((low, high))
    return tuple(items)


@functools.lru_cache(maxsize=4096)
def _parse_group(body: str) -> tuple[tuple[tuple[int, int], ...], int, int] | None:
    """A group's items with its lowest and highest number, or None (see _parse_items).
    Cached: answers repeat the same few groups ("1", "2, 3") over and over."""
    items = _parse_items(body)
    if items is None:
        return None
    return items, min(low for low, _ in items), max(high for _, high in items)


def _code_spans(text: str) -> list[tuple[int, int]]:
    """Return the ``[start, end)`` spans of fenced code blocks and inline code spans."""
    return _code_layout(text)[0]


def _code_layout(text: str) -> tuple[list[tuple[int, int]], int | None]:
    """The code spans, and where code is still undecided at the end of the text: the start
    of an unclosed fence, or of the first backtick run of the last paragraph that nothing
    closes yet (more text could close either), or None when nothing is open."""
    spans: list[tuple[int, int]] = []
    if "`" not in text and "~~~" not in text:
        return spans, None  # most answers: no fence and no inline code is possible
    paragraph_start = 0
    fence: tuple[str, int, int] | None = None  # (fence char, fence length, block start)
    for line in _LINE_RE.finditer(text):
        if line.start() == line.end():
            break
        content = line.group().rstrip("\n")
        opener = _FENCE_RE.fullmatch(content)
        if fence is None:
            if not content.strip():
                # Inline code never crosses a blank line: pair backticks paragraph by paragraph.
                spans.extend(_inline_code_spans(text, paragraph_start, line.start()))
                paragraph_start = line.end()
                continue
            if opener is None:
                continue
            marks, info = opener.group(1), opener.group(2)
            if marks[0] == "`" and "`" in info:
                continue  # CommonMark: a backtick fence's info string has no backticks
            spans.extend(_inline_code_spans(text, paragraph_start, line.start()))
            fence = (marks[0], len(marks), line.start())
        elif (
            opener is not None
            and opener.group(1)[0] == fence[0]
            and len(opener.group(1)) >= fence[1]
            and not opener.group(2).strip()
        ):
            spans.append((fence[2], line.end()))
            fence = None
            paragraph_start = line.end()
    if fence is not None:
        spans.append((fence[2], len(text)))  # an unclosed fence runs to the end
        return spans, fence[2]
    unclosed: list[int] = []
    spans.extend(_inline_code_spans(text, paragraph_start, len(text), unclosed))
    return spans, unclosed[0] if unclosed else None


def _escaped(text: str, position: int) -> bool:
    backslashes = 0
    while position - backslashes - 1 >= 0 and text[position - backslashes - 1] == "\\":
        backslashes += 1
    return backslashes % 2 == 1


def _backtick_runs(text: str, start: int, end: int) -> list[tuple[int, int]]:
    # str.find is many times faster than a regex scan for the rare backtick.
    runs = []
    position = text.find("`", start, end)
    while position >= 0:
        run_end = position + 1
        while run_end < end and text[run_end] == "`":
            run_end += 1
        runs.append((position, run_end))
        position = text.find("`", run_end, end)
    return runs


def _inline_code_spans(
    text: str, start: int, end: int, unclosed: list[int] | None = None
) -> list[tuple[int, int]]:
    """The inline code spans between ``start`` and ``end``; the starts of runs that nothing
    closes go to ``unclosed`` when given."""
    runs = _backtick_runs(text, start, end)
    by_length: dict[int, list[int]] = {}
    for index, (run_start, run_end) in enumerate(runs):
        by_length.setdefault(run_end - run_start, []).append(index)
    spans = []
    index = 0
    while index < len(runs):
        run_start, run_end = runs[index]
        if _escaped(text, run_start):
            # `\`` is a literal backtick; the rest of the run may still open a span.
            run_start += 1
        length = run_end - run_start
        same_length = by_length.get(length, [])
        # A span closes at the next backtick run of exactly the opening length.
        position = bisect.bisect_right(same_length, index)
        if length and position < len(same_length):
            closer = same_length[position]
            spans.append((run_start, runs[closer][1]))
            index = closer + 1
        else:
            if length and unclosed is not None:
                unclosed.append(run_start)
            index += 1  # an unmatched run is literal backticks
    return spans


def _is_reference_definition(text: str, start: int, end: int) -> bool:
    if not text.startswith(":", end):
        return False
    # A lone carriage return ends a line too, as for the removal of a marker alone on one.
    line_start = max(text.rfind("\n", 0, start), text.rfind("\r", 0, start)) + 1
    return start - line_start <= 3 and not text[line_start:start].strip(" ")


@functools.lru_cache(maxsize=16)
def _clusters(text: str) -> tuple[_Cluster, ...]:
    # Cached: stripping and finalizing one answer read the same text several times.
    code = _code_spans(text)
    code_starts = [start for start, _ in code]

    def in_code(position: int) -> bool:
        if not code:
            return False
        index = bisect.bisect_right(code_starts, position) - 1
        return index >= 0 and position < code[index][1]

    groups: list[_Group] = []
    for match in _GROUP_RE.finditer(text):
        start, end = match.span()
        link = text.startswith("(", end) or (
            start > 0 and text[start - 1] == "[" and text.startswith("](", end)
        )
        if link or _is_reference_definition(text, start, end) or in_code(start):
            continue
        parsed = _parse_group(match.group(1))
        if parsed is not None:
            groups.append(_Group(start, end, *parsed))

    clusters: list[_Cluster] = []
    run: list[_Group] = []
    for group in [*groups, None]:
        if run and (group is None or run[-1].end != group.start):
            # A whole cluster where a reference definition would start (``[2][2]: x``) is
            # left alone like one: rewritten as one group it would become one.
            if not _is_reference_definition(text, run[0].start, run[-1].end):
                clusters.append(_Cluster(run[0].start, run[-1].end, tuple(run)))
            run = []
        if group is not None:
            run.append(group)
    return tuple(clusters)


def _numbers_in_range(items: Sequence[tuple[int, int]], n_sources: int) -> Iterator[int]:
    for low, high in items:
        yield from range(max(low, 1), min(high, n_sources) + 1)


def _closes(text: str, position: int) -> bool:
    """Whether ``text[position:]`` starts with something no space should stand before."""
    following = text[position : position + 1]
    if not following or following in _CLOSERS:
        return True
    if following in _CLOSING_MARKS:
        end = position
        while end < len(text) and text[end] == following:
            end += 1
        return end == len(text) or not text[end].isalnum()
    return False


def _rewrite(text: str, clusters: Sequence[_Cluster], replacements: Sequence[str]) -> str:
    """Replace each cluster with its replacement; an empty one removes the cluster tidily."""
    out: list[str] = []
    position = 0
    # Whether the output so far, trailing spaces aside, ends a line (or is empty).
    at_line_start = True
    for cluster, replacement in zip(clusters, replacements, strict=True):
        segment = text[position : cluster.start]
        out.append(segment)
        content = segment.rstrip(_HSPACE)
        if content:
            at_line_start = content[-1] in "\r\n"
        position = cluster.end
        if replacement:
            out.append(replacement)
            at_line_start = False
            continue
        rest = position
        while rest < len(text) and text[rest] in _HSPACE:
            rest += 1
        if at_line_start and text.startswith(("\r\n", "\n", "\r"), rest):
            # A marker alone on its line: drop the line, not just the marker, so one
            # paragraph does not become two.
            _drop_trailing_hspace(out)
            position = rest + (2 if text.startswith("\r\n", rest) else 1)
        elif at_line_start and rest > position:
            # Only indentation before the marker: keep it, drop the space after instead.
            position = rest
        elif _closes(text, position):
            _drop_trailing_hspace(out)
    out.append(text[position:])
    return "".join(out)


def _drop_trailing_hspace(out: list[str]) -> None:
    while out:
        trimmed = out[-1].rstrip(_HSPACE)
        if trimmed:
            out[-1] = trimmed
            return
        out.pop()


def _format_items(items: Sequence[tuple[int, int]]) -> str:
    return ", ".join(str(low) if low == high else f"{low}-{high}" for low, high in items)


# Tabs too: a removed marker takes the spaces and tabs before it along.
_JOINABLE = frozenset("0123456789 \t,;" + _DASHES)


def _could_join(text: str, start: int, end: int) -> bool:
    """Whether removing ``text[start:end]`` could let the text around it read as a new group:
    only if a ``[`` and a ``]`` face each other across it over group characters alone."""
    before = start - 1
    while before >= 0 and text[before] in _JOINABLE:
        before -= 1
    if before < 0 or text[before] != "[":
        return False
    after = end
    while after < len(text) and text[after] in _JOINABLE:
        after += 1
    return after < len(text) and text[after] == "]"


def _strip_once(text: str, n_sources: int) -> tuple[str, bool]:
    """The text with one round of out-of-range markers removed, and whether another round
    could find more (a removal joined its neighbours, or code spans may have moved)."""
    clusters = _clusters(text)
    replacements = []
    changed = again = False
    for cluster in clusters:
        kept = []
        for group in cluster.groups:
            if group.lowest >= 1 and group.highest <= n_sources:
                kept.append(text[group.start : group.end])  # the common case: all in range
                continue
            clipped = tuple(
                (max(low, 1), min(high, n_sources))
                for low, high in group.items
                if max(low, 1) <= min(high, n_sources)
            )
            if clipped == group.items:
                kept.append(text[group.start : group.end])
            elif clipped:
                kept.append(f"[{_format_items(clipped)}]")
        replacement = "".join(kept)
        if replacement != text[cluster.start : cluster.end]:
            changed = True
            again = again or _could_join(text, cluster.start, cluster.end)
        replacements.append(replacement)
    if not changed:
        return text, False
    # Removing whole lines can change which backticks or fences pair up; and two removals
    # in one round can bring brackets together that neither could alone (``[[9]0[9]]``).
    again = again or "`" in text or "~~~" in text or len(clusters) > 1
    return _rewrite(text, clusters, replacements), again


def strip_out_of_range_markers(text: str, n_sources: int) -> str:
    """Remove every marker, or part of a marker group, outside ``1..n_sources``.

    ``[0]`` and ``[7]`` go when there are 4 sources; ``[1, 9]`` becomes ``[1]`` and
    ``[3-6]`` becomes ``[3-4]``. In-range markers are left exactly as written. A removed
    marker takes its neighbouring space with it, so no doubled space or space before
    punctuation is left behind, and a marker alone on a line takes the line with it.
    """
    # Removing a marker can join its neighbours into a new one (``[[9]1]``); repeat while
    # that may have happened, so that stripping twice is the same as stripping once. Each
    # round costs one scan, so deeply nested brackets cost one scan per level.
    return list(_strip_rounds(text, n_sources))[-1]


def _strip_rounds(text: str, n_sources: int) -> Iterator[str]:
    """The text after each round of stripping; the last is the result (the text itself when
    nothing is out of range)."""
    while True:
        stripped, again = _strip_once(text, n_sources)
        yield stripped
        if stripped == text or not again:
            return
        text = stripped


def cited_numbers(text: str) -> list[int]:
    """Every number the text's markers cite, in order of first appearance, ranges expanded."""
    seen: dict[int, None] = {}
    for cluster in _clusters(text):
        for group in cluster.groups:
            for low, high in group.items:
                for number in range(low, min(high, low + _MAX_RANGE_EXPANSION) + 1):
                    seen.setdefault(number)
    return list(seen)


def marker_clusters(text: str, n_sources: int) -> list[tuple[int, int, tuple[int, ...]]]:
    """Each marker cluster as ``(start, end, numbers)``: where it stands and the numbers in
    ``1..n_sources`` it cites, in the order written, each once (what the finalizer reads as
    markers, so nothing in code or a link)."""
    found = []
    for cluster in _clusters(text):
        numbers: dict[int, None] = {}
        for group in cluster.groups:
            for number in _numbers_in_range(group.items, n_sources):
                numbers.setdefault(number)
        found.append((cluster.start, cluster.end, tuple(numbers)))
    return found


def drop_citations(text: str, n_sources: int, dropped: Sequence[frozenset[int]]) -> str:
    """``text`` without the numbers ``dropped[i]`` in the i-th cluster of
    :func:`marker_clusters`; a cluster left citing nothing is removed as the finalizer
    removes a marker (its space with it). Other clusters stay exactly as written."""
    clusters = _clusters(text)
    if len(dropped) != len(clusters):
        raise ValueError(f"the text has {len(clusters)} marker clusters, not {len(dropped)}")
    replacements = []
    for cluster, (_, _, numbers), gone in zip(
        clusters, marker_clusters(text, n_sources), dropped, strict=True
    ):
        if not gone & set(numbers):
            replacements.append(text[cluster.start : cluster.end])
        else:
            replacements.append("".join(f"[{n}]" for n in numbers if n not in gone))
    return _rewrite(text, clusters, replacements)


def _cites_any(text: str, n_sources: int) -> bool:
    return any(
        next(_numbers_in_range(group.items, n_sources), None) is not None
        for cluster in _clusters(text)
        for group in cluster.groups
    )


def _renumber(text: str, n_sources: int, numbering: dict[int, int]) -> str:
    """Rewrite every cluster of a stripped text with the numbers ``numbering`` gives (old ->
    new), adding the sources first cited here in order. The text comes back unchanged when
    it cites nothing, as :func:`finalize_citations` leaves it."""
    clusters = _clusters(text)
    replacements = []
    cites = False
    for cluster in clusters:
        numbers = set()
        for group in cluster.groups:
            for old in _numbers_in_range(group.items, n_sources):
                numbers.add(numbering.setdefault(old, len(numbering) + 1))
        cites = cites or bool(numbers)
        replacements.append("".join(f"[{number}]" for number in sorted(numbers)))
    return _rewrite(text, clusters, replacements) if cites else text


def finalize_citations(text: str, sources: Sequence[T]) -> tuple[str, list[T]]:
    """Keep only the cited sources, renumbered in first-citation order, and rewrite the text.

    Order of first citation is read left to right, also inside a group, so ``[3, 1]`` makes
    source 3 the new ``[1]``. Each cluster is rewritten as adjacent single markers in
    ascending new number (``[3, 1]`` -> ``[1][2]``, ``[2][2]`` -> ``[1]``). Markers outside
    ``1..len(sources)`` are removed as :func:`strip_out_of_range_markers` would.

    When the text cites no source at all, a copy of the untouched list comes back, so an
    answer from a model that ignored the citation contract keeps its sources; the text then
    comes back unchanged (run :func:`strip_out_of_range_markers` first to clear markers that
    point nowhere).
    """
    n_sources = len(sources)
    if not _cites_any(text, n_sources):
        return text, list(sources)
    text = strip_out_of_range_markers(text, n_sources)
    new_number: dict[int, int] = {}
    rewritten = _renumber(text, n_sources, new_number)
    if not new_number:
        # Stripping changed what counts as code (a removed marker completed a fence), and
        # nothing is cited any more: the untouched list stays, as for any uncited text.
        return text, list(sources)
    return rewritten, [sources[old - 1] for old in new_number]
