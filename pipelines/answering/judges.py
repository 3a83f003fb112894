"""Judges of evidence: does the cited passage support the sentence, and which part of it?

- :class:`OfflineJudge` (the default) needs nothing the pipeline does not load already: the
  embedding model and the words of the retrieved passages. For each claim it scores every
  sentence of the cited passage by embedding similarity to the answer sentence plus the
  share of the answer sentence's rarer words (rarer among this answer's passages) the
  passage sentence holds; the best is the quote, and the claim is supported when its score
  reaches ``threshold``. Names of genes, proteins and diseases are the rare words, so a
  sentence taken from one source and cited with another on the same topic loses on them.
- :class:`ModelJudge` asks an OpenAI-compatible chat model whether the passage supports the
  sentence; the quote and score still come from the offline judge, so the two agree on
  what is shown. A model that fails or answers neither yes nor no leaves the offline
  verdict in place: a judge's trouble never fails an answer.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Sequence
from typing import Protocol

import numpy as np
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage

from pipelines.answering.evidence import Claim, Verdict
from pipelines.answering.passages import SentenceBank, embed
from pipelines.retrieval.expander import STOPWORDS

__all__ = ["EvidenceJudge", "ModelJudge", "OfflineJudge", "judge_key"]

_WORD_RE = re.compile(r"[a-z0-9]+")


def judge_key(claim: Claim) -> tuple[str, int]:
    """How verdicts are looked up: the claim's sentence and the cited source's number."""
    return (claim.sentence, claim.source_n)


class EvidenceJudge(Protocol):
    """Finds each claim's quote and verdict."""

    async def judge(self, claims: Sequence[Claim]) -> dict[tuple[str, int], Verdict]: ...


def _words(text: str) -> set[str]:
    return {w for w in _WORD_RE.findall(text.lower()) if w not in STOPWORDS and len(w) > 1}


class OfflineJudge:
    """Embedding similarity plus rare-word coverage; see the module docstring."""

    def __init__(
        self, bank: SentenceBank, *, threshold: float = 0.6, word_weight: float = 0.5
    ) -> None:
        self.bank = bank
        self.threshold = threshold
        # score = (1 - word_weight) * similarity + word_weight * rare-word share, in [0, 1]
        # for unit vectors that point the same way.
        self.word_weight = word_weight

    async def judge(self, claims: Sequence[Claim]) -> dict[tuple[str, int], Verdict]:
        # Off the event loop: the answer sentences are embedded (a few ms each).
        return await asyncio.to_thread(self.verdicts, claims)

    def verdicts(self, claims: Sequence[Claim]) -> dict[tuple[str, int], Verdict]:
        if not claims:
            return {}
        passages = list(dict.fromkeys(claim.passage for claim in claims))
        found = dict(zip(passages, self.bank.many(passages), strict=True))
        sentences = list(dict.fromkeys(claim.sentence for claim in claims))
        vectors = (
            dict(zip(sentences, embed(self.bank.embeddings, sentences), strict=True))
            if self.bank.embeddings is not None
            else {}
        )
        # Rarity among the sentences of this answer's passages: what sets one entity's
        # sentence apart from its neighbours on the same topic.
        held = [_words(text) for passage in found.values() for text in passage.texts]
        frequency: dict[str, int] = {}
        for words in held:
            for word in words:
                frequency[word] = frequency.get(word, 0) + 1
        total = len(held)
        verdicts = {}
        for claim in claims:
            passage = found[claim.passage]
            if not passage.spans:
                verdicts[judge_key(claim)] = Verdict((0, len(claim.passage)), 0.0, False)
                continue
            wanted = _words(claim.sentence)
            weights = {w: math.log(1 + (total + 1) / (1 + frequency.get(w, 0))) for w in wanted}
            weight_sum = sum(weights.values()) or 1.0
            shares = np.array(
                [
                    sum(weights[w] for w in wanted & _words(text)) / weight_sum
                    for text in passage.texts
                ]
            )
            vector = vectors.get(claim.sentence)
            if vector is None or not passage.vectors.size:
                scores = shares
            else:
                similarity = np.clip(passage.vectors @ vector, 0.0, 1.0)
                scores = (1 - self.word_weight) * similarity + self.word_weight * shares
            best = int(np.argmax(scores))
            score = round(float(scores[best]), 4)
            verdicts[judge_key(claim)] = Verdict(
                passage.spans[best], score, score >= self.threshold
            )
        return verdicts


_GRADER = (
    "You check citations. You are given a sentence and a passage. Reply with one word: "
    "yes if the passage states what the sentence says, no otherwise."
)
# The passage as the model sees it: long enough for a source's summary, bounded for cost.
_MAX_PASSAGE_CHARS = 6000


class ModelJudge:
    """An OpenAI-compatible model's yes or no, over the offline judge's quotes and scores."""

    def __init__(self, model: BaseChatModel, offline: OfflineJudge, concurrency: int = 4) -> None:
        self.model = model
        self.offline = offline
        self.concurrency = concurrency

    async def _ask(self, claim: Claim, limit: asyncio.Semaphore) -> bool | None:
        messages = [
            SystemMessage(content=_GRADER),
            HumanMessage(
                content=f"Sentence: {claim.sentence}\n\nPassage: "
                f"{claim.passage[:_MAX_PASSAGE_CHARS]}\n\nDoes the passage support the "
                "sentence? Answer yes or no."
            ),
        ]
        async with limit:
            try:
                reply = await self.model.ainvoke(messages)
            except Exception:
                return None
        said = str(reply.content).strip().lower()
        if said.startswith("yes"):
            return True
        if said.startswith("no"):
            return False
        return None

    async def judge(self, claims: Sequence[Claim]) -> dict[tuple[str, int], Verdict]:
        verdicts = await self.offline.judge(claims)
        limit = asyncio.Semaphore(self.concurrency)
        answers = await asyncio.gather(*(self._ask(claim, limit) for claim in claims))
        for claim, answer in zip(claims, answers, strict=True):
            if answer is not None:
                key = judge_key(claim)
                found = verdicts[key]
                verdicts[key] = Verdict(found.quote_span, found.score, answer)
        return verdicts
