"""Tracing answers: which trace each joins, what it records, and where its spans go.

:class:`AnswerTracer` is one per process and exporter (:func:`tracer_from_environ` reads the
standard variables); the pipeline asks it to :meth:`~AnswerTracer.begin` each answer (the
caller's ``traceparent`` or span, the sampler's decision) and hands what it recorded to
:meth:`~AnswerTracer.submit` once it has ended. A :class:`TraceRecorder` keeps an answer's
callback records and events as the event log does, less the tokens; the spans are drawn from
them off the event loop (:func:`callbacks.tracing.spans.answer_spans`).
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from callbacks.events import Event, TokenEvent
from callbacks.log_header import LogHeader
from callbacks.tracing.context import TraceContext, TraceParent, parse_traceparent
from callbacks.tracing.settings import TraceSettings
from callbacks.tracing.spans import AnswerRecords, answer_spans, span_count
from pipelines.core.errors import ConfigurationError

if TYPE_CHECKING:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.sdk.trace.sampling import Sampler

    from callbacks.tracing.shipping import SpanShipper
    from pipelines.core.redaction import SecretRedactor

__all__ = ["AnswerTracer", "TraceRecorder", "tracer_from_environ"]


class AnswerTracer:
    """Where answers' spans go (``exporter``, named ``where`` in messages), and whether the
    messages and passages go with them (``content``)."""

    def __init__(self, exporter: SpanExporter, *, where: str, content: bool = False) -> None:
        from callbacks.tracing.otlp import our_resource
        from callbacks.tracing.shipping import SpanShipper

        self.content = content
        self.shipper: SpanShipper = SpanShipper(
            exporter, where=where, delay_s=_schedule_delay_s(os.environ)
        )
        self._sampler = _sampler(os.environ)
        self._resource: Resource = our_resource()

    @property
    def dropped(self) -> int:
        """Spans lost so far: the queue was full, or the collector refused or was away."""
        return self.shipper.dropped

    def begin(self, traceparent: str | None = None, tracestate: str | None = None) -> (
        TraceContext | None
    ):  # fmt: skip
        """The trace an answer joins: the one ``traceparent`` names, else the current
        OpenTelemetry span's (a caller tracing with the SDK), else a new one; None when the
        sampler (``OTEL_TRACES_SAMPLER``) leaves it out."""
        from opentelemetry import trace as trace_api
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

        parent = parse_traceparent(traceparent)
        state = tracestate if parent is not None else None
        if parent is None:
            current = trace_api.get_current_span().get_span_context()
            if current.is_valid:
                parent = TraceParent(
                    f"{current.trace_id:032x}",
                    f"{current.span_id:016x}",
                    current.trace_flags.sampled,
                )
                state = current.trace_state.to_header() or None
        context = TraceContext.new((parent.trace_id, parent.span_id) if parent else None, state)
        caller = None
        if parent is not None:
            flags = TraceFlags(TraceFlags.SAMPLED if parent.sampled else TraceFlags.DEFAULT)
            span = SpanContext(int(parent.trace_id, 16), int(parent.span_id, 16), True, flags)
            caller = trace_api.set_span_in_context(NonRecordingSpan(span))
        from opentelemetry.sdk.trace.sampling import Decision

        found = self._sampler.should_sample(caller, int(context.trace_id, 16), "answer")
        return context if found.decision is Decision.RECORD_AND_SAMPLE else None

    def recorder(self, context: TraceContext) -> TraceRecorder:
        return TraceRecorder(self, context)

    def submit(
        self,
        header: Callable[[SecretRedactor], LogHeader],
        items: Sequence[Mapping[str, Any] | Event],
        trace_state: str | None = None,
    ) -> None:
        """Hand an ended answer's records over (:class:`AnswerRecords`, its header as a
        function that makes it with a redaction): the header is made, and the spans drawn and
        sent, off the loop. Should the queue be full, its spans are counted, not drawn."""
        from callbacks.tracing.otlp import readable_spans

        content, resource = self.content, self._resource
        self.shipper.submit(
            lambda redact: readable_spans(
                answer_spans(AnswerRecords(header(redact), items), content=content, redact=redact),
                resource,
                trace_state,
            ),
            count=lambda: span_count(items),
        )

    def flush(self, timeout_s: float = 30.0) -> bool:
        return self.shipper.flush(timeout_s)

    def shutdown(self, timeout_s: float = 5.0) -> None:
        self.shipper.shutdown(timeout_s)


class TraceRecorder:
    """One answer's records, as its event log keeps them, less the tokens (only the first's
    time is kept, and their text only for ``content``)."""

    def __init__(self, tracer: AnswerTracer, context: TraceContext) -> None:
        self.tracer = tracer
        self.context = context
        self.items: list[Mapping[str, Any] | Event] = []
        self._tokens = tracer.content
        self._first_token = True
        self._submitted = False

    def callback(self, hook: str, arguments: dict[str, Any]) -> None:
        if hook == "llm_new_token" and not self._tokens:
            return
        self.items.append({"hook": hook, **arguments})

    def event(self, event: Event) -> None:
        if isinstance(event, TokenEvent):
            if not self._first_token:
                return
            self._first_token = False
        self.items.append(event)

    def submit(self, header: Callable[[SecretRedactor], LogHeader]) -> None:
        """Send the answer's spans (once: a second call does nothing); ``header`` makes the
        log header they are drawn under, with the redaction given, in the shipping thread,
        off the answer's path."""
        if self._submitted:
            return
        self._submitted = True
        self.tracer.submit(header, self.items, self.context.trace_state)


def _schedule_delay_s(environ: Mapping[str, str]) -> float:
    """``OTEL_BSP_SCHEDULE_DELAY`` (milliseconds; 5000 unset), as the SDK's batch processor
    reads it: how long an ended answer's spans may wait to go out with others."""
    given = environ.get("OTEL_BSP_SCHEDULE_DELAY", "").strip()
    try:
        delay_ms = float(given) if given else 5000.0
    except ValueError:
        delay_ms = -1.0
    if not 0 <= delay_ms < float("inf"):
        raise ConfigurationError(
            f"OTEL_BSP_SCHEDULE_DELAY {given[:40]!r} is not a number of milliseconds",
            fix="give 0 or more (5000 when unset)",
        )
    return delay_ms / 1000


def _sampler(environ: Mapping[str, str]) -> Sampler:
    """The sampler ``OTEL_TRACES_SAMPLER`` names (with ``OTEL_TRACES_SAMPLER_ARG``), as the
    SDK's own tracer provider reads them; parent-based always-on when unset."""
    from opentelemetry.sdk.trace import sampling

    name = environ.get("OTEL_TRACES_SAMPLER", "").strip().lower() or "parentbased_always_on"
    given = environ.get("OTEL_TRACES_SAMPLER_ARG", "").strip()
    try:
        ratio = float(given) if given else 1.0
    except ValueError:
        ratio = -1.0
    if name.endswith("traceidratio") and not 0.0 <= ratio <= 1.0:
        raise ConfigurationError(
            f"OTEL_TRACES_SAMPLER_ARG {given[:40]!r} is not a ratio",
            fix="give a number from 0 to 1 (the share of answers traced)",
        )
    samplers: dict[str, sampling.Sampler] = {
        "always_on": sampling.ALWAYS_ON,
        "always_off": sampling.ALWAYS_OFF,
        "traceidratio": sampling.TraceIdRatioBased(ratio),
        "parentbased_always_on": sampling.ParentBased(sampling.ALWAYS_ON),
        "parentbased_always_off": sampling.ParentBased(sampling.ALWAYS_OFF),
        "parentbased_traceidratio": sampling.ParentBased(sampling.TraceIdRatioBased(ratio)),
    }
    if name not in samplers:
        raise ConfigurationError(
            f"OTEL_TRACES_SAMPLER {name[:40]!r} is not a sampler we know",
            fix=f"use one of {', '.join(samplers)}",
        )
    return samplers[name]


_TRACERS: dict[tuple[TraceSettings, bool], AnswerTracer] = {}
_TRACERS_LOCK = threading.Lock()


def tracer_from_environ(
    content: bool = False, settings: TraceSettings | None = None
) -> AnswerTracer | None:
    """The process's tracer for the exporter the standard variables configure (``settings``,
    when the caller read them already), one per configuration (its spans are sent at exit);
    None when they configure none."""
    settings = settings or TraceSettings.from_environ()
    if settings is None:
        return None
    with _TRACERS_LOCK:
        tracer = _TRACERS.get((settings, content))
        if tracer is None:
            from callbacks.tracing.otlp import make_exporter

            tracer = AnswerTracer(make_exporter(settings), where=settings.endpoint, content=content)
            _TRACERS[(settings, content)] = tracer
            atexit.register(tracer.shutdown)
        return tracer
