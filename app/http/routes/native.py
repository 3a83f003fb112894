"""Our own API over the pipeline (the others, ``_openai_api`` and ``_ai_sdk``, adapt it to
protocols that clients already speak).

- ``POST /v1/answer``: the ``done`` event's data plus ``request_id``, as JSON.
- ``POST /v1/answer/stream``: every event as SSE (``id: seq``, ``event: type``, ``data:`` the
  whole event as JSON, one line), written by :func:`callbacks.events.to_sse`, with keep-alive
  comments and headers that stop proxies from buffering or caching.
- ``GET /v1/collections``: what is ingested.
- ``GET /v1/limits``: the question length, turns and turn length a request must keep to, so
  that a client checks against the server's numbers rather than copies of them; and what the
  server keeps of an answer (a rating, a log page), so that a client offers only what works.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import anyio
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field
from starlette.routing import NoMatchFound

from app.http.deps import CatalogDep, PipelineDep, SettingsDep
from app.http.disconnect import CLIENT_LEFT_STATUS, events_unless_client_leaves
from app.http.errors import error_response, http_status_for
from app.http.middleware.access import AnswerRoute
from app.http.models import MAX_TURN_CHARS, MAX_TURNS, AnswerRequest, Limits
from app.http.routes.feedback import rates_answers
from app.http.sse import EventStream
from app.http.trace_headers import traced_options
from callbacks.events import to_sse
from pipelines.pipeline import answer_result
from pipelines.retrieval.refusal_rules import question_too_long

__all__ = ["KEEP_ALIVE_S", "STREAM_HEADERS", "limits_router", "native_router"]

# Proxies (nginx and friends) must pass each event on at once and never cache a stream.
STREAM_HEADERS = {"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"}
KEEP_ALIVE_S = 15

_Endpoint = TypeVar("_Endpoint", bound=Callable[..., Any])


def _body_is(model: type[BaseModel]) -> Callable[[_Endpoint], _Endpoint]:
    """FastAPI reads an endpoint's ``body`` as ``model``: a class built per app, which the
    annotation in the source (a string, under ``from __future__ import annotations``) cannot
    name."""

    def decorate(endpoint: _Endpoint) -> _Endpoint:
        endpoint.__annotations__["body"] = model
        return endpoint

    return decorate


def _too_long(body: AnswerRequest, max_chars: int) -> JSONResponse | None:
    """A 422 for a question the pipeline would refuse for its length, in the pipeline's
    words; None when it is short enough."""
    problem = question_too_long(body.question, max_chars)
    return None if problem is None else error_response(422, "bad_input", problem)


class ServedLimits(Limits):
    logs: bool = Field(
        default=False,
        description="whether an answer's log page is at /logs/{request_id} (the request id "
        "of the answer's start event): not with event logs off",
    )


def _serves_log_pages(app: FastAPI) -> bool:
    # The page is mounted by whichever app has logs to show (serve, and replay --serve of a
    # log), as the route named after its endpoint, app.http.routes.log_page's log_page: asking the
    # app for that route's path tells, whoever built the app.
    try:
        app.url_path_for("log_page", request_id="-")
    except NoMatchFound:
        return False
    return True


limits_router = APIRouter(prefix="/v1", tags=["limits"])


@limits_router.get("/limits", summary="The limits a request must keep to")
async def limits(settings: SettingsDep, request: Request) -> ServedLimits:
    return ServedLimits(
        max_question_chars=settings.max_question_chars,
        max_turns=MAX_TURNS,
        max_turn_chars=MAX_TURN_CHARS,
        feedback=rates_answers(request.app, settings),
        logs=settings.event_logs and _serves_log_pages(request.app),
    )


def native_router(request_model: type[AnswerRequest]) -> APIRouter:
    """The native routes, whose body is ``request_model`` (:func:`app.http.models.
    answer_request_model`: its ``collections`` are the app's catalog's)."""
    router = APIRouter(prefix="/v1", tags=["answers"])
    answering = APIRouter(route_class=AnswerRoute)

    @answering.post("/answer", summary="Answer a question; the done event's data as JSON")
    @_body_is(request_model)
    async def answer(
        body: AnswerRequest, request: Request, pipeline: PipelineDep, settings: SettingsDep
    ) -> Any:
        too_long = _too_long(body, settings.max_question_chars)
        if too_long is not None:
            return too_long
        options = traced_options(body.options(), request.headers, "http")
        events = pipeline.events(body.question, options, request_id=uuid.uuid4().hex)
        collected = await events_unless_client_leaves(request.receive, events)
        if collected is None:  # nobody is there to read it; the metrics count it so
            return Response(status_code=CLIENT_LEFT_STATUS)
        result = answer_result(collected)
        if "error" in result:  # the done data still comes along: partial text, references
            return JSONResponse(result, status_code=http_status_for(result["error"]["code"]))
        return result

    @answering.post("/answer/stream", summary="Answer a question as Server-Sent Events")
    @_body_is(request_model)
    async def answer_stream(
        body: AnswerRequest, request: Request, pipeline: PipelineDep, settings: SettingsDep
    ) -> Any:
        too_long = _too_long(body, settings.max_question_chars)
        if too_long is not None:
            return too_long
        options = traced_options(body.options(), request.headers, "sse")
        batches = pipeline.event_batches(body.question, options, request_id=uuid.uuid4().hex)

        async def frames() -> AsyncIterator[bytes]:
            try:
                async for batch in batches:
                    # The events already waiting go out in one write.
                    yield "".join(map(to_sse, batch)).encode()
            finally:
                # A disconnected client lands here: closing the stream cancels the model. The
                # scope around us is already cancelled, so shield the clean-up from it.
                with anyio.CancelScope(shield=True):
                    await batches.aclose()

        return EventStream(frames(), headers=STREAM_HEADERS, ping=KEEP_ALIVE_S)

    router.include_router(answering)

    @router.get("/collections", summary="What is ingested")
    async def collections(pipeline: PipelineDep, catalog: CatalogDep) -> list[dict[str, Any]]:
        from pipelines.index import store

        infos = store.collection_infos(pipeline.operator.store_client(), catalog.names)
        return [info.as_json() for info in infos]

    return router
