"""Which sentence of an answer cites which source, and the evidence items built from verdicts.

Pure functions over the answer's text; the judging itself is :mod:`pipelines.evidence.judges`.

A *sentence* is what :func:`~pipelines.index.sentences.sentence_spans` (the segmenter the
extractive model uses) finds in the answer's text with its markers blanked out, so that how a
marker is written cannot move a sentence's end. A *marker* is what the finalizer reads as
one (:func:`~pipelines.citations.finalize.marker_clusters`): nothing inside code or a link.
A marker belongs to the sentence it stands in; one after a sentence on the same line belongs
to that sentence ("... cholesterol. [1] It binds ..." cites [1] for the first sentence), and
one opening a line, a paragraph or a list item to the sentence it opens, as a reader takes
them. A sentence is judged in its *claim* form: its
markers cut out and its spaces collapsed, which is the same before and after the finalizer
renumbers (or drops) markers, so a verdict found on the model's text holds for the final one.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pipelines.citations.finalize import drop_citations, marker_clusters
from pipelines.citations.sources import Source
from pipelines.core.text import without_surrogates
from pipelines.index.sentences import sentence_spans

__all__ = [
    "Claim",
    "Evidence",
    "Verdict",
    "cited_sentences",
    "claims_of",
    "drop_unsupported",
    "evidence_items",
]

_SPACE_BEFORE_PUNCTUATION_RE = re.compile(r"\s+(?=[.,;:!?)])")


@dataclass(frozen=True)
class Claim:
    """One (sentence, cited source) pair to judge: the sentence in claim form, the cited
    source's retrieval number (``Source.n``) and its text as the model was given it."""

    sentence: str
    source_n: int
    passage: str


@dataclass(frozen=True)
class Verdict:
    """A judge's finding for one claim: the passage's best supporting span, how well it
    supports the sentence (higher is better; the judge says its scale) and whether it does."""

    quote_span: tuple[int, int]
    score: float
    supported: bool


@dataclass(frozen=True)
class CitedSentence:
    span: tuple[int, int]
    claim: str
    numbers: tuple[int, ...]  # as the text numbers them, in the order cited
    clusters: tuple[int, ...]  # the marker clusters it owns, by index


@dataclass(frozen=True)
class Evidence:
    """One item of ``done.data.evidence``."""

    n: int
    sentence: tuple[int, int]
    quote: str
    quote_span: tuple[int, int]
    score: float
    supported: bool


def _claim_text(
    text: str, span: tuple[int, int], cuts: Sequence[tuple[int, int]], starts: Sequence[int]
) -> str:
    """The sentence at ``span`` without the markers cut at ``cuts`` (sorted, with their
    ``starts``): only the cuts from the span's start on are looked at, so all sentences
    together cost time linear in the text, however many markers it has."""
    pieces = []
    position = span[0]
    for index in range(bisect.bisect_left(starts, position), len(cuts)):
        start, end = cuts[index]
        if end > span[1]:
            break
        pieces.append(text[position:start])
        position = end
    pieces.append(text[position : span[1]])
    claim = _SPACE_BEFORE_PUNCTUATION_RE.sub("", " ".join("".join(pieces).split()))
    return without_surrogates(claim)  # what a model can embed


def cited_sentences(text: str, n_sources: int) -> list[CitedSentence]:
    """The sentences of ``text`` that cite at least one of ``1..n_sources``, in order."""
    clusters = marker_clusters(text, n_sources)
    if not clusters:
        return []
    # Segmented with its markers blanked out: where a sentence ends must not depend on how a
    # marker is written ("[1-2]" before the finalizer, "[1][2]" after it).
    blanked = list(text)
    for start, end, _ in clusters:
        blanked[start:end] = " " * (end - start)
    spans = [list(span) for span in sentence_spans("".join(blanked))]
    if not spans:
        return []
    starts = [start for start, _ in spans]
    owner: list[int] = []
    for start, end, _ in clusters:
        index = bisect.bisect_right(starts, start) - 1
        if index >= 0 and start < spans[index][1]:
            pass  # inside its sentence: "... cholesterol [1]."
        elif index >= 0 and (index + 1 == len(spans) or "\n" not in text[spans[index][1] : start]):
            # After a sentence, on its line: it closes that one ("... cholesterol. [1] It").
            spans[index][1] = end
        else:
            # Opening a line, a paragraph or a list item: the sentence it opens is its own.
            index += 1
            spans[index][0] = min(spans[index][0], start)
        owner.append(index)
    cuts = [(start, end) for start, end, _ in clusters]
    cut_starts = [start for start, _ in cuts]
    # Each sentence's clusters, gathered in one pass: asking every sentence for its own
    # among all clusters was O(sentences x markers), 11 s for an answer of 8,000 sentences.
    owned: dict[int, list[int]] = {}
    for k, who in enumerate(owner):
        owned.setdefault(who, []).append(k)
    found = []
    for index, mine in sorted(owned.items()):
        numbers = tuple(dict.fromkeys(n for k in mine for n in clusters[k][2]))
        if numbers:
            span = spans[index]
            claim = _claim_text(text, (span[0], span[1]), cuts, cut_starts)
            found.append(CitedSentence((span[0], span[1]), claim, numbers, tuple(mine)))
    return found


def claims_of(text: str, sources: Sequence[Source]) -> list[Claim]:
    """What to judge in ``text``, whose markers number ``sources``: each (sentence, source)
    pair once."""
    pairs: dict[tuple[str, int], Claim] = {}
    for sentence in cited_sentences(text, len(sources)):
        if not sentence.claim:
            continue  # markers alone at the very start: nothing to judge
        for number in sentence.numbers:
            source = sources[number - 1]
            key = (sentence.claim, source.n)
            if key not in pairs:
                pairs[key] = Claim(sentence.claim, source.n, source.document.page_content)
    return list(pairs.values())


Verdicts = Mapping[tuple[str, int], Verdict]


def drop_unsupported(text: str, sources: Sequence[Source], verdicts: Verdicts) -> str:
    """``text`` without the markers judged unsupported for their sentence (a sentence cited
    with several sources keeps the ones that support it)."""
    cited = cited_sentences(text, len(sources))
    clusters = marker_clusters(text, len(sources))
    dropped: list[set[int]] = [set() for _ in clusters]
    for sentence in cited:
        for k in sentence.clusters:
            for number in clusters[k][2]:
                verdict = verdicts.get((sentence.claim, sources[number - 1].n))
                if verdict is not None and not verdict.supported:
                    dropped[k].add(number)
    if not any(dropped):
        return text
    return drop_citations(text, len(sources), [frozenset(numbers) for numbers in dropped])


def evidence_items(text: str, sources: Sequence[Source], verdicts: Verdicts) -> list[Evidence]:
    """One item per (sentence, cited source) of the final ``text`` with a verdict, in reading
    order; ``n`` is the number the text cites the source by."""
    items = []
    for sentence in cited_sentences(text, len(sources)):
        for number in sentence.numbers:
            source = sources[number - 1]
            verdict = verdicts.get((sentence.claim, source.n))
            if verdict is None:
                continue
            start, end = verdict.quote_span
            items.append(
                Evidence(
                    n=number,
                    sentence=sentence.span,
                    quote=source.document.page_content[start:end],
                    quote_span=verdict.quote_span,
                    score=verdict.score,
                    supported=verdict.supported,
                )
            )
    return items
