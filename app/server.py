"""The HTTP backend: JSON and Server-Sent Events over one shared pipeline.

- ``POST /v1/answer``: the ``done`` event's data plus ``request_id``, as JSON.
- ``POST /v1/answer/stream``: every event as SSE (``id: seq``, ``event: type``, ``data:`` the
  whole event as JSON, one line), written by :func:`callbacks.events.to_sse`, with keep-alive
  comments and headers that stop proxies from buffering or caching.
- ``GET /healthz``, ``GET /v1/collections``; OpenAPI at ``/docs``.
- ``GET /v1/models``, ``POST /v1/chat/completions``: the OpenAI protocol (``app/_openai_api.py``).
- ``POST /api/chat``: the Vercel AI SDK's UI message stream (``app/_ai_sdk.py``).
- ``GET /``: the reference web client (``app/web/``), plain JavaScript with no build step.

The pipeline is built once at start-up and serves concurrent requests, each with its own
handler and ``request_id``. A client that disconnects cancels its generation, streamed or
not (:mod:`app._disconnect`).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal, TypeVar

import anyio
from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator
from sse_starlette import EventSourceResponse

from app._access import AccessControl, AnswerCap, AnswerSlots, RateLimiter
from app._ai_sdk import add_ai_sdk_routes
from app._disconnect import CLIENT_LEFT_STATUS, events_unless_client_leaves
from app._errors import add_error_handlers, error_response, http_status_for
from app._http import BodyLimits, RequireJSON
from app._metrics import CONTENT_TYPE_LATEST, ServerMetrics
from app._openai_api import add_openai_routes
from app._web import add_web_client
from callbacks.events import to_sse
from pipelines.catalog.catalog import catalog_for
from pipelines.core.errors import ReactomeAnswersError
from pipelines.core.redaction import redact_secrets, warn_not_done
from pipelines.core.settings import Settings, load_settings
from pipelines.pipeline import AnswerPipeline, answer_result

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
    "worker_app",
]

# Proxies (nginx and friends) must pass each event on at once and never cache a stream.
STREAM_HEADERS = {"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"}
KEEP_ALIVE_S = 15
# How often a server looks for collection versions an ingest retired (listing the store's
# collections is cheap): they go within this long of their grace.
RETIRED_EVERY_S = 10.0


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant"]
    content: str = Field(max_length=20_000)


class AnswerRequest(BaseModel):
    """One question, with optional chat history and options."""

    model_config = ConfigDict(extra="forbid")

    # The pattern (some character that is not white space) is what the schema tells clients;
    # the validator says the same in words.
    question: str = Field(min_length=1, pattern=r"\S", examples=["What causes Tangier disease?"])
    history: list[Turn] = Field(default_factory=list, max_length=50)
    collections: list[str] | None = Field(
        default=None, description="search these instead of letting the expander route"
    )
    cite_urls: bool | None = Field(default=None, description="cite user-guide pages by url")
    live_citations: bool = Field(
        default=False,
        description="tokens carry their final markers, and a reference event precedes the "
        "token that first cites each source",
    )

    @field_validator("question", mode="before")
    @classmethod
    def _not_blank(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            raise ValueError("is empty or only white space; ask a question")
        return value

    def options(self, request_id: str) -> dict[str, Any]:
        return {
            "history": [(turn.role, turn.content) for turn in self.history],
            "collections": self.collections,
            "cite_urls": self.cite_urls,
            "live_citations": self.live_citations,
            "request_id": request_id,
        }


def answer_request_model(names: Sequence[str]) -> type[AnswerRequest]:
    """:class:`AnswerRequest` whose ``collections`` accepts exactly ``names`` (the declared
    collections), so that the OpenAPI document lists them and anything else is a 422."""
    allowed: Any = Literal[tuple(names)]
    field: Any = (
        list[allowed] | None,
        Field(default=None, description="search these instead of letting the expander route"),
    )
    return create_model("AnswerRequest", __base__=AnswerRequest, collections=field)


_Endpoint = TypeVar("_Endpoint", bound=Callable[..., Any])


def _body_is(model: type[BaseModel]) -> Callable[[_Endpoint], _Endpoint]:
    """FastAPI reads an endpoint's ``body`` as ``model``: a class built per app, which the
    annotation in the source (a string, under ``from __future__ import annotations``) cannot
    name."""

    def decorate(endpoint: _Endpoint) -> _Endpoint:
        endpoint.__annotations__["body"] = model
        return endpoint

    return decorate


def add_body_limits(app: FastAPI, settings: Settings) -> None:
    """Bodies over ``settings.max_body_bytes``, or slower than ``body_timeout_s``, are refused
    whatever their framing (:class:`app._http.BodyLimits`)."""
    app.add_middleware(
        BodyLimits, max_bytes=settings.max_body_bytes, timeout_s=settings.body_timeout_s
    )


def add_access_control(
    app: FastAPI, settings: Settings, on_reject: Callable[[str], None] | None = None
) -> None:
    """API keys and the rate limit, as the settings ask (:class:`app._access.AccessControl`),
    checked before the body is read; nothing when neither is set."""
    keys = settings.api_key_set
    rate = RateLimiter(settings.rate_limit) if settings.rate_limit else None
    failures = RateLimiter(settings.auth_failures_per_minute) if keys else None
    if keys or rate is not None:
        app.add_middleware(
            AccessControl, keys=keys, rate=rate, auth_failures=failures, on_reject=on_reject
        )


def add_answer_cap(
    app: FastAPI, settings: Settings, on_reject: Callable[[str], None] | None = None
) -> None:
    """The cap on answers in progress (:class:`app._access.AnswerCap`), when set. Added
    before :func:`add_body_limits`, so that it runs after the body has arrived."""
    if settings.max_concurrent_answers:
        slots = AnswerSlots(settings.max_concurrent_answers)
        app.add_middleware(AnswerCap, slots=slots, on_reject=on_reject)


def add_cors(app: FastAPI, settings: Settings) -> None:
    """Allow the origins in ``settings.cors_origins`` (comma separated); none by default."""
    origins = [origin.strip() for origin in settings.cors_origins.split(",") if origin.strip()]
    if origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["GET", "POST"],
            allow_headers=["*"],
        )


def create_app(
    settings: Settings | None = None, *, pipeline: AnswerPipeline | None = None
) -> FastAPI:
    """The application; ``pipeline`` may be given (tests, embedders), else it is built."""
    settings = settings or load_settings()
    shared = pipeline or AnswerPipeline(settings)
    catalog = catalog_for(shared.settings)  # the names the pipeline itself accepts
    request_model = answer_request_model(catalog.names)

    async def housekeeping_every(seconds: float) -> None:
        while True:
            try:
                await asyncio.to_thread(shared.remove_retired_versions)
                # A version an ingest made live gets its local indexes here, between requests,
                # rather than in the first request that searches it.
                await asyncio.to_thread(shared.collection_releases)
            except Exception as error:  # a pipeline from outside may raise: keep looking
                warn_not_done("collection housekeeping not done", error)
            await asyncio.sleep(seconds)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Load the models and open the store once, before the first request; a store that is
        # down is reported by /healthz rather than stopping the server.
        with contextlib.suppress(ReactomeAnswersError):
            app.state.warm = (shared.models, shared.retriever)
            # An instance sharing a Chroma server builds the live versions' keyword indexes
            # and chunk tables before it serves, so its first answers rank like the rest.
            await asyncio.to_thread(shared.collection_releases)
        housekeeping = asyncio.create_task(housekeeping_every(RETIRED_EVERY_S))
        try:
            yield
        finally:
            housekeeping.cancel()
            await asyncio.gather(housekeeping, return_exceptions=True)

    app = FastAPI(
        title="reactome-answers",
        summary="Answers about human biology from Reactome, with citations that always point "
        "at real Reactome entities.",
        lifespan=lifespan,
    )
    metrics = ServerMetrics()
    shared.observers.append(metrics)
    # Starlette runs the middleware added last first: metrics, CORS, keys and rate, the body
    # read whole, JSON only, then the answer cap, so a stalled body never holds a slot.
    add_answer_cap(app, settings, metrics.rejected)
    app.add_middleware(RequireJSON)
    add_body_limits(app, settings)
    add_access_control(app, settings, metrics.rejected)  # inside CORS: a preflight needs no key
    add_cors(app, settings)
    app.add_middleware(metrics.middleware)  # outermost: it counts every request and status

    add_error_handlers(app)

    def check_length(body: AnswerRequest) -> JSONResponse | None:
        if len(body.question) > settings.max_question_chars:
            message = (
                f"question: {len(body.question):,} characters; the limit is "
                f"{settings.max_question_chars:,}. Ask something shorter."
            )
            return error_response(422, "bad_input", message)
        return None

    @app.post("/v1/answer", summary="Answer a question; the done event's data as JSON")
    @_body_is(request_model)
    async def answer(body: AnswerRequest, request: Request) -> Any:
        too_long = check_length(body)
        if too_long is not None:
            return too_long
        events = shared.astream(body.question, **body.options(uuid.uuid4().hex))
        collected = await events_unless_client_leaves(request.receive, events)
        if collected is None:  # nobody is there to read it; the metrics count it so
            return Response(status_code=CLIENT_LEFT_STATUS)
        result = answer_result(collected)
        if "error" in result:  # the done data still comes along: partial text, references
            return JSONResponse(result, status_code=http_status_for(result["error"]["code"]))
        return result

    @app.post("/v1/answer/stream", summary="Answer a question as Server-Sent Events")
    @_body_is(request_model)
    async def answer_stream(body: AnswerRequest) -> Any:
        too_long = check_length(body)
        if too_long is not None:
            return too_long
        events = shared.astream(body.question, **body.options(uuid.uuid4().hex))

        async def frames() -> AsyncIterator[bytes]:
            try:
                async for event in events:
                    yield to_sse(event).encode()
            finally:
                # A disconnected client lands here: closing the stream cancels the model. The
                # scope around us is already cancelled, so shield the clean-up from it.
                with anyio.CancelScope(shield=True):
                    await events.aclose()

        return EventSourceResponse(frames(), headers=STREAM_HEADERS, ping=KEEP_ALIVE_S)

    add_openai_routes(app, shared, settings)
    add_ai_sdk_routes(app, shared, settings)
    add_web_client(app)

    # HEAD for load balancers and uptime checks that probe without reading a body.
    @app.head("/healthz", include_in_schema=False)
    @app.get("/healthz", summary="Store reachable, collections present, model configured")
    async def healthz() -> JSONResponse:
        from pipelines.index import store

        report: dict[str, Any] = {"llm": settings.llm, "embeddings": settings.embeddings}
        try:
            infos = store.collection_infos(shared.store_client(), catalog.names)
            report["store"] = "ok"
            report["collections"] = {info.name: info.documents for info in infos}
        except ReactomeAnswersError as error:
            report["store"] = redact_secrets(str(error))
            report["collections"] = {}
        missing = [name for name in catalog.names if name not in report["collections"]]
        report["missing"] = missing
        healthy = report["store"] == "ok" and len(missing) < len(catalog.names)
        # Answering, but not as well as it should: a collection ranked without its keyword
        # index (named, with why). Still 200: the instance answers, and a balancer that
        # took it out would leave fewer to answer.
        degraded = await asyncio.to_thread(shared.degraded) if healthy else {}
        report["degraded"] = degraded
        report["status"] = ("degraded" if degraded else "ok") if healthy else "unavailable"
        return JSONResponse(report, status_code=200 if healthy else 503)

    @app.get("/metrics", summary="Counters and histograms in the Prometheus text format")
    async def prometheus_metrics() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/collections", summary="What is ingested")
    async def collections() -> list[dict[str, Any]]:
        from pipelines.index import store

        infos = store.collection_infos(shared.store_client(), catalog.names)
        return [info.as_json() for info in infos]

    return app


def worker_app() -> FastAPI:
    """The application of one ``serve --workers`` process: its settings come from the
    environment, where ``serve`` put the options it was given."""
    from app._http import configure_protocol

    settings = load_settings()
    configure_protocol(settings)
    return create_app(settings)
