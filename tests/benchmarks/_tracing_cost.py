"""What tracing costs an answer, for bench_performance (issue 40, decision 0042).

- **Per answer**: the same extractive answers from a pipeline without tracing (twice: the
  second's ratio to the first is the noise) and from one whose spans go to an exporter that
  encodes them as the OTLP exporter would send them, then drops them; each question through
  the three in turn (paired, so that the machine's drift falls on all three), taking turns
  coming first, in one process. Reported: the wall time the caller waits (each question's
  median over the rounds, summed), and the CPU the process spends per answer (every
  thread's, each question's median), the traced answers' with the CPU their spans took to
  draw and encode (the shipper flushed every 32 answers, before it would draw on its own).
  On a busy server that work runs beside other answers, but it is still CPU spent on them.
  Every question goes through each pipeline once before timing. Goal: the traced answers'
  cost within 3% of the untraced ones'; timed alone too, the drawing and encoding, whose
  share of an answer the noise of the two measures above (each pipeline's own, about 1%)
  does not hide.
- **Per token**: the answer model's stream through our handler alone, and through the
  handler feeding a trace recorder (the records and events an answer keeps for its spans).
  Goal: at most 5 µs more per token event.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from callbacks.events import Event
from callbacks.handler import AnswerEventHandler
from callbacks.log_header import LogHeader
from callbacks.tracing.context import TraceContext
from callbacks.tracing.otlp import readable_spans
from callbacks.tracing.spans import AnswerRecords, answer_spans
from callbacks.tracing.tracer import AnswerTracer
from pipelines.core.redaction import SecretRedactor, secret_redactor
from pipelines.core.settings import Settings
from pipelines.core.tags import RETRIEVAL_TAG
from pipelines.pipeline import AnswerPipeline
from tests.benchmarks._live import citing_documents, timed_stream
from tests.support.fakes import ScriptedStream

__all__ = ["bench_tracing", "report"]

ANSWER_GOAL = 0.03
TOKEN_GOAL_US = 5.0


class _Discarding(SpanExporter):
    """The OTLP exporter's work short of the network: the spans encoded as the request it
    would send (what the SDK's protobuf encoder costs), then dropped."""

    def __init__(self) -> None:
        self.spans = 0
        self.bytes = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        self.bytes += len(encode_spans(spans).SerializeToString())
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def _timed(pipeline: AnswerPipeline, question: str) -> tuple[float, float]:
    """One answer's wall time as its caller waits for it, and the CPU the whole process spent
    meanwhile (every thread's: the embedding model's own threads, say), in milliseconds."""
    cpu = time.process_time()
    started = time.perf_counter()
    pipeline.invoke(question)
    return (time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000


def _shipped_ms(pipeline: AnswerPipeline) -> float:
    """The CPU spent drawing and sending the spans a traced pipeline's answers left waiting."""
    if pipeline.tracer is None:
        return 0.0
    cpu = time.process_time()
    assert pipeline.tracer.flush(60)
    return (time.process_time() - cpu) * 1000


# Traced answers between flushes: fewer than a batch (64) and well within the shipper's delay
# (5 s), so that it never draws while another pipeline's answer is on the clock.
_FLUSH_EVERY = 32


def bench_answers(
    settings: Settings, embeddings: Any, questions: Sequence[str], rounds: int = 5
) -> dict[str, Any]:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        os.environ.pop(name, None)
    exporter = _Discarding()
    off = AnswerPipeline(settings, embeddings=embeddings)
    again = AnswerPipeline(settings, embeddings=embeddings)
    on = AnswerPipeline(settings, embeddings=embeddings, span_exporter=exporter)
    assert off.tracer is None
    assert on.tracer is not None
    pipelines = {"off": off, "on": on, "off_again": again}
    # The records each traced answer hands over, kept to time the drawing alone afterwards.
    kept: list[Callable[[], AnswerRecords]] = []
    submit = on.tracer.submit

    def keep(
        header: Callable[[SecretRedactor], LogHeader],
        items: Sequence[Mapping[str, Any] | Event],
        trace_state: str | None = None,
    ) -> None:
        kept.append(lambda: AnswerRecords(header(secret_redactor()), items))
        submit(header, items, trace_state)

    on.tracer.submit = keep  # type: ignore[method-assign]
    # Every question once through each first: models, indexes, the SDK and each question's
    # passages loaded before timing, so no pipeline pays for coming first.
    for pipeline in pipelines.values():
        for question in questions:
            pipeline.invoke(question)
        _shipped_ms(pipeline)
    # Each question through the three in turn (paired: the machine's drift in speed falls on
    # all three alike), each pipeline first as often as the others; a wall time per question
    # and round, the CPU summed with the traced answers' spans drawn and sent.
    walls: dict[str, list[list[float]]] = {name: [[] for _ in questions] for name in pipelines}
    cpu: dict[str, list[list[float]]] = {name: [[] for _ in questions] for name in pipelines}
    shipped = 0.0
    names = list(pipelines)
    for round_ in range(rounds):
        for index, question in enumerate(questions):
            # each question's pipelines in another order each round, each first as often
            shift = (index + round_) % len(names)
            for name in names[shift:] + names[:shift]:
                wall, spent = _timed(pipelines[name], question)
                walls[name][index].append(wall)
                cpu[name][index].append(spent)
            if (index + 1) % _FLUSH_EVERY == 0 or index + 1 == len(questions):
                shipped += _shipped_ms(on)
    answers = len(questions) * rounds
    # Each question's median over the rounds, summed: the time the questions take each way;
    # the traced answers' CPU with what drawing and sending their spans cost, per answer.
    total = {name: sum(map(statistics.median, per)) for name, per in walls.items()}
    cpu_each = {
        name: sum(map(statistics.median, per)) / len(questions) for name, per in cpu.items()
    }
    path_ms = cpu_each["on"]  # the traced answers' own, before their spans are drawn
    cpu_each["on"] += shipped / answers
    p50 = {
        name: statistics.median([wall for one in per for wall in one])
        for name, per in walls.items()
    }
    drawn_ms = _drawing_ms([records() for records in kept[-len(questions) :]], on.tracer)
    return {
        "answers": answers,
        "p50_ms": p50,
        "on_ratio": total["on"] / total["off"],
        "noise_ratio": total["off_again"] / total["off"],
        "cpu_ms": cpu_each,
        "cpu_ratio": cpu_each["on"] / cpu_each["off"],
        "cpu_noise_ratio": cpu_each["off_again"] / cpu_each["off"],
        "cpu_path_ms": path_ms,
        "shipped_ms": shipped / answers,
        "spans": exporter.spans,
        "drawn_ms": drawn_ms,
        "drawn_share": drawn_ms / p50["off"],
        "drawn_cpu_share": drawn_ms / cpu_each["off"],
    }


def _drawing_ms(kept: Sequence[AnswerRecords], tracer: AnswerTracer, rounds: int = 5) -> float:
    """The work a traced answer costs beyond its own path, timed alone and done as the
    shipper does it: the spans of a batch of answers drawn from their records with one
    redaction and encoded in one request as the OTLP exporter sends them; per answer, best of
    ``rounds``."""
    resource, content = tracer._resource, tracer.content
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        redact = secret_redactor()
        spans = [
            span
            for records in kept
            for span in readable_spans(
                answer_spans(records, content=content, redact=redact), resource
            )
        ]
        encode_spans(spans).SerializeToString()
        best = min(best, (time.perf_counter() - started) / len(kept))
    return best * 1000


def _handler(record: Callable[[str, dict[str, Any]], None] | None, emit: Callable[[Any], None]) -> (
    AnswerEventHandler
):  # fmt: skip
    handler = AnswerEventHandler(request_id="bench", emit=emit, record=record)
    handler.start("q", ["reactome"], {})
    retrieval = uuid.uuid4()
    handler.on_retriever_start({}, "q", run_id=retrieval, tags=[RETRIEVAL_TAG], name="retrieval")
    handler.on_retriever_end(citing_documents(), run_id=retrieval)
    return handler


def bench_tokens(tokens: int, rounds: int = 3) -> dict[str, Any]:
    model = ScriptedStream(script=lambda _: ["a "] * tokens)
    tracer = AnswerTracer(_Discarding(), where="nowhere")

    def untraced() -> list[Any]:
        return [_handler(None, lambda _: None)]

    def traced() -> list[Any]:
        recorder = tracer.recorder(TraceContext.new())
        return [_handler(recorder.callback, recorder.event)]

    def best(make: Callable[[], list[Any]]) -> float:
        return min(asyncio.run(timed_stream(model, make())) for _ in range(rounds))

    alone, off, on = best(list), best(untraced), best(traced)
    per_token = 1e6 / tokens
    return {
        "tokens": tokens,
        "stream_alone_us": alone * per_token,
        "handler_us": (off - alone) * per_token,
        "traced_handler_us": (on - alone) * per_token,
        "tracing_us": (on - off) * per_token,
    }


def bench_tracing(
    settings: Settings, embeddings: Any, questions: Sequence[str], tokens: int
) -> dict[str, Any]:
    return {
        "answers": bench_answers(settings, embeddings, questions),
        "tokens": bench_tokens(tokens),
    }


def report(results: dict[str, Any]) -> str:
    answers, tokens = results["answers"], results["tokens"]
    p50, cpu = answers["p50_ms"], answers["cpu_ms"]
    return (
        f"Tracing, {answers['answers']} extractive answers each way ({answers['spans']} spans):"
        f" the caller waits p50 {p50['off']:.1f} ms untraced, {p50['on']:.1f} ms traced; "
        f"question by question {answers['on_ratio']:.3f}x (untraced against itself "
        f"{answers['noise_ratio']:.3f}x, the noise); the process spends {cpu['off']:.1f} ms of "
        f"CPU per answer untraced, {cpu['on']:.1f} ms traced, its spans drawn and sent: "
        f"{answers['cpu_ratio']:.3f}x (noise {answers['cpu_noise_ratio']:.3f}x); drawn and "
        f"encoded alone, an answer's spans take {answers['drawn_ms']:.2f} ms of CPU: "
        f"{answers['drawn_cpu_share']:.1%} of the untraced answer's CPU, "
        f"{answers['drawn_share']:.1%} of its p50 wait (goal: at most {ANSWER_GOAL:.0%})\n"
        f"Tracing per token over {tokens['tokens']:,} tokens: the handler adds "
        f"{tokens['handler_us']:.1f} µs, {tokens['traced_handler_us']:.1f} µs feeding a trace "
        f"recorder: {tokens['tracing_us']:+.1f} µs per token (goal: at most {TOKEN_GOAL_US:g})"
    )
