"""The ``extractive`` answer model: no generative model, just the best retrieved sentences.

It reads the answer prompt back (:func:`pipelines.prompts.read_answer_prompt`), scores every
sentence of every source and context block against the question with the embedding model,
and answers with the most relevant few, in source order, each followed by its source's
``[n]`` (context sentences get no marker). It is a real LangChain chat model: it streams word
by word through the normal callbacks, so the rest of the pipeline cannot tell it from a
generative one.
"""

from __future__ import annotations

import re

import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_core.messages import BaseMessage
from pydantic import ConfigDict

from pipelines._chat import ComposedChatModel
from pipelines.expander import rule_expansion
from pipelines.prompts import read_answer_prompt

__all__ = ["NOTHING_RELEVANT", "ExtractiveChatModel", "split_sentences"]

NOTHING_RELEVANT = "The retrieved material does not answer this question."

_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\"'])")
_WORD_RE = re.compile(r"[a-z0-9]+")
_BULLET_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+", re.MULTILINE)


def split_sentences(text: str) -> list[str]:
    """Sentences of prose; list items count as sentences, their bullets removed."""
    sentences: list[str] = []
    for paragraph in re.split(r"\n\s*\n|\n(?=\s*(?:[-*+]|\d+[.)])\s)", text):
        flat = " ".join(_BULLET_RE.sub("", paragraph).split())
        sentences.extend(s.strip() for s in _SENTENCE_END_RE.split(flat) if s.strip())
    return sentences


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


class ExtractiveChatModel(ComposedChatModel):
    """Answers with the retrieved sentences most similar to the question, each cited."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model_name: str = "extractive"
    embeddings: Embeddings | None = None
    max_sentences: int = 4
    max_per_block: int = 2
    min_similarity: float = 0.3
    # Only sentences nearly as relevant as the best one: an answer, not a list of neighbours.
    relative_window: float = 0.15
    # Blocks come in retrieval order, best first: each later block's sentences lose this much,
    # so ties go to the sources the retriever trusted most.
    rank_nudge: float = 0.02

    @property
    def _llm_type(self) -> str:
        return "reactome-answers-extractive"

    def _scores(self, question: str, sentences: list[str]) -> list[float]:
        if self.embeddings is not None:
            vectors = np.array(self.embeddings.embed_documents([question, *sentences]))
            return [float(score) for score in vectors[1:] @ vectors[0]]
        # Without embeddings: the share of the question's words each sentence contains.
        wanted = set(_WORD_RE.findall(question.lower()))
        return [
            len(wanted & set(_WORD_RE.findall(s.lower()))) / max(len(wanted), 1) for s in sentences
        ]

    def reply(self, messages: list[BaseMessage]) -> str:
        question, blocks, history = read_answer_prompt(messages)
        # A follow-up ("what does it do?") is scored as its standalone form.
        question = rule_expansion(question, history).question
        candidates = [
            (index, position, sentence)
            for index, block in enumerate(blocks)
            for position, sentence in enumerate(split_sentences(block.text))
            if _answerlike(sentence)
        ]
        if not candidates:
            return NOTHING_RELEVANT
        similarity = self._scores(question, [sentence for _, _, sentence in candidates])
        scores = [
            s - self.rank_nudge * index
            for s, (index, _, _) in zip(similarity, candidates, strict=True)
        ]
        ranked = sorted(zip(scores, candidates, strict=True), key=lambda item: -item[0])
        chosen: list[tuple[int, int, str]] = []
        quoted: set[str] = set()
        per_block: dict[int, int] = {}
        floor = max(self.min_similarity, ranked[0][0] - self.relative_window)
        for score, (index, position, sentence) in ranked:
            if score < floor or len(chosen) >= self.max_sentences:
                break
            # A source's overlapping chunks can hold the same sentence twice; quote it once.
            if per_block.get(index, 0) >= self.max_per_block or sentence in quoted:
                continue
            per_block[index] = per_block.get(index, 0) + 1
            quoted.add(sentence)
            chosen.append((index, position, _with_marker(sentence, blocks[index].n)))
        # Chosen by similarity, told in the retriever's order (its best-ranked source first)
        # and each source's sentences in their own order, so the answer reads as prose.
        return " ".join(text for _, _, text in sorted(chosen)) if chosen else NOTHING_RELEVANT
