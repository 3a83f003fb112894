"""The OpenAI chat-completions protocol over the pipeline, for clients that speak only it
(the ``openai`` packages, ``ChatOpenAI``, Open WebUI, LibreChat).

- ``GET /v1/models``: one model, ``reactome-answers``.
- ``POST /v1/chat/completions``: the last user message is the question, the turns before it
  the history; ``stream`` gives ``chat.completion.chunk`` frames whose ``delta.content`` is the
  answer with its markers already final (live citations), then a chunk with ``finish_reason``,
  our ``references`` and their links as ``citations`` (in final order, as Perplexity's API
  gives them) and the ``evidence``, a usage chunk when ``stream_options.include_usage`` asks,
  and ``[DONE]``.
  Unless ``openai_sources`` is off, the content ends with a short Markdown list of the sources,
  so that a client that renders text only still shows them. (A Sources list the model wrote at
  the end of its own text never reaches this route: the pipeline removes it for every
  surface, :mod:`pipelines.citations.model_sources`.)

Each supported citation is an OpenAI ``url_citation`` annotation over the sentence that makes it
(``message.annotations``; streamed, the ``delta`` of the chunk with ``finish_reason``), and
``evidence`` lists every judged citation, unsupported ones too
(:mod:`app.http.protocols.openai_annotations`).

Errors have OpenAI's shape, ``{"error": {"message", "type", "code"}}``; a refused question or
one nothing was found for is an ordinary completion whose content says so.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal

import anyio
from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.http.deps import PipelineDep, ServerSettingsDep, SettingsDep
from app.http.disconnect import CLIENT_LEFT_STATUS, events_unless_client_leaves
from app.http.errors import http_status_for, openai_error_body, openai_error_response
from app.http.middleware.access import AnswerRoute
from app.http.models import LanguageTag
from app.http.protocols.chat import (
    TextPart,
    UnreadableBodyError,
    data_frame,
    read_json,
    split_conversation,
    text_of_parts,
)
from app.http.protocols.openai_annotations import evidence_json, url_citations
from app.http.protocols.openai_sources import without_our_sources
from app.http.settings import ServerSettings
from app.http.sse import EventStream
from app.http.trace_headers import traced_options
from app.links import reference_link, sources_markdown
from callbacks.events import DoneEvent, ErrorEvent, Event, Reference, TokenEvent
from pipelines.core.options import RequestOptions
from pipelines.core.validation import validation_line, validation_problems
from pipelines.pipeline import AnswerPipeline
from pipelines.retrieval.refusal_rules import question_too_long

__all__ = ["MODEL_ID", "ChatRequest", "router"]

MODEL_ID = "reactome-answers"
# The model's "created": when this process loaded the protocol, about when it started serving.
_STARTED = int(time.time())


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[TextPart] | None = None

    def text(self) -> str:
        if self.content is None or isinstance(self.content, str):
            return self.content or ""
        return text_of_parts(self.content) or ""


class _StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    include_usage: bool = False


class ChatRequest(BaseModel):
    """The fields of OpenAI's request that mean something here; the rest are ignored, as
    OpenAI-compatible servers do."""

    model_config = ConfigDict(extra="ignore")

    model: str = Field(default=MODEL_ID, examples=[MODEL_ID])
    messages: list[ChatMessage] = Field(min_length=1, max_length=1000)
    stream: bool = False
    stream_options: _StreamOptions | None = None
    # Ours, beside OpenAI's fields (as extra_body from the openai client).
    language: LanguageTag | None = Field(
        default=None,
        description="the asker's language as a BCP 47 tag; unset: detected from the question",
    )

    def question_and_history(self) -> tuple[str, list[tuple[str, str]]]:
        """The last user message, and the user and assistant turns before it."""
        turns = [
            # Our own Sources list, sent back to us in an earlier answer, is not history.
            (m.role, without_our_sources(m.text()) if m.role == "assistant" else m.text())
            for m in self.messages
        ]
        split = split_conversation(turns)
        if split is None:
            raise _RequestError("messages: there is no user message; ask a question", "messages")
        if not split[0].strip():
            raise _RequestError("messages: the last user message is empty", "messages")
        return split


class _RequestError(Exception):
    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


def _validation_message(error: ValidationError) -> tuple[str, str | None]:
    """The problems in one line, and the first one's location as OpenAI's ``param``."""
    problems = validation_problems(error)
    where = ".".join(problems[0][0]) if problems else ""
    return validation_line(error, first=5, nothing="body"), where or None


def _inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its ``$defs`` written in place of their references (none of ours is
    recursive), for an OpenAPI request body declared by hand."""
    definitions = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            reference = node.get("$ref")
            if isinstance(reference, str) and reference.startswith("#/$defs/"):
                return resolve(definitions[reference.removeprefix("#/$defs/")])
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(value) for value in node]
        return node

    resolved: dict[str, Any] = resolve(schema)
    return resolved


def _references_json(references: list[Reference]) -> list[dict[str, Any]]:
    return [reference.model_dump(mode="json") for reference in references]


def _usage(done: DoneEvent) -> dict[str, int]:
    prompt = done.data.usage.prompt_tokens or 0
    answer = done.data.usage.answer_tokens
    return {"prompt_tokens": prompt, "completion_tokens": answer, "total_tokens": prompt + answer}


router = APIRouter(prefix="/v1", tags=["OpenAI"])
_answering = APIRouter(route_class=AnswerRoute)


@router.get("/models", summary="OpenAI-compatible: the one model this server answers as")
async def models() -> dict[str, Any]:
    model = {"id": MODEL_ID, "object": "model", "created": _STARTED, "owned_by": MODEL_ID}
    return {"object": "list", "data": [model]}


@router.get("/models/{model}", include_in_schema=False)
async def model(model: str) -> Any:
    if model != MODEL_ID:
        return openai_error_response(
            404, f"model {model!r} does not exist; use {MODEL_ID}", "not_found"
        )
    return {"id": MODEL_ID, "object": "model", "created": _STARTED, "owned_by": MODEL_ID}


@_answering.post(
    "/chat/completions",
    summary="OpenAI-compatible chat completions, streamed or not",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _inlined(ChatRequest.model_json_schema())}},
        }
    },
)
async def chat_completions(
    request: Request, pipeline: PipelineDep, settings: SettingsDep, server: ServerSettingsDep
) -> Any:
    try:
        body = ChatRequest.model_validate(read_json(await request.body()))
        question, history = body.question_and_history()
    except ValidationError as error:
        message, param = _validation_message(error)
        return openai_error_response(400, message, "bad_input", param)
    except UnreadableBodyError as error:
        return openai_error_response(400, str(error), "bad_input")
    except _RequestError as error:
        return openai_error_response(400, str(error), "bad_input", error.param)
    problem = question_too_long(question, settings.max_question_chars)
    if problem is not None:
        return openai_error_response(400, problem, "bad_input", "messages")
    request_id = uuid.uuid4().hex
    completion_id = f"chatcmpl-{request_id}"
    options = traced_options(
        RequestOptions(history=tuple(history), live_citations=True, language=body.language),
        request.headers,
        "openai",
    )
    if not body.stream:
        events = pipeline.events(question, options, request_id=request_id)
        collected = await events_unless_client_leaves(request.receive, events)
        if collected is None:  # nobody is there to read it; the metrics count it so
            return Response(status_code=CLIENT_LEFT_STATUS)
        return _completion(server, collected, completion_id)
    include_usage = body.stream_options is not None and body.stream_options.include_usage
    frames = _stream(pipeline, server, question, options, request_id, include_usage)
    return EventStream(
        frames, headers={"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"}
    )


router.include_router(_answering)


def _completion_fields(done: DoneEvent, content: str) -> dict[str, Any]:
    """Our fields beside OpenAI's: the references, their links, and the evidence for the
    ``content`` the client assembled."""
    references = done.data.references
    return {
        "references": _references_json(references),
        "citations": [reference_link(reference) for reference in references],
        "evidence": evidence_json(done.data, content),
        "language": done.data.language,
    }


def _completion(server: ServerSettings, events: list[Event], completion_id: str) -> Any:
    done = events[-1]
    assert isinstance(done, DoneEvent)  # astream always ends with done
    failure = next((event for event in events if isinstance(event, ErrorEvent)), None)
    if failure is not None:
        status = http_status_for(failure.data.code)
        return openai_error_response(status, failure.data.message, failure.data.code)
    tail = (
        sources_markdown(done.data.references, done.data.language) if server.openai_sources else ""
    )
    content = done.data.text + tail
    message = {
        "role": "assistant",
        "content": content,
        "annotations": url_citations(done.data, content),
    }
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL_ID,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "stop",
            }
        ],
        "usage": _usage(done),
        **_completion_fields(done, content),
    }


async def _stream(
    pipeline: AnswerPipeline,
    server: ServerSettings,
    question: str,
    options: RequestOptions,
    request_id: str,
    include_usage: bool,
) -> AsyncIterator[bytes]:
    completion = _Completion(server, request_id, include_usage)
    batches = pipeline.event_batches(question, options, request_id=request_id)
    try:
        yield completion.chunk({"role": "assistant", "content": ""})
        async for batch in batches:
            # The events already waiting go out in one write.
            frames = [frame for event in batch for frame in completion.frames(event)]
            if frames:
                yield b"".join(frames)
            if completion.stopped:
                break
        yield data_frame("[DONE]")
    finally:
        # A client that went away lands here: closing the stream cancels the model, shielded
        # from the cancelled scope around us.
        with anyio.CancelScope(shield=True):
            await batches.aclose()


class _Completion:
    """One streamed completion: the chunks each event makes."""

    def __init__(self, server: ServerSettings, request_id: str, include_usage: bool) -> None:
        self.server = server
        self.include_usage = include_usage
        self.created = int(time.time())
        self.completion_id = f"chatcmpl-{request_id}"
        # The content as the client assembles it: the annotations' offsets point into it.
        self.sent: list[str] = []
        self.streamed = False
        self.failed = False
        self.stopped = False  # a failed answer's done: its error was the last chunk

    def chunk(self, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        return data_frame(
            {
                "id": self.completion_id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": MODEL_ID,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra,
            }
        )

    def frames(self, event: Event) -> Iterator[bytes]:
        if self.stopped:
            return
        if isinstance(event, TokenEvent):
            self.streamed = True
            self.sent.append(event.data.text)
            yield self.chunk({"content": event.data.text})
        elif isinstance(event, ErrorEvent):
            self.failed = True
            status = http_status_for(event.data.code)
            yield data_frame(openai_error_body(status, event.data.message, event.data.code, None))
        elif isinstance(event, DoneEvent):
            if self.failed:
                self.stopped = True
            else:
                yield from self._finish(event)

    def _finish(self, event: DoneEvent) -> Iterator[bytes]:
        # A refusal, nothing found, or a model that did not stream: the whole text.
        text = "" if self.streamed else event.data.text
        if self.server.openai_sources:
            text += sources_markdown(event.data.references, event.data.language)
        if text:
            self.sent.append(text)
            yield self.chunk({"content": text})
        content = "".join(self.sent)
        annotations = url_citations(event.data, content)
        yield self.chunk({"annotations": annotations}, "stop", **_completion_fields(event, content))
        if self.include_usage:
            yield data_frame(
                {
                    "id": self.completion_id,
                    "object": "chat.completion.chunk",
                    "created": self.created,
                    "model": MODEL_ID,
                    "choices": [],
                    "usage": _usage(event),
                }
            )
