"""Final citation markers while the answer streams.

:class:`LiveCitations` takes the model's tokens as they come and gives back text whose
markers are already in their final form, together with the sources each piece cites for the
first time: joined, its output is exactly ``finalize_citations(strip_out_of_range_markers(
text, n), sources)`` of the whole text, for any split of that text into tokens.

It works by releasing the text up to a *settled* point and holding back the rest. A point is
settled when nothing that may still arrive can change how the text before it is rewritten:

- no marker group is open before it (``[``, ``[1``, ``[1, 3``), and the character before it
  is not one whose meaning depends on the next (a ``]`` that a ``(``, ``[`` or ``:`` could
  turn into a link, a cluster or a reference definition; spaces, which a removed marker
  takes along; closing emphasis marks; a backslash; a backtick or tilde that could lengthen
  a run);
- no code is open before it: no unclosed fence, no backtick run that a later run could
  still close, and the line it is on cannot turn out to be a fence.

Text between two settled points is rewritten on its own, after one character of what came
before it (which fixes whether it starts a line), with the numbering so far. What bounds the
hold: a marker is held until the first character after it that is not a space or a closing
mark; an inline code span until it closes or its paragraph ends; a fenced code block until its
closing line. Text that a removal would itself turn into code is held to the end, and long
holds are retried only as they double (docs/contract.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Generic, TypeVar

from pipelines.citations.finalize import (
    _DASHES,
    _code_layout,
    _renumber,
    _strip_rounds,
    strip_out_of_range_markers,
)

__all__ = ["LiveCitations"]

T = TypeVar("T")

# Characters a settled point may not follow (see the module docstring).
_UNSETTLED_CHARS = " \t\r[]`~\\*_\"'\u2019\u201d\u00bb"
_UNSETTLED = frozenset(_UNSETTLED_CHARS)
# What may follow "[" inside a group that is not finished yet.
_GROUP_CHARS_STR = "0123456789 ,;" + _DASHES
_GROUP_CHARS = frozenset(_GROUP_CHARS_STR)
# A line starting like this may still be a fence opener, until it ends.
_FENCE_START_RE = re.compile(r" {0,3}(?:`{3}|~{3})")
# How many earlier settled points to try when the rewrite of the latest is itself unsettled
# (a removed marker that made a new one or opened code: rare, adversarial text).
_RETRIES = 8
# Held text longer than this that nothing could release is tried again only once it has
# doubled, or a character that can end a hold arrives; text whose rewrite came out unsettled
# (a fence that a removed marker opened) only once it has doubled. Degenerate text then costs
# O(n log n) rather than O(n²).
_LONG_HOLD = 256
_ENDS_A_HOLD = frozenset("\n`~]")
# Unsettled characters that cannot change how the text before them reads: not a backtick,
# tilde or line end, which may open or close code. Whether a point is settled otherwise
# depends only on the text before it, so text whose held part has no settled point still has
# none after a token of these alone.
_QUIET = _UNSETTLED - frozenset("`~\r")
# The held text of most releases: a space, markers of plain numbers and ranges, and one
# punctuation mark after them, which settles them. Nothing in it can be code, a link or a
# reference definition, so its rewrite is the renumbering alone (LiveCitations._release_marker).
_SIMPLE_ITEM = r"[1-9][0-9]{0,2}(?:-[1-9][0-9]{0,2})?"
_SIMPLE_MARKER_RE = re.compile(rf"( ?)((?:\[{_SIMPLE_ITEM}(?:, ?{_SIMPLE_ITEM})*\])+)([.,;!?])")
_SIMPLE_ITEM_RE = re.compile(r"([0-9]+)(?:-([0-9]+))?")


def _open_group_start(text: str, end: int) -> int | None:
    """Where the marker group that ``text[:end]`` ends inside starts, or None."""
    position = end - 1
    while position >= 0 and text[position] in _GROUP_CHARS:
        position -= 1
    return position if position >= 0 and text[position] == "[" else None


def _adds_no_settled_point(token: str, in_group: bool) -> bool:
    """Whether no point in ``token`` can be settled, appended to held text that does (or
    does not: ``in_group``) end inside an open marker group: each of its characters is one
    no settled point follows, or a group character inside an open group."""
    for char in token:
        if char == "[":
            in_group = True
        elif char == "]":
            in_group = False
        elif char not in _QUIET and not (in_group and char in _GROUP_CHARS):
            return False
    return True


def _fence_may_open(text: str, end: int) -> bool:
    line_start = text.rfind("\n", 0, end) + 1
    return _FENCE_START_RE.match(text, line_start) is not None


def _settled(text: str) -> bool:
    """Whether all of ``text`` is settled (its end is a settled point)."""
    end = len(text)
    if not end or text[-1] in _UNSETTLED or _open_group_start(text, end) is not None:
        return False
    if _layout(text)[1] is not None:
        return False
    return not _fence_may_open(text, end)


def _layout(text: str) -> tuple[list[tuple[int, int]], int | None]:
    """:func:`_code_layout` of text that may go on. An unfinished last line that is blank so
    far, or starts like a fence, may still turn out not to be one, so it cannot yet end the
    paragraph before it: the layout is that of the text before it, and the line is open."""
    last_line = text.rfind("\n") + 1
    if last_line < len(text) and (
        not text[last_line:].strip() or _FENCE_START_RE.match(text, last_line)
    ):
        code, code_open = _code_layout(text[:last_line])
        return code, last_line if code_open is None else code_open
    return _code_layout(text)


def _rewrite_settled(text: str, n_sources: int, numbering: dict[int, int]) -> str | None:
    """The final form of the settled ``text``, or None if stripping it went through an
    unsettled state (a removal that opened code or a group, which later text could change)."""
    stripped = text
    for stripped in _strip_rounds(text, n_sources):
        if stripped != text and not _settled(stripped):
            return None
    return _renumber(stripped, n_sources, numbering)


class LiveCitations(Generic[T]):
    """One answer's live rewrite; see the module docstring.

    ``feed`` takes each token and ``close`` the end of the text; each returns the final text
    now settled. :attr:`cited` is the final reference list so far (a client must learn of a
    source before the text that cites it), :attr:`pending` the raw text held back now (read
    for every token, so a plain attribute), :attr:`held` the longest hold in characters.
    """

    def __init__(self, sources: Sequence[T]) -> None:
        self._sources = list(sources)
        self._numbering: dict[int, int] = {}  # source number -> final number
        self._cited: list[T] = []  # the sources in final order
        self._context = ""  # the last settled raw character: whether the next text starts a line
        self.pending = ""  # the raw text held back: after the last settled point
        self._in_group = False  # whether the held text ends inside an open "["
        self._retry_at = 0  # hold without trying until the held text is this long
        self._rejected = False  # whether the last try rewrote into something unsettled
        self._quiet = True  # whether the held text is known to have no settled point
        self.held = 0
        self._released: list[str] = []

    @property
    def text(self) -> str:
        """The final text released so far."""
        return "".join(self._released)

    @property
    def cited(self) -> list[T]:
        """The sources cited so far, in final order."""
        return list(self._cited)

    @property
    def n_cited(self) -> int:
        return len(self._cited)

    def cited_source(self, index: int) -> T:
        """The source with final number ``index + 1``."""
        return self._cited[index]

    def feed(self, token: str) -> str:
        """Take one token; return the final text now settled (often empty while a marker is
        held). The sources it cites first are in :attr:`cited` when it returns."""
        if not token:
            return ""
        pending = self.pending + token
        if self._in_group and not token.strip(_GROUP_CHARS_STR):
            # More digits, commas or spaces inside an open "[": nothing new can settle.
            self.pending = pending
            self.held = max(self.held, len(pending))
            return ""
        if "[" not in pending and "`" not in pending and "~" not in pending:
            # The common token: nothing here can be a marker or code, so the text stays as it
            # is and only a tail that could still matter to a marker (spaces) waits.
            settled = pending.rstrip(_UNSETTLED_CHARS)
            if len(settled) == len(pending):
                self.pending = ""
            else:
                self.pending = pending[len(settled) :]
                if len(self.pending) > self.held:
                    self.held = len(self.pending)
                if not settled:
                    return ""
            self._context = settled[-1]
            self._released.append(settled)
            return settled
        self.pending = pending
        if len(pending) < self._retry_at and (self._rejected or _ENDS_A_HOLD.isdisjoint(token)):
            self._in_group = _open_group_start(pending, len(pending)) is not None
            self.held = max(self.held, len(pending))
            return ""
        if self._quiet and _adds_no_settled_point(token, self._in_group):
            # Nothing before this token was settled, and nothing in it can be: what a release
            # would find (nothing), and what it would leave, without it.
            self._in_group = _open_group_start(pending, len(pending)) is not None
            self.held = max(self.held, len(pending))
            if len(pending) > _LONG_HOLD:
                self._retry_at = 2 * len(pending)
            return ""
        released = self._release(final=False)
        self._in_group = _open_group_start(self.pending, len(self.pending)) is not None
        self.held = max(self.held, len(self.pending))
        if released:
            self._retry_at = 0
        elif self._rejected or len(self.pending) > _LONG_HOLD:
            # A rewrite that came out unsettled waits for twice the text whatever arrives:
            # what settles it (a fence's closing line, say) is not one character.
            self._retry_at = 2 * len(self.pending)
        return released

    def close(self) -> str:
        """Release what is held: the text has ended."""
        return self._release(final=True)

    def _release(self, *, final: bool) -> str:
        if not final:
            simple = _SIMPLE_MARKER_RE.fullmatch(self.pending)
            if simple is not None:
                released = self._release_marker(simple)
                if released:
                    return released
        text = self._context + self.pending
        skip = len(self._context)
        self._rejected = False
        self._quiet = False
        ends = [len(text)] if final else self._settled_ends(text, skip)
        tried = False
        for end in ends:
            tried = True
            numbering = dict(self._numbering)
            if final:
                rewritten: str | None = _renumber(
                    strip_out_of_range_markers(text, len(self._sources)),
                    len(self._sources),
                    numbering,
                )
            else:
                rewritten = _rewrite_settled(text[:end], len(self._sources), numbering)
            if rewritten is None or not rewritten.startswith(self._context):
                self._rejected = True  # (the second cannot happen for a settled character)
                continue
            if not final and not _settled(rewritten):
                self._rejected = True
                continue
            first = len(self._numbering)
            self._numbering = numbering
            if end > skip:
                self._context = text[end - 1]
            self.pending = text[end:]
            released = rewritten[skip:]
            self._released.append(released)
            self._cited.extend(self._sources[old - 1] for old in list(numbering)[first:])
            self._quiet = not self.pending
            return released
        self._quiet = not tried
        return ""

    def _release_marker(self, simple: re.Match[str]) -> str:
        """What :meth:`_release` makes of held text that is simple markers settled by a
        punctuation mark (``" [3]."``, ``" [2][5],"``, ``" [1, 4-6]."``), without the general
        rewrite: the cited numbers renumbered, each once, in ascending new number; "" when a
        number is out of range or a range descends (the general rewrite handles those)."""
        space, groups, mark = simple.groups()
        body = groups[1:-1]
        if body.isdigit():  # one number: the commonest marker
            olds = [int(body)]
            if olds[0] > len(self._sources):
                return ""  # out of range: the general rewrite removes it
        else:
            olds = []
            for low_digits, high_digits in _SIMPLE_ITEM_RE.findall(groups):
                low = int(low_digits)
                high = int(high_digits) if high_digits else low
                if high < low or high > len(self._sources):
                    return ""  # not a group, or out of range in part: the general rewrite's
                olds.extend(range(low, high + 1))
        numbering = self._numbering
        news = set()
        for old in olds:  # left to right: a number's first citation gives it the next number
            new = numbering.get(old)
            if new is None:
                new = numbering[old] = len(numbering) + 1
                self._cited.append(self._sources[old - 1])
            news.add(new)
        if len(news) == 1:
            released = f"{space}[{new}]{mark}"
        else:
            released = space + "".join(f"[{number}]" for number in sorted(news)) + mark
        self._rejected = False
        self._context = mark
        self.pending = ""
        self._quiet = True
        self._released.append(released)
        return released

    @staticmethod
    def _settled_ends(text: str, skip: int) -> Iterator[int]:
        """Settled points after ``skip``, latest first, at most :data:`_RETRIES` of them."""
        code, code_open = _layout(text)
        end = len(text) if code_open is None else code_open
        found = 0
        while end > skip and found < _RETRIES:
            if text[end - 1] in _UNSETTLED:
                end -= 1
                continue
            group = _open_group_start(text, end)
            if group is not None:
                end = group  # nothing inside an open group is settled
                continue
            in_code = any(start < end < stop for start, stop in code)
            if not in_code and not _fence_may_open(text, end):
                found += 1
                yield end
            end -= 1
