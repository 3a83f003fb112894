"""What tracing costs an answer, for bench_performance (issue 40, decision 0042).

- **Per answer**: the same extractive answers from a pipeline without tracing (twice: the
  second's ratio to the first is the noise) and from one whose spans go to an exporter that
  encodes them as the OTLP exporter would send them, then drops them; in blocks of all the
  questions, the three pipelines taking turns coming first, in one process. Reported: the
  wall time the caller waits, and the CPU the process spends per answer (every thread's: a
  traced block's includes drawing and encoding its spans, whose thread is flushed before the
  clock stops). On a busy server that work runs beside other answers, but it is still CPU
  spent on them. Every question goes through each pipeline once before timing. Goal: the
  traced answers' cost within 3% of the untraced ones'.
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
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from callbacks.handler import AnswerEventHandler
from callbacks.tracing.context import TraceContext
from callbacks.tracing.otlp import readable_spans
from callbacks.tracing.spans import AnswerRecords, answer_spans
from callbacks.tracing.tracer import AnswerTracer
from pipelines.core.redaction import secret_redactor
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


def _block(pipeline: AnswerPipeline, questions: Sequence[str]) -> tuple[list[float], float]:
    """Each answer's wall time as its caller waits for it, and the CPU the whole process
    spent on the block (every thread's), the drawing and sending of a traced block's spans
    included: its shipper is flushed before the clock stops."""
    walls = []
    cpu = time.process_time()
    for question in questions:
        started = time.perf_counter()
        pipeline.invoke(question)
        walls.append((time.perf_counter() - started) * 1000)
    if pipeline.tracer is not None:
        assert pipeline.tracer.flush(60)
    return walls, (time.process_time() - cpu) * 1000


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

    def keep(records: Callable[[], AnswerRecords], trace_state: str | None = None) -> None:
        kept.append(records)
        submit(records, trace_state)

    on.tracer.submit = keep  # type: ignore[method-assign]
    # Every question once through each first: models, indexes, the SDK and each question's
    # passages loaded before timing, so no pipeline pays for coming first.
    for pipeline in pipelines.values():
        _block(pipeline, questions)
    walls: dict[str, list[float]] = {name: [] for name in pipelines}
    cpu: dict[str, float] = dict.fromkeys(pipelines, 0.0)
    names = list(pipelines)
    for round_ in range(rounds):
        shift = round_ % len(names)  # each pipeline first as often as the others
        for name in names[shift:] + names[:shift]:
            block_walls, block_cpu = _block(pipelines[name], questions)
            walls[name].extend(block_walls)
            cpu[name] += block_cpu
    answers = len(questions) * rounds
    p50 = {name: statistics.median(values) for name, values in walls.items()}
    drawn_ms = _drawing_ms([records() for records in kept[-len(questions) :]], on.tracer)
    cpu_each = {name: total / answers for name, total in cpu.items()}
    return {
        "answers": answers,
        "p50_ms": p50,
        "on_ratio": p50["on"] / p50["off"],
        "noise_ratio": p50["off_again"] / p50["off"],
        "cpu_ms": cpu_each,
        "cpu_ratio": cpu_each["on"] / cpu_each["off"],
        "cpu_noise_ratio": cpu_each["off_again"] / cpu_each["off"],
        "spans": exporter.spans,
        "drawn_ms": drawn_ms,
        "drawn_share": drawn_ms / p50["off"],
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
        f" the caller waits p50 {p50['off']:.1f} ms untraced, {p50['on']:.1f} ms traced: "
        f"{answers['on_ratio']:.3f}x (untraced against itself {answers['noise_ratio']:.3f}x, "
        f"the noise); the process spends {cpu['off']:.1f} ms of CPU per answer untraced, "
        f"{cpu['on']:.1f} ms traced, its spans drawn and sent: {answers['cpu_ratio']:.3f}x "
        f"(noise {answers['cpu_noise_ratio']:.3f}x); drawn and encoded alone, an answer's "
        f"spans take {answers['drawn_ms']:.2f} ms: {answers['drawn_share']:.1%} of the "
        f"untraced answer's p50 (goal: at most {ANSWER_GOAL:.0%})\n"
        f"Tracing per token over {tokens['tokens']:,} tokens: the handler adds "
        f"{tokens['handler_us']:.1f} µs, {tokens['traced_handler_us']:.1f} µs feeding a trace "
        f"recorder: {tokens['tracing_us']:+.1f} µs per token (goal: at most {TOKEN_GOAL_US:g})"
    )
