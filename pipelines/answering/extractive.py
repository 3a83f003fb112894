"""The ``extractive`` answer model: no generative model, just the best retrieved sentences.

It reads the answer prompt back (:func:`pipelines.answering.prompts.read_answer_prompt`),
splits every source and context block into sentences (:mod:`pipelines.answering.sentences`:
literature citations removed whole, fragments dropped), and scores each quotable unit against
the question: the
embedding similarity plus the share of the question's rarer words it contains. A sentence
that leans on the one before it ("This ...", "However, ...") is quoted only together with
that sentence. The best units are told source by source, the source holding the best unit
first, each source's sentences in their own order, none twice; each sentence is followed by
its source's ``[n]`` (context sentences get no marker). It is a real LangChain chat model: it
streams word by word through the normal callbacks, so the rest of the pipeline cannot tell it
from a generative one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_core.messages import BaseMessage
from pydantic import ConfigDict

from pipelines.answering.prompts import read_answer_prompt
from pipelines.answering.sentences import (
    is_fragment,
    points_back,
    split_paragraphs,
    split_sentences,
)
from pipelines.core.composed_chat import ComposedChatModel
from pipelines.retrieval.expander import STOPWORDS, rule_expansion

__all__ = ["NOTHING_RELEVANT", "ExtractiveChatModel", "split_sentences"]

NOTHING_RELEVANT = "The retrieved material does not answer this question."

_WORD_RE = re.compile(r"[a-z0-9]+")
# A sentence quoted with its antecedents: at most this many sentences in all.
_MAX_UNIT = 3


def _answerlike(sentence: str) -> bool:
    # Field lists ("Disease: Tangier disease.") and headings are not sentences to quote.
    words = sentence.split()
    return len(words) >= 6 and not re.match(r"^[\w ,()\[\]'-]{1,60}: \S", sentence[:65])


def _with_marker(sentence: str, n: int | None) -> str:
    if n is None:
        return sentence
    # "... cholesterol [1]." reads better than "... cholesterol. [1]"
    if sentence[-1] in ".!?":
        return f"{sentence[:-1]} [{n}]{sentence[-1]}"
    return f"{sentence} [{n}]."


def _key(sentence: str) -> str:
    return " ".join(_WORD_RE.findall(sentence.lower()))


@dataclass(frozen=True)
class _Unit:
    """A sentence worth quoting, with the sentences before it that it leans on."""

    block: int
    positions: tuple[int, ...]
    text: str


def _units(block: int, paragraphs: Sequence[Sequence[str]]) -> list[_Unit]:
    """The quotable units of one block, numbered by position in the block's sentences. An
    antecedent is looked for within the sentence's own paragraph only: across a paragraph
    break (two chunks of a source are joined by one) the sentence before may be unrelated."""
    units = []
    offset = 0
    for sentences in paragraphs:
        for position, sentence in enumerate(sentences):
            if not _answerlike(sentence) or is_fragment(sentence):
                continue
            start = position
            # Walk back to a sentence that stands alone; if none is near, it is unused.
            while start >= 0 and points_back(sentences[start]) and position - start < _MAX_UNIT:
                start -= 1
            if start < 0 or points_back(sentences[start]) or is_fragment(sentences[start]):
                continue
            text = " ".join(sentences[start : position + 1])
            units.append(_Unit(block, tuple(range(offset + start, offset + position + 1)), text))
        offset += len(sentences)
    return units


class ExtractiveChatModel(ComposedChatModel):
    """Answers with the retrieved sentences that best answer the question, each cited."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model_name: str = "extractive"
    embeddings: Embeddings | None = None
    max_sentences: int = 4
    max_per_block: int = 2
    min_similarity: float = 0.3
    # Only units nearly as good as the best one: an answer, not a list of neighbours.
    relative_window: float = 0.15
    # Blocks come in retrieval order, best first: each later block's units lose this much,
    # so ties go to the sources the retriever trusted most.
    rank_nudge: float = 0.02
    # How much the question's own words count beside the embedding similarity: a sentence
    # about the subject in general scores high on similarity alone ("p53 is frequently
    # mutated ..." for a question about p53 and DNA damage) but lacks the asked-about terms.
    word_weight: float = 0.25

    @property
    def _llm_type(self) -> str:
        return "reactome-answers-extractive"

    def _word_scores(self, question: str, texts: Sequence[str]) -> list[float]:
        """The share of the question's words each text holds, rarer words (among these
        texts) weighing more."""
        wanted = {w for w in _WORD_RE.findall(question.lower()) if w not in STOPWORDS}
        held = [set(_WORD_RE.findall(text.lower())) for text in texts]
        weights = {
            word: math.log(1 + len(held) / (1 + sum(word in words for words in held)))
            for word in wanted
        }
        total = sum(weights.values()) or 1.0
        return [sum(weights[word] for word in wanted & words) / total for words in held]

    def _scores(self, question: str, texts: list[str]) -> list[float]:
        words = self._word_scores(question, texts)
        if self.embeddings is None:
            return words
        vectors = np.array(self.embeddings.embed_documents([question, *texts]))
        similarity = vectors[1:] @ vectors[0]
        return [float(s) + self.word_weight * w for s, w in zip(similarity, words, strict=True)]

    def reply(self, messages: list[BaseMessage]) -> str:
        question, blocks, history = read_answer_prompt(messages)
        # A follow-up ("what does it do?") is scored as its standalone form.
        question = rule_expansion(question, history).question
        paragraphs = [split_paragraphs(block.text) for block in blocks]
        sentences = [[s for paragraph in found for s in paragraph] for found in paragraphs]
        units = [unit for index, found in enumerate(paragraphs) for unit in _units(index, found)]
        if not units:
            return NOTHING_RELEVANT
        scores = [
            score - self.rank_nudge * unit.block
            for score, unit in zip(
                self._scores(question, [u.text for u in units]), units, strict=True
            )
        ]
        ranked = sorted(zip(scores, units, strict=True), key=lambda item: -item[0])
        floor = max(self.min_similarity, ranked[0][0] - self.relative_window)
        chosen: dict[int, set[int]] = {}  # block -> positions of its quoted sentences
        best: dict[int, float] = {}  # block -> its best unit's score, to order the blocks
        quoted: set[str] = set()
        for score, unit in ranked:
            if score < floor or sum(len(p) for p in chosen.values()) >= self.max_sentences:
                break
            mine = chosen.get(unit.block, set())
            new = [p for p in unit.positions if p not in mine]
            # A source's overlapping chunks can hold the same sentence twice: quote it once.
            keys = {_key(sentences[unit.block][p]) for p in new}
            # A source gives at most max_per_block units, one more sentence if an antecedent
            # comes along.
            full = len(mine) >= self.max_per_block or len(mine) + len(new) > self.max_per_block + 1
            if not new or keys & quoted or full:
                continue
            chosen.setdefault(unit.block, set()).update(new)
            best.setdefault(unit.block, score)
            quoted |= keys
        if not chosen:
            return NOTHING_RELEVANT
        # Told source by source, the one with the best unit first, each source's sentences
        # in their own order so that a sentence follows the one it leans on.
        parts = [
            _with_marker(sentences[block][position], blocks[block].n)
            for block in sorted(chosen, key=lambda b: -best[b])
            for position in sorted(chosen[block])
        ]
        return " ".join(parts)
