"""The HTTP backend: one shared pipeline behind its surfaces, one module of
:mod:`app.http.routes` each, included by :func:`include_surfaces`.

- :mod:`app.http.routes.native`: ``POST /v1/answer``, ``POST /v1/answer/stream``,
  ``GET /v1/collections``, ``GET /v1/limits``;
- :mod:`app.http.routes.openai_chat`: ``GET /v1/models``, ``POST /v1/chat/completions`` (the
  OpenAI protocol);
- :mod:`app.http.routes.ai_sdk`: ``POST /api/chat`` (the Vercel AI SDK's UI message stream);
- :mod:`app.http.routes.health`: ``GET``/``HEAD /healthz``, ``GET /metrics``;
- :mod:`app.http.routes.feedback`: ``POST /v1/answers/{request_id}/feedback``;
- :mod:`app.http.routes.log_page`: ``GET /logs/{request_id}``, one answer's log as a page, and
  ``GET /v1/logs/{request_id}``, its data;
- :mod:`app.http.routes.web`: ``GET /``, the reference web client (``app/web/``), plain
  JavaScript with no build step;
- :mod:`app.http.routes.mcp`: ``/mcp``, the tools of the Model Context Protocol over its
  Streamable HTTP transport.

OpenAPI is at ``/docs``. A route is given the pipeline, the settings, the catalog and the
metrics by dependencies (:mod:`app.http.deps`) over what :func:`create_app` shares on
``app.state``; the routes that answer are :class:`app.http.middleware.access.AnswerRoute`,
which the answer cap finds by itself. :func:`create_app` builds the shared state, installs the
middlewares and error handlers, and includes the routers.

The pipeline is built once at start-up and serves concurrent requests, each with its own
handler and ``request_id``. A client that disconnects cancels its generation, streamed or
not (:mod:`app.http.disconnect`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Collection
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from app.http.deps import share
from app.http.errors import add_error_handlers
from app.http.heap import refreeze, serving_heap
from app.http.middleware.access import (
    AccessControl,
    AnswerCap,
    AnswerSlots,
    RateLimiter,
    RequestLimit,
    SlotLimit,
    answer_paths,
)
from app.http.middleware.metrics import ServerMetrics
from app.http.middleware.shared_limits import SharedLimits
from app.http.middleware.transport import BodyLimits, RequireJSON
from app.http.models import AnswerRequest, answer_request_model
from app.http.protocols.mcp_wire import MCP_PATH
from app.http.routes import ai_sdk, feedback, health, openai_chat
from app.http.routes.log_page import log_page_router
from app.http.routes.mcp import MCPTransport, add_mcp
from app.http.routes.native import KEEP_ALIVE_S, STREAM_HEADERS, limits_router, native_router
from app.http.routes.web import add_web_client
from app.http.settings import ServerSettings, load_server_settings
from pipelines.catalog.catalog import Catalog, catalog_for
from pipelines.core.errors import ReactomeAnswersError
from pipelines.core.redaction import redact_also, warn_not_done
from pipelines.core.settings import Settings, load_settings
from pipelines.language import detect_language
from pipelines.pipeline import AnswerPipeline

__all__ = [
    "KEEP_ALIVE_S",
    "RETIRED_EVERY_S",
    "STREAM_HEADERS",
    "AnswerRequest",
    "add_access_control",
    "add_answer_cap",
    "add_body_limits",
    "add_cors",
    "create_app",
    "shared_limits_for",
    "worker_app",
]

# How often a server looks for collection versions an ingest retired (listing the store's
# collections is cheap): they go within this long of their grace.
RETIRED_EVERY_S = 10.0


def add_body_limits(app: FastAPI, settings: ServerSettings) -> None:
    """Bodies over ``settings.max_body_bytes``, or slower than ``body_timeout_s``, are refused
    whatever their framing (:class:`app.http.middleware.transport.BodyLimits`)."""
    app.add_middleware(
        BodyLimits, max_bytes=settings.max_body_bytes, timeout_s=settings.body_timeout_s
    )


def shared_limits_for(settings: ServerSettings, metrics: ServerMetrics) -> SharedLimits | None:
    """The Redis the limits are counted in across the fleet, when the settings name one
    (:mod:`app.http.middleware.shared_limits`), reporting to ``metrics``; None counts them in the
    process."""
    if settings.redis_url is None:
        return None
    return SharedLimits(
        settings.redis_url.get_secret_value(),
        prefix=settings.redis_prefix,
        when_down=settings.when_redis_down,
        lease_s=settings.answer_lease_s,
        on_without_redis=metrics.without_redis,
        on_change=metrics.limits_shared_now,
    )


def add_access_control(
    app: FastAPI,
    settings: ServerSettings,
    on_reject: Callable[[str], None] | None = None,
    shared: SharedLimits | None = None,
    answering: Collection[str] = (),
) -> None:
    """API keys and the rate limit, as the settings ask
    (:class:`app.http.middleware.access.AccessControl`), checked before the body is read,
    counted in ``shared`` when given; nothing when neither is set. ``answering``: the answering
    routes' paths, refused while ``shared`` cannot be reached if the settings say so."""
    keys = settings.api_key_set

    def per_minute(name: str, limit: int) -> RequestLimit:
        return RateLimiter(limit) if shared is None else shared.buckets(name, limit)

    rate = per_minute("rate", settings.rate_limit) if settings.rate_limit else None
    failures = per_minute("auth", settings.auth_failures_per_minute) if keys else None
    if keys or rate is not None:
        app.add_middleware(
            AccessControl,
            keys=keys,
            rate=rate,
            auth_failures=failures,
            on_reject=on_reject,
            answering=answering,
        )


def add_answer_cap(
    app: FastAPI,
    settings: ServerSettings,
    paths: Collection[str],
    on_reject: Callable[[str], None] | None = None,
    shared: SharedLimits | None = None,
) -> None:
    """The cap on answers in progress over ``paths``
    (:class:`app.http.middleware.access.AnswerCap`), when set, counted in ``shared`` when given.
    Added before :func:`add_body_limits`, so that it runs after the body has arrived."""
    limit = settings.max_concurrent_answers
    if limit:
        slots: SlotLimit = AnswerSlots(limit) if shared is None else shared.slots(limit)
        app.add_middleware(AnswerCap, slots=slots, paths=paths, on_reject=on_reject)


def add_cors(app: FastAPI, settings: ServerSettings) -> None:
    """Allow the origins in ``settings.cors_origins`` (comma separated); none by default."""
    origins = [origin.strip() for origin in settings.cors_origins.split(",") if origin.strip()]
    if origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["GET", "POST"],
            allow_headers=["*"],
        )


def include_surfaces(
    app: FastAPI, server: ServerSettings, pipeline: AnswerPipeline, catalog: Catalog
) -> MCPTransport:
    """Every surface of ``serve``, in one place: one router per module of
    :mod:`app.http.routes` (its prefix and OpenAPI tags its own), the web client's page and
    assets, and MCP's transport, which is returned for the lifespan to run."""
    # The native body's ``collections`` are this catalog's names; the log page, with API
    # keys, leaves saying whether an id is logged to the data route behind them.
    app.include_router(native_router(answer_request_model(catalog.names)))
    app.include_router(limits_router)
    app.include_router(openai_chat.router)
    app.include_router(ai_sdk.router)
    app.include_router(feedback.router)
    app.state.rates_answers = True  # GET /v1/limits tells the web client it may rate answers
    app.include_router(log_page_router(keyed=bool(server.api_key_set)))
    app.include_router(health.router)
    add_web_client(app)
    return add_mcp(app, pipeline, catalog)


def create_app(
    settings: Settings | None = None,
    *,
    pipeline: AnswerPipeline | None = None,
    server: ServerSettings | None = None,
) -> FastAPI:
    """The application; ``pipeline`` may be given (tests, embedders), else it is built.
    ``server`` (limits, keys) defaults to what the environment says."""
    settings = settings or load_settings()
    server = server or load_server_settings()
    # The server's own API keys, pasted into a question, are redacted from the start event
    # and the logs like any credential: no pattern or variable name would reveal them.
    redact_also(server.api_key_set | server.redis_passwords)
    shared = pipeline or AnswerPipeline(settings)
    catalog = catalog_for(shared.settings)  # the names the pipeline itself accepts

    app = FastAPI(
        title="reactome-answers",
        summary="Answers about human biology from Reactome, with citations that always point "
        "at real Reactome entities.",
        lifespan=_lifespan,
    )
    metrics = ServerMetrics()
    shared.observers.append(metrics)
    if shared.tracer is not None:
        shared.tracer.shipper.on_dropped.append(metrics.spans_were_dropped)
    limits = shared_limits_for(server, metrics)
    share(app, settings, server, pipeline=shared, catalog=catalog, metrics=metrics)
    app.state.shared_limits = limits

    app.state.mcp = include_surfaces(app, server, shared, catalog)

    # Starlette runs the middleware added last first: metrics, CORS, keys and rate, the body
    # read whole, JSON only, then the answer cap, so a stalled body never holds a slot.
    answering = answer_paths(app.routes) | {MCP_PATH}  # the answer tool's calls, at /mcp
    add_answer_cap(app, server, answering, metrics.rejected, limits)
    app.add_middleware(RequireJSON)
    add_body_limits(app, server)
    # Inside CORS: a preflight needs no key.
    add_access_control(app, server, metrics.rejected, limits, answering)
    add_cors(app, server)
    app.add_middleware(metrics.middleware)  # outermost: it counts every request and status

    add_error_handlers(app)
    return app


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    # Load the models and open the store once, before the first request; a store that is
    # down is reported by /healthz rather than stopping the server.
    shared: AnswerPipeline = app.state.pipeline
    with contextlib.suppress(ReactomeAnswersError):
        app.state.warm = (shared.models, shared.retriever)
        # The language detector's model (about half a second to load), off the event loop.
        await asyncio.to_thread(detect_language, "warm up")
        # An instance sharing a Chroma server builds the live versions' keyword indexes
        # and chunk tables before it serves, so its first answers rank like the rest.
        await asyncio.to_thread(shared.operator.collection_releases)
    tasks = [asyncio.create_task(_housekeeping_every(shared, RETIRED_EVERY_S))]
    limits: SharedLimits | None = app.state.shared_limits
    if limits is not None:
        tasks.append(asyncio.create_task(limits.keep_up()))
    try:
        # Loaded now, what the process holds is out of the collector's way while it serves.
        with serving_heap():
            async with app.state.mcp.running():
                yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if limits is not None:
            await limits.aclose()


async def _housekeeping_every(shared: AnswerPipeline, seconds: float) -> None:
    live: dict[str, Any] | None = None  # the versions that answered at the last look
    while True:
        try:
            await asyncio.to_thread(shared.operator.remove_retired_versions)
            # A version an ingest made live gets its local indexes here, between requests,
            # rather than in the first request that searches it.
            releases = await asyncio.to_thread(shared.operator.collection_releases)
            versions = {name: release.get("version") for name, release in releases.items()}
            if live is not None and versions != live:
                # The replaced versions' indexes were frozen with the rest: freed now.
                refreeze()
            live = versions
        except Exception as error:  # a pipeline from outside may raise: keep looking
            warn_not_done("collection housekeeping not done", error)
        await asyncio.sleep(seconds)


def worker_app() -> FastAPI:
    """The application of one ``serve --workers`` process: its settings come from the
    environment, where ``serve`` put the options it was given."""
    from app.http.middleware.transport import configure_protocol

    server = load_server_settings()
    configure_protocol(server)
    return create_app(load_settings(), server=server)
