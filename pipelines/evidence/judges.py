"""Judges of evidence: does the cited passage support the sentence, and which part of it?

- :class:`OfflineJudge` (the default) needs nothing the pipeline does not load already: the
  embedding model and the words of the retrieved passages. For each claim it scores every
  sentence of the cited passage by embedding similarity to the answer sentence plus the
  share of the answer sentence's rarer words (rarer among this answer's passages) the
  passage sentence holds; the best is the quote, and the claim is supported when its score
  reaches ``threshold``. Names of genes, proteins and diseases are the rare words, so a
  sentence taken from one source and cited with another on the same topic loses on them;
  and a sentence naming a symbol (UGT1A4, K650E, EPA) the cited passage never names is
  held unsupported however close the rest of it is. A sentence in another language than
  English (a generative model answering in the asker's language) shares no words with the
  English passage and its embedding is English-only: it is judged on its symbols alone, and
  one that names none is not flagged (docs/decisions/0036).
- :class:`ModelJudge` asks an OpenAI-compatible chat model whether the passage supports the
  sentence; the quote and score still come from the offline judge, so the two agree on
  what is shown. A model that fails or answers neither yes nor no leaves the offline
  verdict in place: a judge's trouble never fails an answer.
"""

from __future__ import annotations

import asyncio
import math
import re
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, Protocol

import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import SecretStr

from pipelines.answering.providers import openai_http_client
from pipelines.core.openai_key import KEYLESS, openai_api_key
from pipelines.core.settings import Settings
from pipelines.evidence.claims import Claim, Verdict
from pipelines.index.chunk_sentences import query_vectors
from pipelines.index.passages import PassageSentences, SentenceBank, embed
from pipelines.index.sentences import clean_sentence
from pipelines.language import DEFAULT_LANGUAGE, detect_language
from pipelines.retrieval.expander import STOPWORDS

__all__ = ["EvidenceJudge", "ModelJudge", "OfflineJudge", "judge_key", "make_judge"]

_TOKEN_RE = re.compile(r"[A-Za-z0-9]+")
# Words run together (ReplacedResidue) are not symbols.
_CAMEL_RE = re.compile(r"(?:[A-Z][a-z]+){2,}")
# A claim naming a symbol its passage never names scores at most this.
_MISSING_NAME_FACTOR = 0.5
# The multilingual model's cosine at which a sentence in another language is supported by
# the passage sentence nearest it. Chosen on the development half of the translated pairs
# (tests/benchmarks/evidence_pairs_translated.yaml, decision 0037): from 0.86 to 0.87 the
# share of true citations flagged is lowest (0.095) with most mis-citations caught; the lower
# end, since a new answer's sentences are no closer to their passage than these.
MULTILINGUAL_THRESHOLD = 0.86
# Passage sentences whose multilingual vectors a judge keeps (a few answers' passages).
_MULTILINGUAL_MEMO = 4096


def judge_key(claim: Claim) -> tuple[str, int]:
    """How verdicts are looked up: the claim's sentence and the cited source's number."""
    return (claim.sentence, claim.source_n)


class EvidenceJudge(Protocol):
    """Finds each claim's quote and verdict."""

    async def judge(self, claims: Sequence[Claim]) -> dict[tuple[str, int], Verdict]: ...


def _is_name(token: str) -> bool:
    """A gene, protein, variant or compound symbol as the text writes it: letters with digits
    (UGT1A4, K650E, CO2), two capitals or more (EPA, HbA, but not words run together such as
    ReplacedResidue), or a number of two digits or more (a residue's position, an OMIM id)."""
    digits = sum(c.isdigit() for c in token)
    if digits:
        return digits < len(token) or len(token) >= 2
    return sum(c.isupper() for c in token) >= 2 and not _CAMEL_RE.fullmatch(token)


def _normal(token: str) -> str:
    """One form for a word's cases and its singular and plural ("Receptors" and "receptor",
    "AChRs" and "AChR")."""
    if len(token) > 2 and token.endswith("s") and token[-2].isupper():
        return token[:-1].lower()  # a symbol's plural: GPCRs, RvEs
    word = token.lower()
    if len(word) > 3 and word.isalpha():
        if word.endswith("ies"):
            return word[:-3] + "y"
        if word.endswith("s") and not word.endswith(("ss", "us", "is")):
            return word[:-1]
    return word


@lru_cache(maxsize=16384)
def _terms(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """``text``'s content words (:func:`_normal` forms, no stopwords), and those of them
    written as names (:func:`_is_name`) somewhere in it."""
    words: set[str] = set()
    names: set[str] = set()
    for token in _TOKEN_RE.findall(text):
        if len(token) < 2 or token.lower() in STOPWORDS:
            continue
        word = _normal(token)
        words.add(word)
        if _is_name(token):
            names.add(word)
    return frozenset(words), frozenset(names)


class OfflineJudge:
    """Embedding similarity plus rare-word coverage, names checked; see the module docstring.

    A claim's score against each sentence of the cited passage is ``(1 - word_weight) *
    similarity + word_weight * share``: the cosine of the two sentences' embeddings (clipped
    at 0) and the share of the claim's content words the passage sentence holds, each word
    weighted by its rarity among the sentences of the answer's passages. The best sentence is
    the quote. A claim that names a symbol (a gene, a variant, a compound: :func:`_is_name`)
    the cited passage never names has its score halved, which puts it below any threshold
    above 0.5: that is how a sentence about UGT1A4 is told from its copy about UGT1A1. The
    claim is supported when its score reaches ``threshold``."""

    def __init__(
        self,
        bank: SentenceBank,
        *,
        threshold: float = 0.58,
        word_weight: float = 0.5,
        multilingual: Callable[[], Embeddings | None] | None = None,
        multilingual_threshold: float = MULTILINGUAL_THRESHOLD,
    ) -> None:
        """``multilingual``: gives the multilingual model that compares a sentence in
        another language with its English passage (loaded on first use), or None: such a
        sentence is then judged by its symbols with digits alone."""
        self.bank = bank
        self.threshold = threshold
        self.word_weight = word_weight
        self.multilingual = multilingual
        self.multilingual_threshold = multilingual_threshold
        self._memo: dict[str, Any] = {}
        self._memo_lock = threading.Lock()

    async def judge(self, claims: Sequence[Claim]) -> dict[tuple[str, int], Verdict]:
        # Off the event loop: a sentence not copied from a passage is embedded (a few ms).
        return await asyncio.to_thread(self.verdicts, claims)

    def _vectors(
        self, sentences: Sequence[str], found: Sequence[PassageSentences]
    ) -> dict[str, Any]:
        """The claims' vectors: a sentence copied from a passage (an extractive answer's
        are) has its vector there already; only the others are embedded."""
        known = {
            text: passage.vectors[row]
            for passage in found
            if passage.vectors.size
            for row, text in enumerate(passage.texts)
        }
        vectors = {sentence: known[sentence] for sentence in sentences if sentence in known}
        missing = [sentence for sentence in sentences if sentence not in vectors]
        if missing and self.bank.embeddings is not None:
            vectors.update(zip(missing, embed(self.bank.embeddings, missing), strict=True))
        return vectors

    def verdicts(self, claims: Sequence[Claim]) -> dict[tuple[str, int], Verdict]:
        if not claims:
            return {}
        passages = list(dict.fromkeys(claim.passage for claim in claims))
        found = dict(zip(passages, self.bank.many(passages), strict=True))
        # Scored as the passages' sentences are: literature citations removed.
        cleaned = {claim.sentence: clean_sentence(claim.sentence) for claim in claims}
        vectors = self._vectors(list(dict.fromkeys(cleaned.values())), list(found.values()))
        # Rarity among the sentences of this answer's passages: what sets one entity's
        # sentence apart from its neighbours on the same topic.
        held = {text: [_terms(sentence)[0] for sentence in found[text].texts] for text in found}
        named = {text: frozenset[str]().union(*sentences) for text, sentences in held.items()}
        frequency: Counter[str] = Counter()
        for sentences in held.values():
            for sentence_words in sentences:
                frequency.update(sentence_words)
        total = sum(len(sentences) for sentences in held.values())
        verdicts = {}
        for claim in claims:
            passage = found[claim.passage]
            if not passage.spans:
                verdicts[judge_key(claim)] = Verdict((0, len(claim.passage)), 0.0, False)
                continue
            sentence = cleaned[claim.sentence]
            words, names = _terms(sentence)
            if detect_language(sentence) != DEFAULT_LANGUAGE:
                verdicts[judge_key(claim)] = self._across_languages(
                    sentence, _with_digits(names), passage
                )
                continue
            weights = {w: math.log(1 + (total + 1) / (1 + frequency[w])) for w in words}
            weight_sum = sum(weights.values()) or 1.0
            scores = np.array(
                [
                    sum(weights[w] for w in words & held_words) / weight_sum
                    for held_words in held[claim.passage]
                ]
            )
            vector = vectors.get(sentence)
            if vector is not None and passage.vectors.size:
                similarity = np.clip(passage.vectors @ vector, 0.0, 1.0)
                scores = (1 - self.word_weight) * similarity + self.word_weight * scores
            best = int(np.argmax(scores))
            score = float(scores[best])
            if names - named[claim.passage]:
                score *= _MISSING_NAME_FACTOR
            score = round(score, 4)
            verdicts[judge_key(claim)] = Verdict(
                passage.spans[best], score, score >= self.threshold
            )
        return verdicts

    def _across_languages(
        self, sentence: str, names: frozenset[str], passage: PassageSentences
    ) -> Verdict:
        """A sentence in another language than its English passage: through the multilingual
        model when there is one (the nearest passage sentence is the quote; supported when
        it is at least ``multilingual_threshold`` similar and the passage names every symbol
        with digits the sentence names), else by those symbols alone."""
        held = [_terms(text)[1] for text in passage.texts]
        model = self.multilingual() if self.multilingual is not None else None
        if model is None:
            return _across_languages(names, passage, held)
        vectors = self._multilingual_vectors(model, [sentence, *passage.texts])
        similarities = vectors[1:] @ vectors[0]
        best = int(np.argmax(similarities))
        score = float(similarities[best])
        named = names <= frozenset[str]().union(*held)
        if not named:
            score *= _MISSING_NAME_FACTOR
        return Verdict(
            passage.spans[best],
            round(score, 4),
            named and score >= self.multilingual_threshold,
        )

    def _multilingual_vectors(self, model: Embeddings, texts: Sequence[str]) -> Any:
        # Each text as a query: both sides are sentences of the same kind (e5's advice for a
        # symmetric comparison). Passage sentences recur across answers: kept a while.
        with self._memo_lock:
            known = {text: self._memo[text] for text in texts if text in self._memo}
        missing = list(dict.fromkeys(text for text in texts if text not in known))
        if missing:
            fresh = dict(zip(missing, query_vectors(model, missing), strict=True))
            known.update(fresh)
            with self._memo_lock:
                if len(self._memo) + len(fresh) > _MULTILINGUAL_MEMO:
                    self._memo.clear()
                self._memo.update(fresh)
        return np.stack([known[text] for text in texts])


def _with_digits(names: frozenset[str]) -> frozenset[str]:
    # Symbols of letters alone are often translated (ARNm for mRNA, VIH for HIV, ADN for
    # DNA); gene symbols, variants and numbers, which carry digits, are written alike.
    return frozenset(name for name in names if any(c.isdigit() for c in name))


def _across_languages(
    names: frozenset[str], passage: PassageSentences, held: Sequence[frozenset[str]]
) -> Verdict:
    """The verdict on a sentence in another language than its English passage: its symbols
    with digits (genes, variants, numbers) are the words the two languages share. The quote is
    the passage sentence holding most of them; the claim is supported when the passage names
    every one, and, naming none, it is not flagged: nothing here can tell its words apart."""
    if not names:
        return Verdict(passage.spans[0], 1.0, True)
    found = [len(names & sentence) for sentence in held]
    best = int(np.argmax(found))
    everywhere = frozenset[str]().union(*held)
    score = round(len(names & everywhere) / len(names), 4)
    return Verdict(passage.spans[best], score, names <= everywhere)


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


def make_judge(
    settings: Settings,
    bank: SentenceBank,
    multilingual: Callable[[], Embeddings | None] | None = None,
) -> EvidenceJudge:
    """The evidence judge ``evidence_judge`` names: ``offline``, or ``openai:MODEL`` (at
    ``OPENAI_BASE_URL``, as for ``--llm openai:MODEL``) over the offline judge's quotes.
    ``multilingual`` gives the model the offline judge compares a sentence in another
    language with its passage through (decision 0037)."""
    offline = OfflineJudge(bank, threshold=settings.evidence_threshold, multilingual=multilingual)
    if settings.evidence_judge == "offline":
        return offline
    key = openai_api_key(
        f"--evidence-judge {settings.evidence_judge}", "use REACTOME_ANSWERS_EVIDENCE_JUDGE=offline"
    )
    from langchain_openai import ChatOpenAI

    grader = ChatOpenAI(
        model=settings.evidence_judge.removeprefix("openai:"),
        temperature=0,
        max_tokens=3,
        timeout=settings.model_timeout_s,
        max_retries=1,
        api_key=SecretStr(key or KEYLESS),
        http_async_client=openai_http_client(settings),
    )
    return ModelJudge(grader, offline)
