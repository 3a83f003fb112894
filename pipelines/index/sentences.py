"""Sentences of a source's prose that can be quoted alone: segmented, cleaned, checked.

Reactome's summaries cite the literature inline ("... RRM2B (Kuo et al. 2010)."). A regular
expression splitting at ". " cuts those at "et al." and leaves fragments such as "RRM2B (Kuo
et al"; so literature parentheticals are removed whole before segmenting, and the segmenting
is done by ``sentencex`` (a compiled segmenter that knows abbreviations such as "e.g.", "i.e."
and "et al."; chosen over pysbd, syntok and nupunkt by measurement, decision 0014).

Two checks go with it: :func:`is_fragment` (a piece that cannot stand as a sentence) and
:func:`points_back` (a sentence that leans on the one before it: "This ...", "There, ...",
"However, ...").

:func:`segment` is what every reader of a passage's sentences takes: the exact spans
(:func:`sentence_spans`), each as scored (:func:`clean_sentence`), its paragraph, and the
units the extractive answer model may quote (a sentence with the ones before it that it
leans on). Ingestion stores it for each chunk (``pipelines.index.chunk_sentences``), so it
lives here, below the answering and evidence layers that read it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import sentencex

from pipelines.core.text import without_surrogates

__all__ = [
    "MAX_UNIT",
    "Segmented",
    "answerlike",
    "clean_sentence",
    "has_words",
    "is_fragment",
    "points_back",
    "quotable_units",
    "segment",
    "sentence_spans",
    "split_paragraphs",
    "split_sentences",
    "strip_literature",
]

# A parenthetical is a literature citation when it holds "et al" or a name followed by a year:
# "(Kuo et al. 2010)", "(reviewed in Corless et al, 2011)", "(Smith and Jones 2001; Li 2003)".
# Only innermost parentheses are matched, so a citation inside a longer aside goes alone.
# The name is read from its last letter ("Smith" as its "h"): only non-letters may stand
# between that letter and the year, so each try ends at the next letter, where a name read
# from its first letter would rescan the rest of its word from every letter (quadratic in a
# long word). Spaces before a citation are taken from the start of their run only, not
# retried from each of them.
_CITATION_BODY = (
    r"\((?=[^()]*(?:\bet\.?\s?al\b|[^\W\d_](?:[\d_]|[^\w\s()])*,?\s*(?:19|20)\d\d[a-z]?\b))"
    r"[^()]*\)"
)
_CITATION_RE = re.compile(r"(?<![ \t])[ \t]*" + _CITATION_BODY)
# "... membrane. (Kerner 2000)." : the citation stands after the sentence's own full stop.
_CITATION_AFTER_STOP_RE = re.compile(r"(?<=[.!?])[ \t]*" + _CITATION_BODY + r"\.?")
# Spaces and tabs only before a bullet: a run of blank lines is read once, not from each line.
_BULLET_RE = re.compile(r"^[^\S\n]*(?:[-*+]|\d+[.)])\s+", re.MULTILINE)
_PARAGRAPH_RE = re.compile(r"\n\s*\n|\n(?=\s*(?:[-*+]|\d+[.)])\s)")
_WORDLIKE_RE = re.compile(r"[^\W_]")
_TAG_RE = re.compile(r"</?(?:p|br|li|ul|ol)\s*/?>", re.IGNORECASE)

# Openings that make a sentence depend on the one before it: a pronoun or demonstrative
# standing for something said there, a place or time adverb pointing back, a connective.
_POINTS_BACK_RE = re.compile(
    r"^(?:there|this|these|those|that|it|its|they|their|them|here|such|thus|hence|"
    r"in addition|additionally|however|moreover|furthermore|also|likewise|similarly|"
    r"consequently|therefore|in turn|in contrast|instead|otherwise|then|finally|"
    r"as a result|in this|in these|to this end|the former|the latter|another|"
    r"the same|the resulting|each of these|all of these|one of these|"
    r"subsequently|accordingly|nevertheless|nonetheless|meanwhile|alternatively)\b",
    re.IGNORECASE,
)
# A word in lower case that is not a gene or molecule name (p53, mTOR and cAMP carry a digit
# or a capital), so a sentence starting with it was cut from the middle of another.
_LOWER_WORD_RE = re.compile(r"[a-z][a-z'-]*(?=[\s,.;:]|$)")


def has_words(text: str) -> bool:
    """Whether ``text`` holds a letter or digit (a sentence must)."""
    return _WORDLIKE_RE.search(text) is not None


def strip_literature(text: str) -> str:
    """``text`` without its literature parentheticals (kept out of quotes whole, never cut)."""
    return _CITATION_RE.sub("", _CITATION_AFTER_STOP_RE.sub("", text))


@lru_cache(maxsize=4096)
def _segment(paragraph: str) -> tuple[str, ...]:
    # Sources repeat from one question to the next: a chunk is segmented once per process.
    return tuple(
        sentence.strip() for sentence in sentencex.segment("en", paragraph) if sentence.strip()
    )


def split_paragraphs(text: str) -> list[list[str]]:
    """Each paragraph's sentences, literature citations removed; a list item is a paragraph
    of its own, its bullet removed. A piece with no letter or digit (a full stop left alone
    where a chunk was cut) is no sentence."""
    paragraphs: list[list[str]] = []
    for paragraph in _PARAGRAPH_RE.split(_TAG_RE.sub("\n\n", text)):
        flat = " ".join(_BULLET_RE.sub("", paragraph).split())
        sentences = [s for s in _segment(strip_literature(flat)) if _WORDLIKE_RE.search(s)]
        if sentences:
            paragraphs.append(sentences)
    return paragraphs


# Where a paragraph ends, as split_paragraphs reads it: a blank line, a list item's start, or
# one of the HTML tags some summaries carry.
_LEADING_BULLET_RE = re.compile(r"(?:[-*+]|\d+[.)])\s+")
_BREAK_RE = re.compile(_PARAGRAPH_RE.pattern + "|" + _TAG_RE.pattern, re.IGNORECASE)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """The ``[start, end)`` offsets of the sentences of ``text`` itself, so a sentence can be
    quoted exactly as written: the same segmenter as :func:`split_paragraphs`, paragraph by
    paragraph, each span trimmed of the spaces around it. Literature citations stay inside
    the span (a quote is the source's own words); :func:`clean_sentence` drops them for
    scoring. A piece with no letter or digit is no sentence."""
    return [(start, end) for start, end, _ in _paragraph_spans(text)]


def _paragraph_spans(text: str) -> list[tuple[int, int, int]]:
    """:func:`sentence_spans`, each with its paragraph's number (counting only paragraphs
    that hold a sentence, from 0)."""
    spans: list[tuple[int, int, int]] = []
    start = 0
    paragraph = 0
    # The segmenter takes only well-formed text; U+FFFD for a lone surrogate (from a broken
    # decoder or a model) keeps every offset where it was.
    text = without_surrogates(text)
    for end, after in [*((m.start(), m.end()) for m in _BREAK_RE.finditer(text)), (len(text),) * 2]:
        position = start
        found = len(spans)
        for piece in _segment_raw(text[start:end]):
            offset = text.index(piece, position)
            position = offset + len(piece)
            stripped = piece.strip()
            if not _WORDLIKE_RE.search(stripped):
                continue
            begin = offset + (len(piece) - len(piece.lstrip()))
            bullet = _LEADING_BULLET_RE.match(stripped)  # a quote starts at its words
            skip = bullet.end() if bullet and bullet.end() < len(stripped) else 0
            spans.append((begin + skip, begin + len(stripped), paragraph))
        paragraph += len(spans) > found
        start = after
    return spans


@lru_cache(maxsize=4096)
def _segment_raw(paragraph: str) -> tuple[str, ...]:
    return tuple(sentencex.segment("en", paragraph))


def clean_sentence(sentence: str) -> str:
    """A sentence as it is scored: its literature citations and bullet removed, its spaces
    collapsed (what :func:`split_paragraphs` makes of it)."""
    return " ".join(strip_literature(_BULLET_RE.sub("", sentence)).split())


def split_sentences(text: str) -> list[str]:
    """The sentences of :func:`split_paragraphs`, one list."""
    return [sentence for paragraph in split_paragraphs(text) for sentence in paragraph]


def is_fragment(sentence: str) -> bool:
    """A piece that cannot be quoted as a sentence: brackets that do not balance, cut at an
    "et al.", or starting in the middle of another sentence."""
    return (
        sentence.count("(") != sentence.count(")")
        or sentence.count("[") != sentence.count("]")
        or re.search(r"\bet al\.?\W*$", sentence) is not None
        or sentence[:1] in ")]},;:"
        or _LOWER_WORD_RE.match(sentence) is not None
    )


def points_back(sentence: str) -> bool:
    """Whether ``sentence`` leans on the one before it and cannot be quoted without it."""
    return _POINTS_BACK_RE.match(sentence) is not None


# A quotable unit holds at most this many sentences: one and those it leans on.
MAX_UNIT = 3


def answerlike(sentence: str) -> bool:
    """Whether ``sentence`` (as scored) reads as a statement worth quoting: six words or more,
    not a field ("Disease: Tangier disease.") or a heading."""
    words = sentence.split()
    return len(words) >= 6 and not re.match(r"^[\w ,()\[\]'-]{1,60}: \S", sentence[:65])


def quotable_units(
    texts: Sequence[str], paragraphs: Sequence[int], max_unit: int = MAX_UNIT
) -> tuple[tuple[int, ...], ...]:
    """The units of a passage that may be quoted, as positions in ``texts`` (its sentences as
    scored, with each one's paragraph): an :func:`answerlike` sentence that is no fragment,
    with the sentences before it that it :func:`points_back` to, back to one that stands
    alone (at most ``max_unit`` in all; a sentence with no such antecedent near is unused).
    An antecedent is looked for within the sentence's own paragraph only: across a paragraph
    break (two chunks of a source are joined by one) the sentence before may be unrelated.
    A sentence left with no letter or digit once cleaned is passed over."""
    units: list[tuple[int, ...]] = []
    kept: list[int] = []  # the current paragraph's sentences, by position
    for position, text in enumerate(texts):
        if kept and paragraphs[kept[-1]] != paragraphs[position]:
            kept = []
        if not _WORDLIKE_RE.search(text):
            continue
        kept.append(position)
        if not answerlike(text) or is_fragment(text):
            continue
        last = len(kept) - 1
        start = last
        # Walk back to a sentence that stands alone; if none is near, it is unused.
        while start >= 0 and points_back(texts[kept[start]]) and last - start < max_unit:
            start -= 1
        if start < 0 or points_back(texts[kept[start]]) or is_fragment(texts[kept[start]]):
            continue
        units.append(tuple(kept[start : last + 1]))
    return tuple(units)


@dataclass(frozen=True)
class Segmented:
    """A passage's sentences as every reader takes them: ``spans`` into its text
    (:func:`sentence_spans`), ``texts`` as scored (:func:`clean_sentence`), the number of
    each one's paragraph, and the :func:`quotable_units`."""

    spans: tuple[tuple[int, int], ...]
    texts: tuple[str, ...]
    paragraphs: tuple[int, ...]
    units: tuple[tuple[int, ...], ...]

    def unit_text(self, unit: Sequence[int]) -> str:
        """A unit as it is scored: its sentences joined by a space."""
        return " ".join(self.texts[position] for position in unit)


def segment(text: str) -> Segmented:
    """``text``'s sentences, paragraphs and quotable units (see :class:`Segmented`)."""
    found = _paragraph_spans(text)
    texts = tuple(clean_sentence(text[start:end]) for start, end, _ in found)
    paragraphs = tuple(paragraph for _, _, paragraph in found)
    return Segmented(
        tuple((start, end) for start, end, _ in found),
        texts,
        paragraphs,
        quotable_units(texts, paragraphs),
    )
