"""Recorded event logs as traces (``reactome-answers logs export --otlp``): the spans the live
answer made, with the recorded times, sent to a collector or written as OTLP JSON lines.

A log written while tracing was on names its trace, so its spans land in that very trace with
the same ids; a log of an answer that was not traced gets ids derived from its request id, so
exporting it again sends the same spans rather than a second copy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from callbacks.events import DoneEvent
from callbacks.log import LogContents, read_log
from callbacks.tracing.spans import AnswerRecords, answer_spans
from pipelines.core.errors import ConfigurationError, EventLogError
from pipelines.core.redaction import redact_secrets, secret_redactor

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = ["ExportSummary", "TraceExportError", "export_logs"]

# Spans per export call: a few dozen answers, well under a collector's request size limit.
_BATCH_SPANS = 512


class TraceExportError(ConfigurationError):
    """The collector did not take the spans (down, refusing, or not a collector)."""


@dataclass
class ExportSummary:
    logs: int = 0
    spans: int = 0
    # (the log, why it was skipped): unreadable, or not of the state asked for
    skipped: list[tuple[Path, str]] = field(default_factory=list)


def export_logs(
    paths: Iterable[Path],
    *,
    content: bool = False,
    state: str | None = None,
    output: IO[str] | None = None,
    exporter: SpanExporter | None = None,
    where: str = "the collector",
    progress: Callable[[int], None] | None = None,
) -> ExportSummary:
    """Each log's spans to ``output`` (one OTLP/JSON line per log) or to ``exporter``, in
    batches; ``state`` keeps only answers that ended so (``incomplete``: without ``done``).
    A log that cannot be read is skipped and named in the summary; a batch the collector
    refuses is a :class:`TraceExportError`, after the batches it took."""
    from callbacks.tracing.otlp import our_resource, readable_spans, write_json_lines

    if (output is None) == (exporter is None):
        raise ValueError("give exactly one of output and exporter")
    resource = our_resource()
    redact = secret_redactor()
    summary = ExportSummary()
    batch: list[ReadableSpan] = []
    for done, path in enumerate(paths, start=1):
        try:
            contents = read_log(path)
        except EventLogError as error:
            summary.skipped.append((path, error.message))
            continue
        if state is not None and _state(contents) != state:
            continue
        records = AnswerRecords.from_log(contents)
        spans = readable_spans(answer_spans(records, content=content, redact=redact), resource)
        summary.logs += 1
        summary.spans += len(spans)
        if output is not None:
            write_json_lines(output, spans)
        else:
            batch.extend(spans)
            if len(batch) >= _BATCH_SPANS:
                _send(exporter, batch, where)
                batch = []
        if progress is not None:
            progress(done)
    if batch:
        _send(exporter, batch, where)
    return summary


def _state(contents: LogContents) -> str:
    """How the logged answer ended, as ``logs list --state`` names it."""
    done = contents.events[-1] if contents.events else None
    return done.data.state if isinstance(done, DoneEvent) else "incomplete"


def _send(exporter: SpanExporter | None, batch: list[ReadableSpan], where: str) -> None:
    from opentelemetry.sdk.trace.export import SpanExportResult

    from callbacks.tracing.otlp import EXPORTER_PROBLEMS

    assert exporter is not None
    EXPORTER_PROBLEMS.first = None
    if exporter.export(batch) != SpanExportResult.SUCCESS:
        why = f" ({redact_secrets(EXPORTER_PROBLEMS.first)})" if EXPORTER_PROBLEMS.first else ""
        raise TraceExportError(
            f"{where} did not take {len(batch)} spans{why}",
            fix="check that a collector listens there (OTEL_EXPORTER_OTLP_ENDPOINT, "
            "OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_EXPORTER_OTLP_HEADERS), or write them to a "
            "file with --output",
        )
