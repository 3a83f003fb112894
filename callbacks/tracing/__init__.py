"""Every answer as an OpenTelemetry trace (decision 0042).

- ``settings``: whether answers are traced, from OpenTelemetry's own variables
  (:class:`TraceSettings`);
- ``context``: the trace an answer joins (:class:`TraceContext`, :func:`parse_traceparent`);
- ``spans``: one answer's spans drawn from its records, pure (:func:`answer_spans`);
- ``otlp``: those spans as the SDK's, sent by its OTLP exporters or written as OTLP JSON lines;
- ``shipping``: a thread that sends them, bounded, counting what it drops (:class:`SpanShipper`);
- ``tracer``: one per process and exporter (:class:`AnswerTracer`, :func:`tracer_from_environ`),
  and what one answer records for it (:class:`TraceRecorder`).

Nothing here is imported on an answer's path unless tracing is on.
"""

from typing import TYPE_CHECKING

from pipelines.core.lazy import lazy_attributes

if TYPE_CHECKING:
    from callbacks.tracing.context import TraceContext, parse_traceparent
    from callbacks.tracing.settings import TraceSettings
    from callbacks.tracing.spans import AnswerRecords, SpanSpec, answer_spans
    from callbacks.tracing.tracer import AnswerTracer, TraceRecorder, tracer_from_environ

__all__ = [
    "AnswerRecords",
    "AnswerTracer",
    "SpanSpec",
    "TraceContext",
    "TraceRecorder",
    "TraceSettings",
    "answer_spans",
    "parse_traceparent",
    "tracer_from_environ",
]

__getattr__ = lazy_attributes(
    __name__,
    {
        "AnswerRecords": "callbacks.tracing.spans",
        "AnswerTracer": "callbacks.tracing.tracer",
        "SpanSpec": "callbacks.tracing.spans",
        "TraceContext": "callbacks.tracing.context",
        "TraceRecorder": "callbacks.tracing.tracer",
        "TraceSettings": "callbacks.tracing.settings",
        "answer_spans": "callbacks.tracing.spans",
        "parse_traceparent": "callbacks.tracing.context",
        "tracer_from_environ": "callbacks.tracing.tracer",
    },
)
