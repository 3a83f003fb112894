"""Every regular expression that reads request or history text works in time linear in it,
and so does every pass over a model's answer (the finalizer, live numbering, the model-sources
filter, the evidence step, and the handler from the first token to ``done``).

A pattern that backtracks (a repeated group whose parts overlap, ``.*`` followed by more
pattern, a search that rescans the rest of the text from every position) turns one crafted
request into seconds or days of work on the event loop. Each case here calls the real function
that runs the patterns, on text built to make such a pattern retry (long runs of a near miss,
thousands of items), at 1x and 8x the size, and compares the best of several CPU-time
measurements in this process: linear work grows about 8x, quadratic about 64x, exponential
never ends. No absolute time is asserted; a timer that ends a case still running after a
generous bound is only a safety net, so that a regression fails instead of hanging.

Audited and without a pattern that reads request text: ``app/http/routes/ai_sdk.py``,
``app/http/protocols/chat.py`` and ``app/links.py`` (string operations only). Patterns over files
(collection definitions, loaders, settings, identifiers, log names) read no request text.
"""

from __future__ import annotations

import functools
import gc
import itertools
import math
import signal
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from app.http.protocols.openai_sources import without_our_sources
from app.http.routes.openai_chat import ChatRequest
from app.links import sources_markdown
from callbacks.events import Reference, TokenData
from callbacks.handler import AnswerEventHandler
from pipelines.answering.extractive import ExtractiveChatModel
from pipelines.answering.prompts import answer_messages
from pipelines.citations.finalize import (
    cited_numbers,
    finalize_citations,
    strip_out_of_range_markers,
)
from pipelines.citations.live import LiveCitations
from pipelines.citations.model_sources import ModelSources, without_model_sources
from pipelines.citations.sources import Source
from pipelines.core.normalize import normalize_question
from pipelines.core.redaction import redact_secrets
from pipelines.core.tags import ANSWER_TAG, RETRIEVAL_TAG
from pipelines.evidence.claims import Verdict, claims_of, drop_unsupported, evidence_items
from pipelines.index.sentences import (
    is_fragment,
    points_back,
    split_paragraphs,
    strip_literature,
)
from pipelines.retrieval.advice import AdviceExample, AdviceGate
from pipelines.retrieval.expander import parse_expansion, rule_expansion
from pipelines.retrieval.refusal_rules import rule_refusal

GROWTH = 8
# 8x the input may cost at most 4x more than linear work would: quadratic work costs 64x.
LIMIT = 4 * GROWTH
RUNS = 5  # the best of these: other work on a loaded machine only ever adds time
MIN_CPU_S = 0.005  # the 1x measurement repeats the call until it takes at least this long
SAFETY_NET_S = 180.0
QUESTION = "What causes Tangier disease?"
_salt = itertools.count()


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[int, int], Any]  # (size, salt) -> the argument; the salt defeats caches
    call: Callable[[Any], object]
    size: int  # 1x


def _history(content: str) -> ChatRequest:
    return ChatRequest.model_validate(
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": content},
                {"role": "user", "content": QUESTION},
            ]
        }
    )


def _streamed(text: str) -> str:
    """The text through :class:`ModelSources` one character at a time, as a slow stream."""
    sources = ModelSources()
    return "".join(sources.feed(character) for character in text) + sources.close()


def _live(tokens: Sequence[str]) -> str:
    numbering = LiveCitations(["a", "b", "c"])
    return "".join(numbering.feed(token) for token in tokens) + numbering.close()


def _refusal(question: str) -> object:
    return rule_refusal(question, max_chars=10**9)


@functools.cache
def _gate() -> AdviceGate:
    return AdviceGate(
        DeterministicFakeEmbedding(size=8),
        examples=[
            AdviceExample("a1", "Should I stop taking my statins?", "advice", "stop"),
            AdviceExample("a2", "How much insulin should I inject?", "advice", "dose"),
            AdviceExample("n1", "How do statins lower cholesterol?", "answer", "mechanism"),
            AdviceExample("n2", "What does ABCA1 do?", "answer", "gene"),
        ],
    )


def _advice(question: str) -> object:
    return _gate().check(question, vector=[0.1] * 8)


def _extractive(parts: tuple[str, str, str]) -> str:
    question, source_text, earlier = parts
    source = Source(
        1, Document(source_text), "Defective ABCA1 causes TGD", "reactome", st_id="R-HSA-5682113"
    )
    messages = answer_messages(question, [source], [], [("user", earlier)])
    return ExtractiveChatModel().reply(messages)


_PROSE = "ABCA1 moves cholesterol out of cells onto apolipoprotein A-I (Kuo et al. 2010). "
_SOURCES = [
    Source(number, Document(f"Passage {number}: ABCA1 moves cholesterol out of cells.",
                            metadata={"st_id": f"R-HSA-{number}", "collection": "reactome",
                                      "display_name": f"Pathway {number}"}),
           f"Pathway {number}", "reactome", st_id=f"R-HSA-{number}")
    for number in (1, 2, 3)
]  # fmt: skip


def _cited_answer(n: int, salt: int) -> str:
    """n short cited sentences, as the attack's model wrote them ("|" between them, where a
    case splits it into tokens)."""
    return f"{salt}. " + "|".join(f"ABCA1 moves lipid {i}. [{i % 3 + 1}] " for i in range(n))


def _rulings(text: str, supported: bool) -> dict[tuple[str, int], Verdict]:
    verdict = Verdict((0, 9), 0.9 if supported else 0.1, supported)
    return {(claim.sentence, claim.source_n): verdict for claim in claims_of(text, _SOURCES)}


def _all_supported(text: str) -> dict[tuple[str, int], Verdict]:
    return _rulings(text, supported=True)


def _none_supported(text: str) -> dict[tuple[str, int], Verdict]:
    return _rulings(text, supported=False)


def _through_the_handler(tokens: Sequence[str], *, live: bool) -> object:
    """Every pass the handler makes over the model's text, from its tokens to ``done``."""
    handler = AnswerEventHandler(
        request_id="long", emit=lambda _: None, live_citations=live, raise_error=True
    )
    handler.start("q", ["auto"], {})
    retrieval, model = uuid.uuid4(), uuid.uuid4()
    handler.on_retriever_start(None, "q", run_id=retrieval, tags=[RETRIEVAL_TAG])
    handler.on_retriever_end([source.document for source in _SOURCES], run_id=retrieval)
    handler.on_chat_model_start(None, [[]], run_id=model, tags=[ANSWER_TAG])
    for token in tokens:
        handler.on_llm_new_token(token, run_id=model)
    claims = handler.claims()
    verdict = Verdict((0, 9), 0.9, True)
    return handler.finish("answered", verdicts=[(claim, verdict) for claim in claims])


CASES = [
    # --- the OpenAI adapter: our Sources list in history, the model's own list --------------
    Case(
        "history: Sources items run together, the last broken (the issue's 437 bytes)",
        lambda n, _: _history("ok\n\nSources:\n" + "1. [a](b)" * n + "X"),
        lambda request: request.question_and_history(),
        16,
    ),
    Case(
        "history: Sources items one per line, the last broken",
        lambda n, _: _history("ok\n\nSources:\n" + "1. [a](b)\n" * n + "X"),
        lambda request: request.question_and_history(),
        500,
    ),
    Case(
        "history: one Sources line full of ']('",
        lambda n, _: _history("ok\n\nSources:\n1. [" + "](" * n + " x)"),
        lambda request: request.question_and_history(),
        2000,
    ),
    Case(
        "history: Sources headings over and over",
        lambda n, _: _history("ok" + "\n\nSources:\n" * n + "1. [a](b)"),
        lambda request: request.question_and_history(),
        1000,
    ),
    Case(
        "answer: the model's list followed by prose",
        lambda n, _: "Text [1].\n\nSources:\n" + "- [a](https://x.example)\n" * n + "Prose.",
        without_model_sources,
        500,
    ),
    Case(
        "answer: the model's list streamed a character at a time",
        lambda n, _: "Text [1].\n\n**References**\n" + "1. [a](https://x.example)\n" * n,
        _streamed,
        100,
    ),
    Case(
        "answer: a long line streamed a character at a time",
        lambda n, _: "Text " + "and more " * n,
        _streamed,
        300,
    ),
    Case(
        "answer: a line of spaces and hashes streamed a character at a time",
        lambda n, _: "Text.\n" + " " * n + "#" * n + "\nSources",
        _streamed,
        1000,
    ),
    # --- the question rules -----------------------------------------------------------------
    Case("rules: 'how much' over and over", lambda n, _: "how much " * n, _refusal, 600),
    Case("rules: 'what dose' over and over", lambda n, _: "what dose " * n, _refusal, 400),
    Case(
        "rules: 'is it safe for me' over and over",
        lambda n, _: "is it safe for me " * n,
        _refusal,
        200,
    ),
    Case(
        "rules: 'should I take my' over and over",
        lambda n, _: "should I take my " * n,
        _refusal,
        120,
    ),
    Case("rules: 'can I' and one long word", lambda n, _: "Can I " + "x" * n, _refusal, 2000),
    Case(
        "rules: 'should I' and a run of spaces",
        lambda n, _: "should I" + " " * n + "x",
        _refusal,
        2000,
    ),
    # --- the normalizer ---------------------------------------------------------------------
    Case("normalize: mixed-script words", lambda n, _: "a\u0430-" * n, normalize_question, 1000),
    Case(
        "normalize: invisible characters", lambda n, _: "\u200b" * n + "x", normalize_question, 2000
    ),
    # --- the expander (its routing hints included) ------------------------------------------
    Case("expander: a long hyphenated run", lambda n, _: "a-" * n, rule_expansion, 1000),
    Case("expander: capitals and hyphens", lambda n, _: "A-" * n, rule_expansion, 1000),
    Case("expander: 'how do i' over and over", lambda n, _: "how do i " * n, rule_expansion, 250),
    Case(
        "expander: a follow-up after a long earlier turn",
        lambda n, _: ("What does it do?", [("user", "a-" * n)]),
        lambda parts: rule_expansion(*parts),
        1000,
    ),
    Case(
        "expander: a reply of opening braces",
        lambda n, _: "{" * n,
        lambda t: parse_expansion(t, QUESTION),
        8000,
    ),
    Case(
        "expander: a reply of unclosed JSON",
        lambda n, _: '{"queries": [' + '"x", ' * n,
        lambda t: parse_expansion(t, QUESTION),
        1000,
    ),
    # --- the marker reader ------------------------------------------------------------------
    Case(
        "markers: an unclosed group of thousands",
        lambda n, salt: f"{salt} [1" + ", 1" * n,
        lambda t: strip_out_of_range_markers(t, 3),
        1000,
    ),
    Case(
        "markers: thousands out of range",
        lambda n, salt: f"{salt} [1] " + "[9]x" * n,
        lambda t: finalize_citations(t, ["a", "b", "c"]),
        300,
    ),
    Case("markers: backticks", lambda n, salt: f"{salt} [1]" + "`a" * n, cited_numbers, 1000),
    Case(
        "markers: fences",
        lambda n, salt: f"{salt} [9]\n" + "```\n" * n,
        lambda t: strip_out_of_range_markers(t, 3),
        300,
    ),
    Case(
        "markers: unclosed brackets",
        lambda n, salt: f"{salt} " + "[" * n + "1",
        lambda t: strip_out_of_range_markers(t, 3),
        2000,
    ),
    Case(
        "markers: nested removals",
        lambda n, salt: f"{salt} [1] " + "[" * n + "9" + "]1" * n,
        lambda t: finalize_citations(t, ["a"]),
        100,
    ),
    Case(
        "markers: an answer streamed token by token",
        lambda n, salt: [f"{salt} "] + ["ABCA1 ", "exports ", "cholesterol ", "[1]", ". "] * n,
        _live,
        200,
    ),
    # --- the passes over a long answer of short cited sentences (issue 37: 8,000 of them) ----
    Case(
        "evidence: the claims of a long answer",
        lambda n, salt: _cited_answer(n, salt),
        lambda t: claims_of(t, _SOURCES),
        300,
    ),
    Case(
        "evidence: the items of a long answer, every claim ruled on",
        lambda n, salt: _cited_answer(n, salt),
        lambda t: evidence_items(t, _SOURCES, _all_supported(t)),
        300,
    ),
    Case(
        "evidence: unsupported markers dropped from a long answer",
        lambda n, salt: _cited_answer(n, salt),
        lambda t: drop_unsupported(t, _SOURCES, _none_supported(t)),
        300,
    ),
    Case(
        "answer: a long cited answer finalized",
        lambda n, salt: _cited_answer(n, salt),
        lambda t: finalize_citations(strip_out_of_range_markers(t, 3), _SOURCES),
        300,
    ),
    Case(
        "answer: a long cited answer numbered live, a sentence a token",
        lambda n, salt: _cited_answer(n, salt).split("|"),
        _live,
        300,
    ),
    Case(
        "answer: a long cited answer through the model-sources filter, a sentence a token",
        lambda n, salt: _cited_answer(n, salt).split("|"),
        lambda tokens: "".join(map(ModelSources().feed, tokens)),
        300,
    ),
    Case(
        "answer: a long cited answer through the handler, judged, to done",
        lambda n, salt: _cited_answer(n, salt).split("|"),
        functools.partial(_through_the_handler, live=False),
        300,
    ),
    Case(
        "answer: a long cited answer through the handler live, judged, to done",
        lambda n, salt: _cited_answer(n, salt).split("|"),
        functools.partial(_through_the_handler, live=True),
        300,
    ),
    # --- the sentence splitter --------------------------------------------------------------
    Case(
        "sentences: an unclosed aside of one long word",
        lambda n, s: f"{s} (" + "a" * n,
        strip_literature,
        2000,
    ),
    Case(
        "sentences: an aside of one long word",
        lambda n, s: f"{s} (" + "a" * n + ")",
        strip_literature,
        2000,
    ),
    Case("sentences: a run of spaces", lambda n, s: f"{s}" + " " * n + "x", strip_literature, 2000),
    Case(
        "sentences: years without a name",
        lambda n, s: f"{s} (" + "2001," * n + ")",
        strip_literature,
        500,
    ),
    Case(
        "sentences: 'et' over and over",
        lambda n, s: f"{s} (" + "et " * n + ")",
        strip_literature,
        500,
    ),
    Case("sentences: blank lines", lambda n, s: f"{s}" + "\n" * n + "- x", split_paragraphs, 2000),
    Case("sentences: bullets", lambda n, s: f"{s} " + "- " * n, split_paragraphs, 1000),
    Case(
        "sentences: prose with citations", lambda n, s: f"{s} " + _PROSE * n, split_paragraphs, 20
    ),
    Case(
        "sentences: a fragment ending 'et al....'",
        lambda n, _: "et al" + "." * n + "x",
        is_fragment,
        2000,
    ),
    Case("sentences: a long first word", lambda n, _: "there" + "e" * n, points_back, 2000),
    # --- the redactor -----------------------------------------------------------------------
    Case("redact: a user without a password", lambda n, _: "://a:" + "b" * n, redact_secrets, 2000),
    Case("redact: ':' runs in a url", lambda n, _: "://" + "a:" * n, redact_secrets, 1000),
    Case("redact: short 'sk-' words", lambda n, _: "sk-ab " * n, redact_secrets, 500),
    Case("redact: 'Bearer' over and over", lambda n, _: "Bearer " * n, redact_secrets, 500),
    Case("redact: short Basic values", lambda n, _: "Basic abc " * n, redact_secrets, 500),
    Case("redact: query keys without values", lambda n, _: "?api_key&" * n, redact_secrets, 500),
    # --- the advice gate's cues (a given vector: the embedding is not what is measured) -----
    Case("advice: numbers and commas", lambda n, _: "1," * n, _advice, 1000),
    Case("advice: a how-question without 'I'", lambda n, _: "how " + "x " * n, _advice, 1000),
    Case("advice: a number and spaces", lambda n, _: "1" + " " * n + "x", _advice, 1000),
    Case("advice: 'is it' over and over", lambda n, _: "is it " * n, _advice, 500),
    # --- events carry the question ----------------------------------------------------------
    Case("events: lone surrogates", lambda n, _: "\ud800a" * n, lambda t: TokenData(text=t), 1000),
    # --- the extractive model reads the question, history and sources back -----------------
    Case(
        "extractive: a repeated question, a long aside and a long earlier turn",
        lambda n, s: ("how much " * n, f"{s} {_PROSE}(" + "a" * (8 * n), "a-" * n),
        _extractive,
        100,
    ),
]


class _OverranError(Exception):
    pass


@contextmanager
def _safety_net(seconds: float) -> Iterator[None]:
    """Interrupt the block after ``seconds`` (the regex engine checks for signals): a
    regression to exponential backtracking then fails instead of hanging the suite."""

    def interrupt(*_: object) -> None:
        raise _OverranError

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _cpu_seconds(case: Case, size: int, repeat: int, runs: int = RUNS) -> float:
    """The least CPU time, over ``runs``, of ``repeat`` calls on fresh arguments of ``size``."""
    best = math.inf
    for _ in range(runs):
        arguments = [case.build(size, next(_salt)) for _ in range(repeat)]
        gc.disable()  # a collection landing in one measurement would count against it
        try:
            started = time.thread_time()
            for argument in arguments:
                case.call(argument)
            best = min(best, time.thread_time() - started)
        finally:
            gc.enable()
    return best


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_work_grows_linearly_with_the_input(case: Case) -> None:
    try:
        with _safety_net(SAFETY_NET_S):
            once = _cpu_seconds(case, case.size, repeat=1, runs=1)
            repeat = max(1, min(2000, math.ceil(MIN_CPU_S / max(once, 1e-6))))
            small = _cpu_seconds(case, case.size, repeat)
            large = _cpu_seconds(case, case.size * GROWTH, repeat)
    except _OverranError:
        pytest.fail(f"{case.name}: still running after {SAFETY_NET_S:.0f} s, so not linear")
    ratio = large / max(small, 1e-9)
    assert ratio < LIMIT, (
        f"{case.name}: {GROWTH}x the input took {ratio:.0f}x the work "
        f"({small * 1e3:.2f} ms -> {large * 1e3:.2f} ms for {repeat} calls); linear is about "
        f"{GROWTH}x, quadratic {GROWTH**2}x"
    )


# --- what the rewritten readers still decide -------------------------------------------------


def test_our_sources_list_is_taken_off_history_however_long() -> None:
    references = [
        Reference(
            n=n,
            source_n=n,
            st_id=f"R-HSA-{n}",
            display_name=f"Pathway [{n}] (a\\b)",
            collection="reactome",
        )
        for n in range(1, 3001)
    ]
    answer = "ABCA1 exports cholesterol [1]."
    question, history = _history(answer + sources_markdown(references)).question_and_history()
    assert question == QUESTION
    assert history == [("user", "hi"), ("assistant", answer)]
    assert without_our_sources(answer + sources_markdown(references) + "\n") == answer


def test_a_near_miss_of_our_sources_list_is_kept_as_written() -> None:
    content = "ok\n\nSources:\n" + "1. [a](b)" * 27 + "X"
    _, history = _history(content).question_and_history()
    assert history == [("user", "hi"), ("assistant", content)]


@pytest.mark.parametrize(
    ("question", "matched"),
    [
        ("How much insulin should I take before bed?", "How much insulin should I take"),
        ("How much is it. Should I take it?", None),
        (
            "Is it safe for me to keep taking statins? Thanks.",
            "Is it safe for me to keep taking statins",
        ),
        ("Is it safe for me? My statins are fine.", None),
        ("What dose? No. How many pills should I use daily?", "How many pills should I use"),
        ("Should I stop my statins?", "Should I stop my statins"),
    ],
)
def test_the_care_rules_find_the_same_words(question: str, matched: str | None) -> None:
    refusal = rule_refusal(question, max_chars=2000)
    assert (refusal.detail["matched"] if refusal else None) == matched


def test_symbols_and_citations_are_read_as_before() -> None:
    expansion = rule_expansion("How do ABCA1 and IL-6 and TP53 differ from mTOR?")
    assert "ABCA1 IL-6 TP53" in expansion.queries
    assert strip_literature("RRM2B (Kuo et al. 2010) and (Smith2001a) stay (see above)") == (
        "RRM2B and stay (see above)"
    )
    assert strip_literature("Cells divide.  (Jones, 1999). Next (Li 2003; Wu 2004)") == (
        "Cells divide. Next"
    )
