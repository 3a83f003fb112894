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

from pipelines.citations.finalize import cited_numbers

__all__ = ["ModelSources", "without_model_sources"]


# A heading the model may write over its own list: "Sources:", "## References", "**Sources**",
# in each language an answer may be asked in ("Fuentes:", "## Quellen", "参考文献" and a
# full-width colon).
_HEADING_WORDS = frozenset(
    (
        *("sources", "source", "references", "reference", "citations", "bibliography"),
        *("fuentes", "fuente", "referencias", "referencia", "bibliografía", "citas"),
        *("fontes", "fonte", "referências", "referência", "bibliografia", "citações"),
        *("références", "référence", "bibliographie"),
        *("quellen", "quelle", "quellenangaben", "literatur", "literaturverzeichnis"),
        *("referenzen", "fonti", "riferimenti", "citazioni"),
        *("参考文献", "来源", "参考资料", "资料来源", "出处", "引用"),
        *("出典", "参考資料", "情報源", "ソース"),
    )
)
_MAX_INDENT = 3
_MAX_HASHES = 6
_MAX_GAP = 8  # spaces after the hashes, or marks after the word
_TRAILING_MARKS = frozenset("*_: \t\r\N{FULLWIDTH COLON}")
# A heading is shorter than this, so only a line's first characters are ever looked at.
_HEAD = 48
# A line of a list: "1. ...", "2) ...", "- ...", "* ...", "[3] ...", "[3]: ...", a link alone
# ("[ABCA1](https://...)") or a bare address; in Chinese and Japanese also a middle dot and a
# number followed by a full-width full stop, comma or parenthesis. Its marker is decided by
# the first few characters after the indentation.
_LIST_ITEM = re.compile(
    r"[ \t]*(?:[-*+\u2022][ \t]|\u30fb|\d{1,4}[.)\uff0e\u3001\uff09]|\[|<?https?://)"
)
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
    while position < len(line) and line[position].isalpha():
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
        self._taken = 0  # characters fed
        self._given = 0  # characters released, or dropped with a section
        self.longest = 0  # the most characters ever held at once

    def feed(self, text: str) -> str:
        """Take the next piece of the text; return what can be released now."""
        if not text:
            return ""
        self.started = True
        self._taken += len(text)
        if self._free and not self._space and "\n" not in text:
            # The common token, inside a line already known to be prose, with no line break
            # held: released whole, as it came (what _release does, without the machinery).
            self._given += len(text)
            return text
        position = 0
        while position < len(text):
            newline = text.find("\n", position)
            end = len(text) if newline < 0 else newline + 1
            self._take(text[position:end], complete=newline >= 0)
            position = end
        released = self._flush()
        self.longest = max(self.longest, self.held)
        return released

    @property
    def held(self) -> int:
        """How many characters fed are held back now."""
        return self._taken - self._given

    def peek_close(self) -> str:
        """What :meth:`close` would release now, leaving this one as it is."""
        return copy.deepcopy(self).close()

    def close(self) -> str:
        """The text has ended: release what is held, less a trailing Sources section."""
        head = self._head.rstrip("\r")
        last = "".join(self._line)
        ends_section = bool(self._section) and self._list_line() and not _answer_line(last)
        bare_heading = not self._section and _heading_state(head) == "whole"
        if not (ends_section or bare_heading):
            self._release("".join(self._section) + last)
            self._out.extend(self._space)
        self._space, self._section = [], []
        self._next_line()
        released = self._flush()
        self._given = self._taken  # what was not released went with the section
        return released

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
            if self._list_line() and not (complete and _answer_line("".join(self._line))):
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
        """Release ``text``, but hold whitespace from a line break on: a removed section
        takes the blank lines before it along. Spaces within a line go out with their
        token, so the tokens of an answer without such a section keep their boundaries."""
        content = text.rstrip()
        if content:
            self._out.extend(self._space)
            self._space = []
            self._out.append(content)
        rest = text[len(content) :]
        if not rest:
            return
        if self._space:
            self._space.append(rest)
            return
        line_break = next((i for i, c in enumerate(rest) if c in "\r\n"), -1)
        if line_break < 0:
            self._out.append(rest)
            return
        self._out.append(rest[:line_break])
        self._space.append(rest[line_break:])

    def _flush(self) -> str:
        out = "".join(self._out)
        self._out = []
        self._given += len(out)
        return out


# A reference entry's own number at a list line's start: "[3] Title", "[3]: Title".
_ENTRY_NUMBER = re.compile(r"[ \t]*\[\d{1,4}\]:?")


def _answer_line(line: str) -> bool:
    """Whether a list line under a Sources-like heading is part of the answer: prose that
    cites our sources by marker ("- Dietary intake [1]", under "## Sources of cholesterol"
    or only "## Sources"), with no link or address of its own. Removing it would take
    the answer's text and its citations with it; a list of the model's own links goes."""
    if "](" in line or "http://" in line or "https://" in line:
        return False
    item = _LIST_ITEM.match(line)
    start = 0 if item is None else item.end()
    if start and line[start - 1] == "[":
        start -= 1  # the list marker was the "[" of an entry number
    entry = _ENTRY_NUMBER.match(line, start)
    return bool(cited_numbers(line[start if entry is None else entry.end() :]))


def without_model_sources(text: str) -> str:
    """``text`` without a Sources section the model wrote at its end (:class:`ModelSources`)."""
    sources = ModelSources()
    return sources.feed(text) + sources.close()
