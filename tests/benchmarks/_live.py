"""Live citation numbering for bench_performance: answer-like token streams, the handler's
added cost per token with ``live_citations`` on, and how long text is held back.

The token streams look like a model's answer: word-sized tokens (a leading space, as BPE
tokenizers make them), a marker at the end of most sentences (``[1]``, ``[2][3]``,
``[1, 4]``, a range, now and then a number past the sources), now and then a paragraph
break. A marker is one token, or split across several the way a tokenizer splits it
(``" [", "1", "]"``, ``" [2", "][", "3]"``).
"""

from __future__ import annotations

import asyncio
import gc
import random
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel, FakeListChatModel

from callbacks.events import DoneEvent
from callbacks.handler import AnswerEventHandler
from pipelines.core.settings import Settings
from pipelines.core.tags import ANSWER_TAG, RETRIEVAL_TAG
from pipelines.pipeline import AnswerPipeline
from tests.benchmarks._common import percentile
from tests.support.fake_pipeline import FakeRetriever
from tests.support.fakes import ScriptedStream

# How many sources the handler has (markers past this many are out of range).
SOURCES = 10

_WORDS = (
    (
        "ABCA1 exports cholesterol and phospholipid to lipid-poor apolipoprotein A-I, forming "
        "nascent HDL particles at the plasma membrane. Loss of function variants in the "
        "transporter cause Tangier disease, with very low plasma HDL, orange tonsils and "
        "peripheral neuropathy. CDK5 is kept active by p25 in neurons, which phosphorylates tau "
        "and other substrates in models of Alzheimer's disease. The pathway browser shows each "
        "reaction with its inputs, outputs, catalysts and regulators in the cellular compartment "
        "where it takes place"
    )
    .replace(".", "")
    .replace(",", "")
    .split()
)


def citing_documents(count: int = SOURCES) -> list[Document]:
    """``count`` citable documents with distinct stable ids."""
    return [
        Document(
            page_content=f"Source {n} says something about ABCA1.",
            metadata={
                "st_id": f"R-HSA-{5682100 + n}",
                "display_name": f"Pathway {n}",
                "collection": "reactome",
                "citable": True,
            },
        )
        for n in range(1, count + 1)
    ]


def _marker(rng: random.Random) -> str:
    """One citation marker at the end of a sentence (leading space included)."""
    roll = rng.random()
    if roll < 0.08:  # out of range: removed, with the space before it
        numbers = [str(rng.randint(SOURCES + 1, SOURCES + 9))]
    elif roll < 0.16:
        first = rng.randint(1, SOURCES - 2)
        numbers = [f"{first}-{first + rng.randint(1, 2)}"]
    else:
        numbers = [str(rng.randint(1, SOURCES)) for _ in range(rng.choice((1, 1, 1, 2, 2, 3)))]
    if len(numbers) > 1 and rng.random() < 0.5:
        groups = [f"[{n}]" for n in numbers]  # [2][3]
    else:
        groups = ["[" + ", ".join(numbers) + "]"]  # [1, 4]
    return " " + "".join(groups)


def _split(token: str, rng: random.Random) -> list[str]:
    """A marker token cut where a tokenizer might cut it: before and after each bracket and
    separator, with neighbouring pieces glued back together at random (never all of them)."""
    pieces: list[str] = []
    for char in token:
        if pieces and char not in "[]," and pieces[-1][-1] not in "[],":
            pieces[-1] += char
        else:
            pieces.append(char)
    # " " then "[" -> " [" always (tokenizers keep the space with what follows)
    if len(pieces) > 1 and pieces[0] == " ":
        pieces[:2] = [" " + pieces[1]]
    glued: list[str] = [pieces[0]]
    for index, piece in enumerate(pieces[1:], start=1):
        if rng.random() < 0.35 and (len(glued) > 1 or index < len(pieces) - 1):
            glued[-1] += piece
        else:
            glued.append(piece)
    return glued


def answer_tokens(rng: random.Random, sentences: int, *, split_share: float) -> list[str]:
    """An answer of ``sentences`` sentences as tokens; ``split_share`` of its markers split
    across tokens."""
    tokens: list[str] = []
    for index in range(sentences):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(8, 20))]
        words[0] = words[0][:1].upper() + words[0][1:]
        for position, word in enumerate(words):
            space = "" if position == 0 and (index == 0 or tokens[-1].endswith("\n")) else " "
            tokens.append(space + word)
        if rng.random() < 0.85:
            marker = _marker(rng)
            tokens += _split(marker, rng) if rng.random() < split_share else [marker]
        tokens.append(".")
        if rng.random() < 0.15:
            tokens.append("\n\n")
    return tokens


def token_stream(count: int, *, seed: int = 11, split_share: float = 0.5) -> list[str]:
    """``count`` tokens of answer-like text (answers of 3 to 8 sentences back to back)."""
    rng = random.Random(seed)
    tokens: list[str] = []
    while len(tokens) < count:
        tokens += answer_tokens(rng, rng.randint(3, 8), split_share=split_share)
        tokens.append("\n\n")
    return tokens[:count]


# --- the handler's cost per token, live off and on ---------------------------------------


async def timed_stream(model: BaseChatModel, callbacks: list[Any]) -> float:
    """Seconds to stream the answer model's whole reply through ``callbacks``."""
    started = time.perf_counter()
    config: Any = {"callbacks": callbacks, "tags": [ANSWER_TAG]}
    async for _ in model.astream("q", config=config):
        pass
    return time.perf_counter() - started


def handler_after_retrieval(*, live_citations: bool) -> tuple[AnswerEventHandler, uuid.UUID]:
    """Our handler with the answer model's run started: retrieval ended with
    :data:`SOURCES` citable documents, gate open. Returns it and the model's run id."""
    # Events are dropped as they come, as a consumer draining the stream does: kept, 100,000
    # event objects make the garbage collector cost more per token than the handler itself.
    handler = AnswerEventHandler(
        request_id="bench", emit=lambda _: None, live_citations=live_citations
    )
    handler.start("q", ["reactome"], {})
    retrieval = uuid.uuid4()
    handler.on_retriever_start({}, "q", run_id=retrieval, tags=[RETRIEVAL_TAG], name="retrieval")
    handler.on_retriever_end(citing_documents(), run_id=retrieval)
    model = uuid.uuid4()
    handler.on_chat_model_start({}, [[]], run_id=model, tags=[ANSWER_TAG], name="answer")
    return handler, model


def bench_live_handler(tokens: int, rounds: int = 5) -> dict[str, Any]:
    """The same answer-like stream through the stream alone, our handler, and our handler
    with live citations, under ``astream`` (rounds interleaved, best of each); and the same
    tokens fed to the handler's hook directly, without LangChain around it (which the
    machine's load and the garbage collector disturb far less), and the ``finish`` after."""
    stream_tokens = token_stream(tokens)
    model = ScriptedStream(script=lambda _: stream_tokens)

    async def stream(callbacks: list[Any]) -> float:
        return await timed_stream(model, callbacks)

    makers: dict[str, Callable[[], list[Any]]] = {
        "stream_alone": list,
        "off": lambda: [handler_after_retrieval(live_citations=False)[0]],
        "live": lambda: [handler_after_retrieval(live_citations=True)[0]],
    }

    def direct(live: bool) -> tuple[float, float]:
        """Seconds feeding every token to the hook, then seconds in finish (done)."""
        handler, run_id = handler_after_retrieval(live_citations=live)
        hook = handler.on_llm_new_token
        started = time.perf_counter()
        for token in stream_tokens:
            hook(token, run_id=run_id)
        streamed = time.perf_counter()
        handler.finish()
        return streamed - started, time.perf_counter() - streamed

    best = {name: float("inf") for name in [*makers, "direct_off", "direct_live", "finish_off",
                                            "finish_live"]}  # fmt: skip
    # What the process holds already (stores, models, the other sections' objects) is
    # frozen: otherwise whether one more full collection over all of it falls inside a
    # run, at ~100 ms, decides the result more than the handler does.
    gc.collect()
    gc.freeze()
    try:
        for _ in range(rounds):  # interleaved, so load on the machine falls on all alike
            for name, make in makers.items():
                gc.collect()
                best[name] = min(best[name], asyncio.run(stream(make())))
            for _ in range(2):
                for mode in ("off", "live"):
                    gc.collect()
                    fed, finished = direct(mode == "live")
                    best[f"direct_{mode}"] = min(best[f"direct_{mode}"], fed)
                    best[f"finish_{mode}"] = min(best[f"finish_{mode}"], finished)
    finally:
        gc.unfreeze()
    per_token = 1e6 / tokens
    off = (best["off"] - best["stream_alone"]) * per_token
    live = (best["live"] - best["stream_alone"]) * per_token
    return {
        "tokens": tokens,
        "chars": sum(map(len, stream_tokens)),
        "markers": "".join(stream_tokens).count("["),
        "sources": SOURCES,
        "stream_alone_us_per_token": best["stream_alone"] * per_token,
        "off_us": off,
        "live_us": live,
        "live_minus_off_us": live - off,
        "direct_off_us": best["direct_off"] * per_token,
        "direct_live_us": best["direct_live"] * per_token,
        "direct_live_minus_off_us": (best["direct_live"] - best["direct_off"]) * per_token,
        # once per answer: the whole text's finalization (off), what was held back (live)
        "finish_off_ms": best["finish_off"] * 1000,
        "finish_live_ms": best["finish_live"] * 1000,
    }


# --- how long text is held back ------------------------------------------------------------


def _spread(values: Sequence[float]) -> dict[str, float]:
    return {
        "p50": percentile(values, 0.5),
        "p99": percentile(values, 0.99),
        "max": max(values, default=0.0),
    }


def held_back(
    pipeline: AnswerPipeline,
    questions: Sequence[tuple[str, dict[str, Any]]],
) -> dict[str, Any]:
    """Answer each (question, stream options) in live mode; the spread of each answer's
    ``done.data.timings.held_back_ms`` and ``held_back_chars``."""
    ms: list[float] = []
    chars: list[float] = []
    states: dict[str, int] = {}
    markers = 0
    for question, options in questions:
        done = None
        for event in pipeline.stream(question, live_citations=True, **options):
            done = event
        assert isinstance(done, DoneEvent)
        states[done.data.state] = states.get(done.data.state, 0) + 1
        markers += done.data.text.count("[")
        timings = done.data.timings
        if timings.held_back_ms is not None and timings.held_back_chars is not None:
            ms.append(timings.held_back_ms)
            chars.append(timings.held_back_chars)
    return {
        "answers": len(questions),
        "states": states,
        "markers_in_done_text": markers,
        "held_back_ms": _spread(ms),
        "held_back_chars": _spread(chars),
    }


def fake_held_back(
    settings: Settings, questions: Sequence[str], *, token_ms: float, char_ms: float
) -> dict[str, Any]:
    """Live mode with fake answer models over :data:`SOURCES` fixed documents: one answer of
    3 to 8 sentences per question, every marker split across tokens, streamed ``token_ms``
    apart; and the same texts one character per chunk, ``char_ms`` apart
    (``FakeListChatModel``)."""
    rng = random.Random(5)
    answers = [answer_tokens(rng, rng.randint(3, 8), split_share=1.0) for _ in questions]
    scripted: Iterator[list[str]] = iter(answers)

    def pipeline(model: BaseChatModel) -> AnswerPipeline:
        return AnswerPipeline(
            settings,
            answer_model=model,
            expander_model=FakeListChatModel(responses=["unused"]),
            retriever=FakeRetriever(documents=citing_documents()),
        )

    asked: list[tuple[str, dict[str, Any]]] = [(question, {}) for question in questions]
    tokens = ScriptedStream(script=lambda _: next(scripted), delay_s=token_ms / 1000)
    characters = FakeListChatModel(responses=["".join(a) for a in answers], sleep=char_ms / 1000)
    return {
        "tokens": {
            "token_ms": token_ms,
            "tokens_per_answer": sum(map(len, answers)) / len(answers),
            **held_back(pipeline(tokens), asked),
        },
        "characters": {
            "char_ms": char_ms,
            "chars_per_answer": sum(len("".join(a)) for a in answers) / len(answers),
            **held_back(pipeline(characters), asked),
        },
    }
