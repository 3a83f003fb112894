"""Answers' spans sent from a thread of their own, so that no collector can slow an answer.

Each answer hands over a function that builds its spans with the redaction it is given (one
for each batch: the secrets are looked up once); the thread builds them, batches
them and calls the exporter, as the SDK's batch processor does: when 64 answers wait, when
the oldest has waited ``OTEL_BSP_SCHEDULE_DELAY`` (5 s), or when someone flushes (at exit,
say). Drawing the spans later rather than as each answer ends keeps that work from
competing with the end of the answer it is for.

The queue is bounded: when the collector is down or slow and it fills, an answer's spans are
dropped, counted (``reactome_answers_trace_spans_dropped_total``) and never waited for. One
line goes to stderr when export starts failing and one when it recovers, however many
batches fail in between; the exporter's own log lines, one per retry and per failed batch,
are held back (the first problem it names is in ours).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pipelines.core.redaction import SecretRedactor, one_line, redact_secrets, secret_redactor

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = ["SpanShipper"]

SpanBuilder = Callable[[SecretRedactor], Sequence["ReadableSpan"]]

# Answers taken from the queue at once: their spans go out in as few calls as fit a batch.
_ANSWERS_PER_TAKE = 64


def _warn(line: str) -> None:
    print(f"reactome-answers: {line}", file=sys.stderr, flush=True)


class SpanShipper:
    """Builds and exports answers' spans in a daemon thread; see the module's docstring.

    ``max_answers`` bounds the answers waiting; ``batch_spans`` is how many spans one export
    call carries at most (an answer's spans are never split)."""

    def __init__(
        self,
        exporter: SpanExporter,
        *,
        where: str,
        max_answers: int = 512,
        batch_spans: int = 512,
        delay_s: float = 5.0,
    ) -> None:
        self.exporter = exporter
        self.where = where
        self.max_answers = max_answers
        self.batch_spans = batch_spans
        self.delay_s = delay_s
        self.exported = 0  # spans the collector took
        self.dropped = 0  # spans lost: the queue was full, or the export failed
        self.failing = False
        # Told of each drop, with how many spans (the server's /metrics counter); called from
        # the shipping thread or the answer's, so it must be quick and thread-safe.
        self.on_dropped: list[Callable[[int], None]] = []
        # (when it was queued, time.monotonic; its spans to draw; how many), oldest first
        self._waiting: deque[tuple[float, SpanBuilder, Callable[[], int]]] = deque()
        self._busy = 0  # answers taken from the queue and not yet exported
        self._flushing = 0  # callers waiting in flush(): the queue goes out now
        self._changed = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def submit(self, build: SpanBuilder, count: Callable[[], int]) -> None:
        """Queue an answer's spans; never blocks. A full queue drops them, counted by
        ``count`` (how many spans ``build`` would draw: cheap, on the caller's thread)."""
        with self._changed:
            if self._stopped:
                return
            if len(self._waiting) < self.max_answers:
                self._waiting.append((time.monotonic(), build, count))
                if len(self._waiting) >= _ANSWERS_PER_TAKE:
                    self._changed.notify_all()  # a batch is full; otherwise it waits its delay
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="reactome-answers-spans", daemon=True
                    )
                    self._thread.start()
                return
        self._dropped(count())

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until every answer queued so far was exported or dropped; False when
        ``timeout_s`` passed first."""
        with self._changed:
            self._flushing += 1
            self._changed.notify_all()
            try:
                return self._changed.wait_for(
                    lambda: not self._waiting and not self._busy, timeout=timeout_s
                )
            finally:
                self._flushing -= 1

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Export what is queued (for at most ``timeout_s``), then stop."""
        self.flush(timeout_s)
        with self._changed:
            self._stopped = True
            self._changed.notify_all()
        # Already shut, or its connection already gone: nothing more to send.
        with contextlib.suppress(Exception):
            self.exporter.shutdown()

    def _due(self) -> float | None:
        """Seconds until the queue should go out (0: now); None while it is empty."""
        if not self._waiting:
            return None
        if self._flushing or self._stopped or len(self._waiting) >= _ANSWERS_PER_TAKE:
            return 0.0
        return max(0.0, self._waiting[0][0] + self.delay_s - time.monotonic())

    def _take(self) -> list[tuple[SpanBuilder, Callable[[], int]]] | None:
        """The answers to send next, once a batch is full, the oldest has waited its delay,
        or someone flushes; None once stopped with nothing left."""
        with self._changed:
            while True:
                due = self._due()
                if due == 0.0:
                    break
                if due is None and self._stopped:
                    return None
                self._changed.wait(timeout=due)
            taken = [self._waiting.popleft()[1:]]
            while self._waiting and len(taken) < _ANSWERS_PER_TAKE:
                taken.append(self._waiting.popleft()[1:])
            self._busy += len(taken)
            return taken

    def _run(self) -> None:
        while True:
            taken = self._take()
            if taken is None:
                return
            try:
                batch: list[ReadableSpan] = []
                redact = self._redactor()
                if redact is None:
                    self._dropped(sum(count() for _, count in taken))
                    continue
                for build, _ in taken:
                    spans = self._built(build, redact)
                    if batch and len(batch) + len(spans) > self.batch_spans:
                        self._export(batch)
                        batch = []
                    batch.extend(spans)
                if batch:
                    self._export(batch)
            except Exception as error:  # the thread outlives whatever one batch raises
                _warn(f"warning: a batch of traces was not sent ({one_line(error)})")
            finally:
                with self._changed:
                    self._busy -= len(taken)
                    self._changed.notify_all()

    def _dropped(self, spans: int) -> None:
        with self._changed:
            self.dropped += spans
        for listener in list(self.on_dropped):
            listener(spans)

    @staticmethod
    def _redactor() -> SecretRedactor | None:
        """The batch's redaction; None (the batch is not drawn) should making it fail: the
        thread must outlive anything an answer's trace can raise."""
        try:
            return secret_redactor()
        except Exception as error:
            _warn(f"warning: a batch of traces was not drawn ({one_line(error)})")
            return None

    @staticmethod
    def _built(build: SpanBuilder, redact: SecretRedactor) -> Sequence[ReadableSpan]:
        try:
            return build(redact)
        except Exception as error:  # a trace is never worth more than a line
            _warn(f"warning: an answer's trace was not drawn ({one_line(error)})")
            return ()

    def _export(self, batch: list[ReadableSpan]) -> None:
        from opentelemetry.sdk.trace.export import SpanExportResult

        from callbacks.tracing.otlp import EXPORTER_PROBLEMS

        EXPORTER_PROBLEMS.first = None
        try:
            result = self.exporter.export(batch)
            problem = EXPORTER_PROBLEMS.first
        except Exception as error:
            result, problem = None, one_line(error)
        with self._changed:
            if result == SpanExportResult.SUCCESS:
                self.exported += len(batch)
                if self.failing:
                    self.failing = False
                    _warn(f"trace export to {self.where} works again")
                return
            already = self.failing
            self.failing = True
        self._dropped(len(batch))
        if already:
            return
        why = f" ({redact_secrets(problem)})" if problem else ""
        _warn(
            f"warning: trace export to {self.where} is failing{why}; spans are dropped and "
            "counted until it works again"
        )
