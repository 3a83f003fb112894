"""What a question's language can be read from: its words, without identifiers.

Reactome questions are full of names that belong to no language: gene and protein symbols
(TP53, mTOR, BRCA1), stable ids (R-HSA-69488), database ids (CHEBI:15422, ENSG00000141510),
variants (R132H), formulas (H2O2) and URLs. A detector reads their letter sequences as words
of some language, and on a short question they outweigh the few real words: "O que significa
IDH1 R132H?" read as it stands is Spanish to one of the detectors measured (decision 0035).
So they are set aside first, and what is left says how much there is to go on.
"""

from __future__ import annotations

import re

__all__ = ["MIN_LETTERS", "letter_count", "without_identifiers"]

# Fewer letters than this once identifiers are gone, and the question is read as English
# (decision 0035): every labeled identifier-only question leaves 0 or 1 (TNF-alpha leaves its
# Greek letter), and the shortest real one leaves 6 (PTEN的作用, "the role of PTEN"). Three is
# the least a detector can read a word from ("Why?"); "ok" is not enough.
MIN_LETTERS = 3

_URL_RE = re.compile(r"(?:https?://|www\.)\S+", re.IGNORECASE)
# A run of Latin or Greek letters and digits, with the joiners identifiers use inside it.
# Chinese and Japanese characters are not in it, so "TP53在R-HSA-69488中" yields TP53 and
# R-HSA-69488 and leaves the Chinese around them alone.
_ALNUM = r"0-9A-Za-z\u00C0-\u024F\u1E00-\u1EFF\u0370-\u03FF"
_TOKEN_RE = re.compile(rf"[{_ALNUM}](?:[{_ALNUM}_\-./:+'\u2019]*[{_ALNUM}])?")
_PART_RE = re.compile(r"[-/]")
_SPACES_RE = re.compile(r"\s+")
# Kana, CJK ideographs (with extension A and the compatibility block), half-width katakana.
_CJK_RE = re.compile(r"[\u3040-\u30FF\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF\uFF66-\uFF9F]")


def _is_word(part: str, beside_an_id: bool) -> bool:
    if not part or any(char.isdigit() for char in part):
        return False
    # Two capitals in one word: a symbol or an acronym (mTOR, KRAS, DNA, ADN), never a word
    # of these languages in ordinary writing, where a word has at most its first capital.
    if sum(char.isupper() for char in part) >= 2:
        return False
    # Beside a part with a digit, a short part is the id's prefix (the R of R-HSA-69488, the
    # hsa of hsa-miR-21-5p); a word is longer (the Mangel of ABCA1-Mangel).
    return not beside_an_id or len(part) >= 4


def _words_of(token: str) -> str:
    # Database ids are whole: CHEBI:15422, GO:0006915, snake_case names.
    if ":" in token or "_" in token:
        return " "
    # A hyphenated token keeps its parts that are words: "mTOR-Signalweg" is a symbol and a
    # German word, "Download-Knopf" two German words, "R-HSA-69488" none.
    parts = _PART_RE.split(token)
    beside_an_id = any(char.isdigit() for char in token)
    # A space, not nothing, where all of it goes: "在R-HSA-69488中" must not join 在 and 中.
    return " ".join(part for part in parts if _is_word(part, beside_an_id)) or " "


def without_identifiers(text: str) -> str:
    """``text`` with URLs, ids, symbols and acronyms removed, spaces collapsed: the words a
    detector should read. Linear in ``text``: every pattern here either starts with a
    literal or matches a run once from its first character
    (tests/language/test_detection_and_texts.py)."""
    text = _URL_RE.sub(" ", text)
    text = _TOKEN_RE.sub(lambda match: _words_of(match.group(0)), text)
    return _SPACES_RE.sub(" ", text).strip()


def letter_count(text: str) -> int:
    """The letters in ``text``, a Chinese character or a kana counting two: one is a
    syllable, often a word, where a Latin letter is a sound ("なぜ", "why", is a question)."""
    return sum(2 if _CJK_RE.match(char) else 1 for char in text if char.isalpha())
