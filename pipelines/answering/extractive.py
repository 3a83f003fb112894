"""The ``extractive`` answer model: no generative model, just the best retrieved sentences.

It reads the answer prompt back (:func:`pipelines.answering.prompts.read_answer_prompt`),
takes every source and context block's sentences and quotable units from the sentence bank
(:mod:`pipelines.index.passages`: split and embedded at ingest, literature citations
removed whole, fragments never quoted), and scores each unit against the question: the
embedding similarity plus the share of the question's rarer words it contains. A sentence
that leans on the one before it ("This ...", "However, ...") is quoted only together with
that sentence. The best units are told source by source, the source holding the best unit
first, each source's sentences in their own order, none twice; each sentence is followed by
its source's ``[n]`` (context sentences get no marker). It is a real LangChain chat model: it
streams word by word through the normal callbacks, so the rest of the pipeline cannot tell it
from a generative one.

Nothing is split or embedded after retrieval when the bank finds the passages stored and the
question is the one the retriever embedded (the retriever embeds through the bank's
:class:`~pipelines.index.passages.RecentVectors`, which keeps its vectors): the answer is
a few dot products.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.messages import BaseMessage
from pydantic import ConfigDict, PrivateAttr

from pipelines.answering.prompts import prompt_language, read_answer_prompt
from pipelines.catalog.catalog import Catalog, catalog_for
from pipelines.core.composed_chat import ComposedChatModel
from pipelines.index.passages import PassageSentences, SentenceBank
from pipelines.index.sentences import split_sentences
from pipelines.language import DEFAULT_LANGUAGE, fixed_text
from pipelines.retrieval.expander import STOPWORDS, rule_expansion

__all__ = ["NOTHING_RELEVANT", "ExtractiveChatModel", "split_sentences"]

NOTHING_RELEVANT = fixed_text("nothing_relevant", DEFAULT_LANGUAGE)

_WORD_RE = re.compile(r"[a-z0-9]+")


@functools.cache
def _any_catalog() -> Catalog:
    return catalog_for()


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
    """A sentence worth quoting, with the sentences before it that it leans on
    (``pipelines.index.sentences.quotable_units``): positions in its block's sentences."""

    block: int
    positions: tuple[int, ...]
    text: str
    row: int  # its vector: the row of its block's unit_vectors


def _units(block: int, passage: PassageSentences) -> list[_Unit]:
    return [
        _Unit(block, unit, passage.unit_text(unit), row) for row, unit in enumerate(passage.units)
    ]


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

    bank: SentenceBank | None = None
    # The bank used without one given: over ``embeddings``, made on first use.
    _own_bank: SentenceBank | None = PrivateAttr(default=None)

    @property
    def _llm_type(self) -> str:
        return "reactome-answers-extractive"

    def sentence_bank(self) -> SentenceBank:
        """Where the blocks' sentences come from: the bank given (the pipeline's, shared with
        the evidence judge), or one of this model's own over ``embeddings``."""
        if self.bank is not None:
            return self.bank
        if self._own_bank is None:
            self._own_bank = SentenceBank(self.embeddings)
        return self._own_bank

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

    def _scores(
        self,
        bank: SentenceBank,
        question: str,
        units: Sequence[_Unit],
        passages: Sequence[PassageSentences],
    ) -> list[float]:
        words = self._word_scores(question, [unit.text for unit in units])
        vector = bank.question_vector(question)
        if vector is None or not vector.size:
            return words
        similarity: dict[int, Any] = {}  # block -> its units' similarity to the question
        for block in dict.fromkeys(unit.block for unit in units):
            similarity[block] = passages[block].unit_vectors @ vector
        return [
            float(similarity[unit.block][unit.row]) + self.word_weight * w
            for unit, w in zip(units, words, strict=True)
        ]

    def reply(self, messages: list[BaseMessage]) -> str:
        """The quoted sentences; for a question asked in another language, opened by one
        sentence in that language saying the sources are quoted in English (the sentences
        cannot be translated here, and an English answer to a Spanish question must not
        pass for a failure)."""
        language = prompt_language(messages)
        quoted = self._quote(messages)
        if quoted is None:
            return fixed_text("nothing_relevant", language)
        opening = fixed_text("quoted_in_english", language)
        return f"{opening} {quoted}" if opening else quoted

    def _quote(self, messages: list[BaseMessage]) -> str | None:
        """The best sentences with their markers, or None when none is relevant."""
        question, blocks, history = read_answer_prompt(messages)
        # A follow-up ("what does it do?") is scored as its standalone form (the catalog
        # only routes, which this does not use: any will do, and loading one takes a ms).
        question = rule_expansion(question, history, catalog=_any_catalog()).question
        bank = self.sentence_bank()
        passages = bank.many([block.text for block in blocks])
        sentences = [passage.texts for passage in passages]
        units = [unit for index, found in enumerate(passages) for unit in _units(index, found)]
        if not units:
            return None
        scores = [
            score - self.rank_nudge * unit.block
            for score, unit in zip(
                self._scores(bank, question, units, passages), units, strict=True
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
            return None
        # Told source by source, the one with the best unit first, each source's sentences
        # in their own order so that a sentence follows the one it leans on.
        parts = [
            _with_marker(sentences[block][position], blocks[block].n)
            for block in sorted(chosen, key=lambda b: -best[b])
            for position in sorted(chosen[block])
        ]
        return " ".join(parts)
