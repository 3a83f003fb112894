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
closing line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Generic, NamedTuple, TypeVar

from pipelines.citations import _DASHES, _code_layout, _renumber

__all__ = ["LiveCitations", "LivePiece"]

T = TypeVar("T")

# Characters a settled point may not follow (see the module docstring).
_UNSETTLED = frozenset(" \t\r[]`~\\*_\"'\u2019\u201d\u00bb")
# What may follow "[" inside a group that is not finished yet.
_GROUP_CHARS = frozenset("0123456789 ,;" + _DASHES)
# A line starting like this may still be a fence opener, until it ends.
_FENCE_START_RE = re.compile(r" {0,3}(?:`{3}|~{3})")
# How many earlier settled points to try when the rewrite of the latest is itself unsettled
# (a removed marker that made a new one or opened code: rare, adversarial text).
_RETRIES = 8


class LivePiece(NamedTuple, Generic[T]):
    """Text released for the stream, and the sources it cites for the first time (in their
    final order), which a client should learn of before the text."""

    text: str
    cited: list[T]


def _settled_at(
    text: str, end: int, code_open: int | None, code: Sequence[tuple[int, int]]
) -> bool:
    if end <= 0 or text[end - 1] in _UNSETTLED:
        return False
    if code_open is not None and end > code_open:
        return False
    for start, stop in code:
        if start < end < stop:
            return False
    position = end - 1
    while position >= 0 and text[position] in _GROUP_CHARS:
        position -= 1
    if position >= 0 and text[position] == "[":
        return False  # a marker group still open
    line_start = text.rfind("\n", 0, end) + 1
    return not _FENCE_START_RE.match(text, line_start)


def _settled(text: str) -> bool:
    """Whether all of ``text`` is settled (its end is a settled point)."""
    code, code_open = _code_layout(text)
    return _settled_at(text, len(text), code_open, code)


class LiveCitations(Generic[T]):
    """One answer's live rewrite; see the module docstring.

    ``feed`` takes each token and ``close`` the end of the text; each returns the piece of
    final text now settled (often empty while a marker is held) and the sources it cites
    first. :attr:`cited` is the final reference list so far, :attr:`held` the longest hold in
    characters.
    """

    def __init__(self, sources: Sequence[T]) -> None:
        self._sources = list(sources)
        self._numbering: dict[int, int] = {}  # source number -> final number
        self._cited: list[T] = []  # the sources in final order
        self._context = ""  # the last settled raw character: whether the next text starts a line
        self._pending = ""  # raw text after the last settled point
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

    @property
    def pending(self) -> str:
        """The raw text held back."""
        return self._pending

    def feed(self, token: str) -> LivePiece[T]:
        pending = self._pending + token
        if "[" not in pending and "`" not in pending and "~" not in pending:
            # The common token: nothing here can be a marker or code, so only trailing
            # spaces (which a marker after them could take along) wait.
            end = len(pending.rstrip(" \t\r"))
            if end and pending[end - 1] not in _UNSETTLED:
                self._pending = pending[end:]
                self.held = max(self.held, len(self._pending))
                self._context = pending[end - 1]
                self._released.append(pending[:end])
                return LivePiece(pending[:end], [])
        self._pending = pending
        piece = self._release(final=False)
        self.held = max(self.held, len(self._pending))
        return piece

    def close(self) -> LivePiece[T]:
        """Release what is held: the text has ended."""
        return self._release(final=True)

    def _release(self, *, final: bool) -> LivePiece[T]:
        text = self._context + self._pending
        skip = len(self._context)
        ends = [len(text)] if final else self._settled_ends(text, skip)
        for end in ends:
            numbering = dict(self._numbering)
            rewritten = _renumber(text[:end], len(self._sources), numbering)
            if not rewritten.startswith(self._context):
                continue  # cannot happen for a settled character; never emit on a guess
            if not final and not _settled(rewritten):
                continue
            first = len(self._numbering)
            self._numbering = numbering
            if end > skip:
                self._context = text[end - 1]
            self._pending = text[end:]
            released = rewritten[skip:]
            self._released.append(released)
            cited = [self._sources[old - 1] for old in list(numbering)[first:]]
            self._cited.extend(cited)
            return LivePiece(released, cited)
        return LivePiece("", [])

    @staticmethod
    def _settled_ends(text: str, skip: int) -> Iterator[int]:
        """Settled points after ``skip``, latest first, at most :data:`_RETRIES` of them."""
        code, code_open = _code_layout(text)
        end = len(text) if code_open is None else code_open
        found = 0
        while end > skip and found < _RETRIES:
            if _settled_at(text, end, code_open, code):
                found += 1
                yield end
            end -= 1
