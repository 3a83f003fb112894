"""The HTTP backend: JSON and Server-Sent Events over one shared pipeline.

- ``POST /v1/answer``: the ``done`` event's data plus ``request_id``, as JSON.
- ``POST /v1/answer/stream``: every event as SSE (``id: seq``, ``event: type``, ``data:`` the
  whole event as JSON, one line), written by :func:`callbacks.events.to_sse`, with keep-alive
  comments and headers that stop proxies from buffering or caching.
- ``GET /healthz``, ``GET /v1/collections``; OpenAPI at ``/docs``.
- ``GET /``: the reference web client (``app/web/``), plain JavaScript with no build step.

The pipeline is built once at start-up and serves concurrent requests, each with its own
handler and ``request_id``. A client that disconnects cancels its generation.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from app._web import add_web_client
from callbacks.events import to_sse
from pipelines.definitions import COLLECTION_NAMES
from pipelines.errors import ReactomeAnswersError
from pipelines.pipeline import AnswerPipeline
from pipelines.redaction import redact_secrets
from pipelines.settings import Settings, load_settings

__all__ = ["KEEP_ALIVE_S", "STREAM_HEADERS", "AnswerRequest", "add_cors", "create_app"]

# Proxies (nginx and friends) must pass each event on at once and never cache a stream.
STREAM_HEADERS = {"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"}
KEEP_ALIVE_S = 15

CollectionName = Literal["reactome", "disease_variants", "userguide"]


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant"]
    content: str = Field(max_length=20_000)


class AnswerRequest(BaseModel):
    """One question, with optional chat history and options."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, examples=["What causes Tangier disease?"])
    history: list[Turn] = Field(default_factory=list, max_length=50)
    collections: list[CollectionName] | None = Field(
        default=None, description="search these instead of letting the expander route"
    )
    cite_urls: bool | None = Field(default=None, description="cite user-guide pages by url")

    def options(self, request_id: str) -> dict[str, Any]:
        return {
            "history": [(turn.role, turn.content) for turn in self.history],
            "collections": self.collections,
            "cite_urls": self.cite_urls,
            "request_id": request_id,
        }


class _BodyLimit:
    """Refuse request bodies over ``limit`` bytes before reading them (413)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            length = dict(scope["headers"]).get(b"content-length", b"0")
            if length.isdigit() and int(length) > self.limit:
                response = JSONResponse(
                    {"error": {"code": "too_large", "message":
                               f"the request body is over {self.limit:,} bytes; send less"}},
                    status_code=413,
                )  # fmt: skip
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


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


def _validation_message(error: RequestValidationError) -> str:
    parts = []
    for problem in error.errors():
        where = ".".join(str(part) for part in problem.get("loc", ()) if part != "body")
        parts.append(f"{where or 'body'}: {problem.get('msg', 'invalid')}")
    return "; ".join(parts)


def create_app(
    settings: Settings | None = None, *, pipeline: AnswerPipeline | None = None
) -> FastAPI:
    """The application; ``pipeline`` may be given (tests, embedders), else it is built."""
    settings = settings or load_settings()
    shared = pipeline or AnswerPipeline(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Load the models and open the store once, before the first request; a store that is
        # down is reported by /healthz rather than stopping the server.
        with contextlib.suppress(ReactomeAnswersError):
            app.state.warm = (shared.models, shared.retriever)
        yield

    app = FastAPI(
        title="reactome-answers",
        summary="Answers about human biology from Reactome, with citations that always point "
        "at real Reactome entities.",
        lifespan=lifespan,
    )
    app.add_middleware(_BodyLimit, limit=settings.max_body_bytes)
    add_cors(app, settings)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, error: RequestValidationError) -> JSONResponse:
        message = _validation_message(error)
        return JSONResponse({"error": {"code": "bad_input", "message": message}}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, error: StarletteHTTPException) -> JSONResponse:
        # Starlette's own refusals (an unparsable body, an unknown path or method) in the
        # same shape as ours, so a client reads every error one way.
        code = "bad_input" if error.status_code in (400, 422) else f"http_{error.status_code}"
        body = {"error": {"code": code, "message": str(error.detail)}}
        return JSONResponse(body, status_code=error.status_code, headers=error.headers)

    @app.exception_handler(ReactomeAnswersError)
    async def _ours(_: Request, error: ReactomeAnswersError) -> JSONResponse:
        body = {"error": {"code": error.code, "message": redact_secrets(str(error))}}
        return JSONResponse(body, status_code=error.http_status)

    def check_length(body: AnswerRequest) -> JSONResponse | None:
        if len(body.question) > settings.max_question_chars:
            message = (
                f"question: {len(body.question):,} characters; the limit is "
                f"{settings.max_question_chars:,}. Ask something shorter."
            )
            return JSONResponse({"error": {"code": "bad_input", "message": message}}, 422)
        return None

    @app.post("/v1/answer", summary="Answer a question; the done event's data as JSON")
    async def answer(body: AnswerRequest) -> Any:
        too_long = check_length(body)
        if too_long is not None:
            return too_long
        result = await shared.ainvoke(body.question, **body.options(uuid.uuid4().hex))
        if "error" in result:  # the done data still comes along: partial text, references
            return JSONResponse(
                result, status_code=ReactomeAnswersError.http_status_for(result["error"]["code"])
            )
        return result

    @app.post("/v1/answer/stream", summary="Answer a question as Server-Sent Events")
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

    add_web_client(app)

    @app.get("/healthz", summary="Store reachable, collections present, model configured")
    async def healthz() -> JSONResponse:
        from pipelines import store

        report: dict[str, Any] = {"llm": settings.llm, "embeddings": settings.embeddings}
        try:
            infos = store.collection_infos(store.open_client(settings))
            report["store"] = "ok"
            report["collections"] = {info.name: info.documents for info in infos}
        except ReactomeAnswersError as error:
            report["store"] = redact_secrets(str(error))
            report["collections"] = {}
        missing = [name for name in COLLECTION_NAMES if name not in report["collections"]]
        report["missing"] = missing
        healthy = report["store"] == "ok" and len(missing) < len(COLLECTION_NAMES)
        report["status"] = "ok" if healthy else "unavailable"
        return JSONResponse(report, status_code=200 if healthy else 503)

    @app.get("/v1/collections", summary="What is ingested")
    async def collections() -> list[dict[str, Any]]:
        from pipelines import store

        return [info.as_json() for info in store.collection_infos(store.open_client(settings))]

    return app
