"""A Sources section the answer model wrote at the end of its own text, removed.

The Sources list is ours alone: the references the handler numbers. A model that ends its
answer with ``Sources:`` and links of its own (prompt-injected, or only chatty) would show
readers a second list, with links we never checked, right above ours. The handler passes the
answer model's text through :class:`ModelSources` before anything else reads it, so every
surface (the stream, ``done.text``, a replay) sees the answer without it.

What counts (docs/contract.md, "The model's own Sources list"): a line that is only a heading
word (``Sources``, ``References``, ``Citations``, ``Bibliography``, singular or plural, in any
case), perhaps with Markdown heading hashes, emphasis and a colon around it; then, to the end
of the text, nothing but list items, lines that open with a link or a bracket, bare addresses
and blank lines. A section with prose after it was not the end of the answer and is kept, and
so is a URL inside an ordinary sentence.

The text is read line by line with fixed-length looks at each line's start, so each character
costs a bounded amount of work, however the text is split into tokens.
"""

from __future__ import annotations

import copy
import re

__all__ = ["ModelSources", "without_model_sources"]


# A heading the model may write over its own list: "Sources:", "## References", "**Sources**".
_HEADING_WORDS = ("sources", "source", "references", "reference", "citations", "bibliography")
_MAX_INDENT = 3
_MAX_HASHES = 6
_MAX_GAP = 8  # spaces after the hashes, or marks after the word
_TRAILING_MARKS = frozenset("*_: \t\r")
# A heading is shorter than this, so only a line's first characters are ever looked at.
_HEAD = 48
# A line of a list: "1. ...", "2) ...", "- ...", "* ...", "[3] ...", "[3]: ...", a link alone
# ("[ABCA1](https://...)") or a bare address. Its marker is decided by the first few
# characters after the indentation.
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+\u2022][ \t]|\d{1,4}[.)]|\[|<?https?://)")
_MARKER_CHARS = 9  # "<https://" is the longest a list marker needs


def _heading_state(line: str) -> str:
    """``"whole"`` if ``line`` (no newline) is a Sources heading as it stands, ``"prefix"``
    if more characters could still make it one, ``"no"`` otherwise. Read left to right in
    fixed steps, so a line is ``"no"`` only when no continuation of it is a heading."""
    if len(line) >= _HEAD:
        return "no"
    position = 0
    while position < len(line) and position < _MAX_INDENT and line[position] in " \t":
        position += 1
    hashes = position
    while position < len(line) and position - hashes < _MAX_HASHES and line[position] == "#":
        position += 1
    if position > hashes:
        gap = position
        while position < len(line) and position - gap < _MAX_GAP and line[position] in " \t":
            position += 1
    marks = position
    while position < len(line) and position - marks < 2 and line[position] in "*_":
        position += 1
    word_start = position
    while position < len(line) and line[position].isascii() and line[position].isalpha():
        position += 1
    word = line[word_start:position].lower()
    if position == len(line):
        if word in _HEADING_WORDS:
            return "whole"
        return "prefix" if any(whole.startswith(word) for whole in _HEADING_WORDS) else "no"
    rest = line[position:]
    if word in _HEADING_WORDS and len(rest) <= _MAX_GAP and _TRAILING_MARKS.issuperset(rest):
        return "whole"
    return "no"


class ModelSources:
    """Removes a Sources or References section that the model wrote at the end of its
    answer (a heading line, then only list items, links and blank lines to the end), as the text
    streams: :meth:`feed` each piece and :meth:`close` at the end; joined, what they return
    is the text without that section, for any split of the text into pieces.

    What is held back: the current line while it may still become such a heading; from a
    heading on, every line while all are list items or blank; and whitespace after the last
    text released, so that a removed section takes the blank lines before it along. A
    section followed by prose is released unchanged. Only a line's first characters are
    classified, so each character costs a bounded amount of work."""

    def __init__(self) -> None:
        self._space: list[str] = []  # whitespace after the last released character
        self._section: list[str] = []  # a heading and the list lines after it, whole lines
        self._line: list[str] = []  # the current line, while held
        self._head = ""  # its first _HEAD characters
        self._blank = True  # the current line is whitespace so far
        self._free = False  # the current line is known to be prose: released as it comes
        self._out: list[str] = []
        self.started = False  # whether any text came

    def feed(self, text: str) -> str:
        """Take the next piece of the text; return what can be released now."""
        if not text:
            return ""
        self.started = True
        if self._free and "\n" not in text:
            # The common token, inside a line already known to be prose: released as it
            # comes, less trailing whitespace, which waits for the next token (what
            # _release does, without the line machinery).
            content = text.rstrip()
            if not content:
                self._space.append(text)
                return ""
            released = "".join(self._space) + content if self._space else content
            self._space = [text[len(content) :]] if len(content) < len(text) else []
            return released
        position = 0
        while position < len(text):
            newline = text.find("\n", position)
            end = len(text) if newline < 0 else newline + 1
            self._take(text[position:end], complete=newline >= 0)
            position = end
        return self._flush()

    def peek_close(self) -> str:
        """What :meth:`close` would release now, leaving this one as it is."""
        return copy.deepcopy(self).close()

    def close(self) -> str:
        """The text has ended: release what is held, less a trailing Sources section."""
        head = self._head.rstrip("\r")
        ends_section = bool(self._section) and self._list_line()
        bare_heading = not self._section and _heading_state(head) == "whole"
        if not (ends_section or bare_heading):
            self._release("".join(self._section) + "".join(self._line))
            self._out.extend(self._space)
        self._space, self._section = [], []
        self._next_line()
        return self._flush()

    def _list_line(self) -> bool:
        return self._blank or _LIST_ITEM.match(self._head) is not None

    def _next_line(self) -> None:
        self._line, self._head, self._blank = [], "", True

    def _take(self, piece: str, *, complete: bool) -> None:
        if self._free:
            self._release(piece)
            self._free = not complete
            return
        self._line.append(piece)
        if len(self._head) < _HEAD:
            self._head += piece[: _HEAD - len(self._head)].rstrip("\n")
        self._blank = self._blank and not piece.strip()
        if self._section:
            if self._list_line():
                if complete:
                    self._section.extend(self._line)
                    self._next_line()
                return
            marker = self._head.lstrip(" \t")
            if not complete and len(marker) < _MARKER_CHARS and len(self._head) < _HEAD:
                return  # "1" may still become "1. ..."
            # Prose after the list: it was not the end of the answer.
            self._release("".join(self._section) + "".join(self._line))
            self._section = []
        else:
            state = _heading_state(self._head.rstrip("\r") if complete else self._head)
            if complete and state == "whole":
                self._section = self._line
                self._next_line()
                return
            if not complete and state != "no":
                return
            self._release("".join(self._line))
        self._next_line()
        self._free = not complete

    def _release(self, text: str) -> None:
        content = text.rstrip()
        if not content:
            self._space.append(text)
            return
        self._out.extend(self._space)
        self._out.append(content)
        self._space = [text[len(content) :]] if len(content) < len(text) else []

    def _flush(self) -> str:
        out = "".join(self._out)
        self._out = []
        return out


def without_model_sources(text: str) -> str:
    """``text`` without a Sources section the model wrote at its end (:class:`ModelSources`)."""
    sources = ModelSources()
    return sources.feed(text) + sources.close()
