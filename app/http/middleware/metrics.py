"""``GET /metrics``: the server's counters and histograms in the Prometheus text format.

- ``reactome_answers_requests_total{endpoint, state, status}``: every request, by endpoint
  (the known paths, else ``other``), the answer's state (``answered``, ``nothing_found``,
  ``refused``, ``failed``; empty for requests that answer nothing) and HTTP status;
- ``reactome_answers_first_token_seconds``, ``reactome_answers_answer_seconds`` and
  ``reactome_answers_retrieval_seconds``: histograms from each answer's ``done`` timings;
- ``reactome_answers_answers_in_progress``: a gauge, summed over worker processes;
- ``reactome_answers_tokens_streamed_total``: answer tokens sent;
- ``reactome_answers_rejections_total{reason}``: requests refused before they were read
  (``unauthorized``, ``auth_failures``, ``rate_limited``, ``too_many_answers``,
  ``limits_unavailable``);
- ``reactome_answers_limits_without_redis_total{outcome}``: limit checks made while the
  limits' Redis could not be reached (``per_process``: counted in the process; ``refused``);
- ``reactome_answers_limits_shared{pid}``: per live worker, 1 while it counts the limits in
  their Redis, 0 while it cannot reach it (only with ``REACTOME_ANSWERS_REDIS_URL``);
- ``reactome_answers_feedback_total{rating}``: answers rated ``up`` and ``down``, each answer
  counted once, under its latest rating: a gauge, since a change moves the answer from one
  count to the other (summed over workers, dead ones included, and over instances by the
  scraper; an instance that saw only the change of a rating another gave shows -1 and +1);
- ``reactome_answers_trace_spans_dropped_total``: answers' spans lost on the way to the
  tracing collector (its queue full, or the collector down, slow or refusing; only with
  tracing on: docs/operations.md#traces).

Under ``serve --workers N`` each worker writes its figures into the folder named by
``PROMETHEUS_MULTIPROC_DIR`` (``serve`` makes one per run) and a scrape of any worker adds
up all of them: prometheus-client's multiprocess mode.
"""

from __future__ import annotations

import contextlib
import os
import re
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.http.protocols.mcp_wire import MCP_PATH
from callbacks.events import DoneData

__all__ = ["CONTENT_TYPE_LATEST", "ServerMetrics"]

ENDPOINTS = frozenset(
    {
        "/",
        "/healthz",
        "/metrics",
        "/v1/answer",
        "/v1/answer/stream",
        "/v1/chat/completions",
        "/v1/models",
        "/v1/collections",
        "/v1/limits",
        "/api/chat",
        MCP_PATH,
    }
)
# Paths that hold an id, counted under their template (an id per label would grow for ever).
_TEMPLATES = (
    (re.compile(r"/v1/answers/[^/]+/feedback"), "/v1/answers/{request_id}/feedback"),
    (re.compile(r"/v1/logs/[^/]+"), "/v1/logs/{request_id}"),
    (re.compile(r"/logs/[^/]+"), "/logs/{request_id}"),
)
_SECONDS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
# The answer state of the request being served, filled in when its answer is done (the
# answer runs in tasks of the request, which share this context).
_REQUEST_STATE: ContextVar[dict[str, str] | None] = ContextVar("request_state", default=None)


def _multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


class ServerMetrics:
    """One application's metrics: an answer observer for its pipeline, a hook for refusals,
    and the middleware that counts requests."""

    def __init__(self) -> None:
        # Each application its own registry: several may live in one process (tests).
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self.requests = Counter(
            "reactome_answers_requests",
            "Requests by endpoint, answer state and HTTP status",
            ["endpoint", "state", "status"],
            registry=registry,
        )
        self.first_token = self._seconds(
            "first_token", "From the start of an answer to its first token"
        )
        self.total = self._seconds("answer", "From the start of an answer to its done event")
        self.retrieval = self._seconds(
            "retrieval", "From the start of an answer to the end of its retrieval run"
        )
        self.in_progress = Gauge(
            "reactome_answers_answers_in_progress",
            "Answers being written now",
            multiprocess_mode="livesum",
            registry=registry,
        )
        self.tokens = Counter(
            "reactome_answers_tokens_streamed", "Answer tokens sent", registry=registry
        )
        self.rejections = Counter(
            "reactome_answers_rejections",
            "Requests refused before they were read, by reason",
            ["reason"],
            registry=registry,
        )
        self.without_redis_checks = Counter(
            "reactome_answers_limits_without_redis",
            "Limit checks made while the limits' Redis could not be reached, by what was done: "
            "counted in the process, or refused",
            ["outcome"],
            registry=registry,
        )
        # Made by the first report of it: a server without Redis shows no such gauge, rather
        # than a 0 that an alert on it would take for an outage.
        self.limits_shared: Gauge | None = None
        # Named as the counter it was, so that dashboards keep working; a gauge because a
        # changed rating takes its answer out of the other count. "sum" keeps the figures
        # of workers that died: the ratings they counted still stand.
        self.feedback = Gauge(
            "reactome_answers_feedback_total",
            "Answers rated, by their latest rating",
            ["rating"],
            multiprocess_mode="sum",
            registry=registry,
        )

        self.spans_dropped = Counter(
            "reactome_answers_trace_spans_dropped",
            "Answers' spans lost on the way to the tracing collector",
            registry=registry,
        )

    def _seconds(self, what: str, documentation: str) -> Histogram:
        return Histogram(
            f"reactome_answers_{what}_seconds",
            documentation,
            buckets=_SECONDS,
            registry=self.registry,
        )

    # --- the pipeline's observer ------------------------------------------------------------

    def answer_started(self) -> None:
        self.in_progress.inc()

    def answer_finished(self, done: DoneData | None, tokens: int) -> None:
        self.in_progress.dec()
        self.tokens.inc(tokens)
        if done is None:
            return
        timings = done.timings
        if timings is not None:
            self.total.observe(timings.total_ms / 1000)
            if timings.first_token_ms is not None:
                self.first_token.observe(timings.first_token_ms / 1000)
            if timings.retrieval_ms is not None:
                self.retrieval.observe(timings.retrieval_ms / 1000)
        state = _REQUEST_STATE.get()
        if state is not None:
            state["state"] = done.state

    def spans_were_dropped(self, spans: int) -> None:
        self.spans_dropped.inc(spans)

    def rejected(self, reason: str) -> None:
        self.rejections.labels(reason=reason).inc()

    def without_redis(self, outcome: str) -> None:
        self.without_redis_checks.labels(outcome=outcome).inc()

    def limits_shared_now(self, shared: bool) -> None:
        if self.limits_shared is None:
            self.limits_shared = Gauge(
                "reactome_answers_limits_shared",
                "1 while this process counts the limits in their Redis, 0 while it cannot",
                multiprocess_mode="liveall",
                registry=self.registry,
            )
        self.limits_shared.set(1 if shared else 0)

    def feedback_given(self, rating: str, replaced: str | None = None) -> None:
        """An answer rated ``rating``, its earlier rating ``replaced`` (None: its first)."""
        if rating == replaced:
            return  # the same rating again (a comment added to it): still one answer
        if replaced is not None:
            self.feedback.labels(rating=replaced).dec()
        self.feedback.labels(rating=rating).inc()

    # --- exposition -------------------------------------------------------------------------

    def render(self) -> bytes:
        folder = _multiprocess_dir()
        if folder is None:
            return generate_latest(self.registry)
        _forget_dead_workers(folder)
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry)

    def middleware(self, app: ASGIApp) -> ASGIApp:
        return _CountRequests(app, self)


def _forget_dead_workers(folder: str) -> None:
    """Drop the live gauges of workers that died (a crash, ``kill -9``; uvicorn starts
    another): otherwise their last answers in progress, and whether they counted the limits
    in Redis, would be added in for ever."""
    for path in Path(folder).glob("gauge_live*_*.db"):
        pid = path.stem.rsplit("_", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            # Another worker's scrape may be removing the same files right now.
            with contextlib.suppress(FileNotFoundError):
                mark_process_dead(int(pid), folder)  # type: ignore[no-untyped-call]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _endpoint(path: str) -> str:
    if path in ENDPOINTS:
        return path
    return next((name for shape, name in _TEMPLATES if shape.fullmatch(path)), "other")


class _CountRequests:
    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        found: dict[str, Any] = {"status": "0"}
        state: dict[str, str] = {}
        token = _REQUEST_STATE.set(state)

        async def noting_status(message: Message) -> None:
            if message["type"] == "http.response.start":
                found["status"] = str(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, noting_status)
        except Exception:
            # Unhandled: Starlette's outermost error middleware answers 500 after this one
            # has returned, so its status is never seen here. Counted as what it becomes.
            if found["status"] == "0":
                found["status"] = "500"
            raise
        finally:
            _REQUEST_STATE.reset(token)
            path = scope.get("path", "")
            self.metrics.requests.labels(
                endpoint=_endpoint(path),
                state=state.get("state", ""),
                status=found["status"],
            ).inc()
