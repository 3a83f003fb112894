"""Questions refused before any search or model call, each with a message saying why.

Empty and overlong questions; text that is not text (control characters, as from a binary
file pasted or piped in); and requests for advice about one's own treatment, which a pathway
database cannot give safely however relevant its pathways look.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipelines.core.redaction import redact_secrets
from pipelines.language import DEFAULT_LANGUAGE, fixed_text

if TYPE_CHECKING:
    from pipelines.retrieval.advice import AdviceVerdict

__all__ = ["ADVICE_REFUSAL", "Refusal", "advice_refusal", "question_too_long", "rule_refusal"]

# The English texts; every language's are in pipelines/language/texts.
_EMPTY = fixed_text("empty_question", DEFAULT_LANGUAGE)
_NOT_TEXT = fixed_text("not_text", DEFAULT_LANGUAGE)
ADVICE_REFUSAL = fixed_text("advice_refusal", DEFAULT_LANGUAGE)
_WHITESPACE = "\t\n\r"
# A decision about one's own care: first person deciding to take, stop or change something
# medical ("Should I stop taking my statins?", "Can I take ibuprofen with...?"), asking how
# much to take, or whether something is safe for them. The medical word must be what the
# decision is about: "Can I start the drug-target overlay?" is a website question.
_CARE = (
    r"(?:doses?|dosages?|mg|medications?|medicines?|meds|pills?|prescri\w*|treatments?|"
    r"chemo\w*|surgery|statins?|aspirin|ibuprofen|paracetamol|acetaminophen|insulin|"
    r"metformin|warfarin|antibiotics?|antidepressants?|steroids?|opioids?)"
)
_DECISION_RE = re.compile(
    r"\b(?:should|can|could|may|must)\s+I\s+(?:\w+\s+)?"
    r"(?:take|stop|start|quit|skip|double|halve|increase|decrease|reduce|lower|raise|switch|"
    r"combine|mix|keep|go\s+off|come\s+off)\s+(?:[\w'-]+\s+){0,3}?" + _CARE + r"\b",
    re.IGNORECASE,
)
# Two words that must meet in one sentence, the second after the first: "how much ... should
# I take", "is it safe for me ... statins". Read as two searches per sentence, not as one
# pattern with [^.?!]* between them, which retried the rest of the sentence from every
# "how much" (quadratic in a question that repeats it).
_SAME_SENTENCE = (
    (
        re.compile(r"\b(?:how\s+(?:much|many)|what\s+(?:dose|dosage))\b", re.IGNORECASE),
        re.compile(r"\bshould\s+I\s+(?:take|use)\b", re.IGNORECASE),
    ),
    (
        re.compile(r"\bis\s+it\s+safe\s+for\s+me\b", re.IGNORECASE),
        re.compile(r"\b" + _CARE + r"\b", re.IGNORECASE),
    ),
    # The first pair in each other language an answer may be asked in: how much, then a
    # dose I am to take ("give" stays out, as in English: "dar clic", "donner en entrée").
    (
        re.compile(r"\b(?:cuánt[oa]s?|qué\s+dosis|quant[oa]s?|que\s+dose|combien|quelle\s+dose"
                   r"|wie\s*viele?|welche\s+dosis|quant[ie]|che\s+dose)\b", re.IGNORECASE),
        re.compile(r"\b(?:debo|debería|tengo\s+que|devo|deveria|tenho\s+que|dois-je|je\s+dois"
                   r"|devrais-je|je\s+devrais|soll(?:te)?\s+ich|muss\s+ich|dovrei)\s+"
                   r"(?:\w+\s+){0,3}?(?:tomar|usar|prendre|utiliser|nehmen|einnehmen|prendere"
                   r"|usare)\b", re.IGNORECASE),
    ),
    (
        re.compile(r"我(?:应该|应当|该|要)(?:每天|每日|一天)?(?:吃|服用|服|用)"),
        re.compile(r"多少|几片|几粒|剂量"),
    ),
    (
        re.compile(r"何ミリ|何mg|何錠|どのくらい|どれくらい|どれだけ", re.IGNORECASE),
        re.compile(r"飲めば|飲むべき|飲んだら|服用すれば|服用すべき|飲んでも"),
    ),
)  # fmt: skip
_SENTENCE_END = re.compile("[.?!\u3002\uff1f\uff01]")  # and the full-width ones of CJK text


def _in_one_sentence(first: re.Pattern[str], then: re.Pattern[str], text: str) -> range | None:
    """Where the first match of ``first`` that ``then`` follows before its sentence ends
    starts, to the end of the last such match of ``then``; None when there is none. Each
    sentence is read once: when its first ``first`` has no ``then`` after it, no later one in
    that sentence can."""
    position = 0
    while (opener := first.search(text, position)) is not None:
        ending = _SENTENCE_END.search(text, opener.end())
        end = ending.start() if ending is not None else len(text)
        closers = list(then.finditer(text, opener.end(), end))
        if closers:
            return range(opener.start(), closers[-1].end())
        position = end
    return None


def _decision(question: str) -> str | None:
    """The words that make ``question`` a decision about one's own care (the leftmost such
    words, the first rule's on a tie, as one alternation would find them), or None."""
    spans = []
    direct = _DECISION_RE.search(question)
    if direct is not None:
        spans.append(range(*direct.span()))
    for first, then in _SAME_SENTENCE:
        span = _in_one_sentence(first, then, question)
        if span is not None:
            spans.append(span)
    if not spans:
        return None
    leftmost = min(spans, key=lambda span: span.start)
    return question[leftmost.start : leftmost.stop]


def _has_control_characters(question: str) -> bool:
    return any(
        unicodedata.category(character) in ("Cc", "Cs", "Co") and character not in _WHITESPACE
        for character in question
    )


@dataclass(frozen=True)
class Refusal:
    """A refused question: the message the user reads, and why, for the event log.

    ``reason`` is ``"rule"`` (this module), ``"similar_examples"`` (the embedding gate,
    :mod:`pipelines.retrieval.advice`) or ``"expander"`` (a generative expander said personal
    advice)."""

    text: str
    reason: str
    detail: dict[str, Any] = field(default_factory=dict)
    key: str = "advice_refusal"  # its text in pipelines/language/texts
    fields: dict[str, int] = field(default_factory=dict)

    def log_data(self) -> dict[str, Any]:
        return {"reason": self.reason, "detail": self.detail}

    def text_in(self, language: str) -> str:
        """The message in ``language`` (English where it has no translation)."""
        if language == DEFAULT_LANGUAGE:
            return self.text
        return fixed_text(self.key, language, **_written(self.fields, language))


def _written(numbers: dict[str, int], language: str) -> dict[str, str]:
    # Thousands as the language groups them: "1,234" in English, "1.234" in German.
    separator = {"de": ".", "es": ".", "it": ".", "pt": ".", "fr": "\N{NARROW NO-BREAK SPACE}"}.get(
        language, ","
    )
    return {name: f"{value:,}".replace(",", separator) for name, value in numbers.items()}


def question_too_long(question: str, max_chars: int) -> str | None:
    """Why ``question`` is refused for its length, or None. The one wording: the pipeline
    refuses with it, and the HTTP routes, which turn a long question away before it reaches
    the pipeline, answer their error with it."""
    if len(question) <= max_chars:
        return None
    return fixed_text(
        "too_long", DEFAULT_LANGUAGE, chars=f"{len(question):,}", max_chars=f"{max_chars:,}"
    )


def rule_refusal(question: str, max_chars: int) -> Refusal | None:
    """Why ``question`` is refused by a rule (its text, and the rule for the event log), or
    None when the rules let it through."""
    if not question.strip():
        return Refusal(_EMPTY, "rule", {"rule": "empty"}, key="empty_question")
    too_long = question_too_long(question, max_chars)
    if too_long is not None:
        sizes = {"chars": len(question), "max_chars": max_chars}
        return Refusal(
            too_long, "rule", {"rule": "too_long", "chars": len(question)}, "too_long", sizes
        )
    if _has_control_characters(question):
        return Refusal(_NOT_TEXT, "rule", {"rule": "control_characters"}, key="not_text")
    matched = _decision(question)
    if matched is not None:
        return Refusal(
            ADVICE_REFUSAL, "rule", {"rule": "personal_care", "matched": redact_secrets(matched)}
        )
    return None


def advice_refusal(verdict: AdviceVerdict) -> Refusal | None:
    """The refusal the advice gate's ``verdict`` makes; None when it lets the question by."""
    if not verdict.refused:
        return None
    return Refusal(ADVICE_REFUSAL, "similar_examples", verdict.detail())
