"""The span specs as OpenTelemetry's SDK spans, sent by its OTLP exporters or written as OTLP
JSON lines.

Imported only when something is traced or exported: the SDK costs about 60 ms to import and
its exporters twice that, which no answer untraced and no command line pays.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import IO, Any

from google.protobuf.json_format import MessageToDict
from opentelemetry import trace as trace_api
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import Event as SpanEvent
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Status, StatusCode
from opentelemetry.util.types import AnyValue

from callbacks.tracing.settings import TraceSettings
from callbacks.tracing.spans import SpanSpec

__all__ = [
    "EXPORTER_PROBLEMS",
    "SCOPE_NAME",
    "json_line",
    "make_exporter",
    "our_resource",
    "readable_spans",
    "write_json_lines",
]

SCOPE_NAME = "reactome-answers"

# The loggers OpenTelemetry's OTLP exporters report each failed batch (and each retry) on.
_EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http._common",
    "opentelemetry.exporter.otlp.common.http",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
)


class _Held(logging.Filter):
    """Keeps the exporters' lines, one per retry and per failed batch, off stderr: the
    shipper says once that export fails and once that it works again, and the command line
    says it in its error; the first problem since :attr:`first` was cleared is kept for
    them to name (the first says why, connection refused say; the last only that it gave up)."""

    def __init__(self) -> None:
        super().__init__()
        self.first: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING and self.first is None:
            self.first = " ".join(record.getMessage().split())[:300]
        return False


EXPORTER_PROBLEMS = _Held()
for _name in _EXPORTER_LOGGERS:
    logging.getLogger(_name).addFilter(EXPORTER_PROBLEMS)
_KINDS = {
    "server": trace_api.SpanKind.SERVER,
    "internal": trace_api.SpanKind.INTERNAL,
    "client": trace_api.SpanKind.CLIENT,
}


@functools.cache  # read from the installed metadata: a parse of a file, once
def _our_version() -> str:
    try:
        return version("reactome-answers")
    except PackageNotFoundError:  # pragma: no cover - run from a checkout not installed
        return "unknown"


def our_resource() -> Resource:
    """The process as a resource: ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` as
    the SDK reads them, and ``reactome-answers`` where they name no service."""
    found = Resource.create()
    named = str(found.attributes.get(SERVICE_NAME, ""))
    ours: dict[str, str] = {SERVICE_VERSION: _our_version()}
    if not named or named.startswith("unknown_service"):
        ours[SERVICE_NAME] = SCOPE_NAME
    merged = found.merge(Resource(ours))
    return _HashedOnce(merged.attributes, merged.schema_url)


class _HashedOnce(Resource):
    """A resource whose hash is worked out once: the SDK's encoder groups every span by its
    resource, and a resource hashes by dumping its attributes as JSON, each time; ours never
    changes (a tenth of encoding an answer's spans)."""

    def __init__(self, attributes: Mapping[str, AnyValue], schema_url: str | None = None) -> None:
        super().__init__(attributes, schema_url)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash


def _context(trace_id: str, span_id: str, *, remote: bool = False) -> trace_api.SpanContext:
    return trace_api.SpanContext(
        trace_id=int(trace_id, 16),
        span_id=int(span_id, 16),
        is_remote=remote,
        trace_flags=trace_api.TraceFlags(trace_api.TraceFlags.SAMPLED),
    )


def readable_spans(
    specs: Sequence[SpanSpec], resource: Resource, trace_state: str | None = None
) -> list[ReadableSpan]:
    """The SDK's spans for ``specs``: the root's parent is the caller's span (remote), every
    other span's parent is one of ours."""
    scope = InstrumentationScope(SCOPE_NAME, _our_version())
    ours = {spec.span_id for spec in specs}
    state = trace_api.TraceState.from_header([trace_state]) if trace_state else None
    spans = []
    for spec in specs:
        context = _context(spec.trace_id, spec.span_id)
        if state is not None:
            context = trace_api.SpanContext(
                context.trace_id, context.span_id, False, context.trace_flags, state
            )
        parent = None
        if spec.parent_span_id is not None:
            remote = spec.parent_span_id not in ours
            parent = _context(spec.trace_id, spec.parent_span_id, remote=remote)
        status = (
            Status(StatusCode.ERROR, f"{spec.error[0]}: {spec.error[1]}")
            if spec.error
            else Status(StatusCode.UNSET)
        )
        spans.append(
            ReadableSpan(
                name=spec.name,
                context=context,
                parent=parent,
                resource=resource,
                attributes=dict(spec.attributes),
                events=[
                    SpanEvent(event.name, dict(event.attributes), event.time_ns)
                    for event in spec.events
                ],
                kind=_KINDS[spec.kind],
                status=status,
                start_time=spec.start_ns,
                end_time=spec.end_ns,
                instrumentation_scope=scope,
            )
        )
    return spans


def make_exporter(settings: TraceSettings) -> SpanExporter:
    """The SDK's OTLP exporter for the settings' protocol; it reads the endpoint, headers,
    timeout and compression from the standard variables itself."""
    if settings.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        return GrpcExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


# OTLP/JSON writes trace and span ids as hex, where protobuf's JSON mapping writes bytes as
# base64 (the OTLP specification, "JSON Protobuf Encoding").
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _hex_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: base64.b64decode(item).hex() if key in _ID_FIELDS and isinstance(item, str)
            else _hex_ids(item)
            for key, item in value.items()
        }  # fmt: skip
    if isinstance(value, list):
        return [_hex_ids(item) for item in value]
    return value


def json_line(spans: Sequence[ReadableSpan]) -> str:
    """One OTLP/JSON ``ExportTraceServiceRequest`` on one line, as the OpenTelemetry
    Collector's file exporter writes and its ``otlpjsonfile`` receiver reads."""
    request = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    return json.dumps(_hex_ids(request), separators=(",", ":"), ensure_ascii=False)


def write_json_lines(stream: IO[str], spans: Sequence[ReadableSpan]) -> None:
    """``spans`` as one line of ``stream``, flushed: a collector tailing the file reads
    each answer as it is written."""
    stream.write(json_line(spans) + "\n")
    stream.flush()
