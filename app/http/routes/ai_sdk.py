"""The Vercel AI SDK's UI message stream over the pipeline, for front-ends built on its
``useChat`` (which posts to ``/api/chat`` by default).

The request is the SDK's: ``messages``, each with a ``role`` and ``parts`` (text parts are
read; an older ``content`` string is accepted too). The last user message is the question and
the turns before it the history. ``cite_urls`` (true or false, as the native API takes it)
may come beside them, which is where the SDK puts its ``body`` option's fields. The answer is
Server-Sent Events, ``data:`` one JSON chunk each, with the header
``x-vercel-ai-ui-message-stream: v1``:

``start`` (its ``messageMetadata`` holds the request id), then for each reference a
``source-url`` part as it is first cited (live citations: right before the text citing it),
``text-start`` / ``text-delta`` / ``text-end`` with the answer's markers already final, then
one ``data-evidence`` part per judged citation (see below), ``message-metadata`` and
``error`` on failure, ``finish`` (its ``messageMetadata`` holds the request id, the final
state and our references), then ``[DONE]``.

A failure's ``error`` part comes last but for ``finish``, after a ``message-metadata`` part
with what ``finish`` carries: ``useChat`` stops reading at an ``error`` part, so whatever
comes after it never reaches the message. A failed answer without text lists no source.

The evidence goes as data parts, ``{"type": "data-evidence", "id": "evidence-N", "data": ITEM}``
with ``ITEM`` one item of ``done.data.evidence`` as the native API gives it (``n``, the
``sentence`` offsets in the text part, the ``quote`` and its ``quote_span``, ``score`` and
``supported``; offsets count Unicode code points, as Python's strings do, where a
JavaScript string counts UTF-16 units: they differ after a character such as an emoji). A
``source-document`` part names a document (media type, title, file name)
and has no field for a quote or a verdict, and each is shown as one more source beside the
``source-url`` parts. ``text-end`` carries ``citations`` only in the SDK's version 7; versions
5 and 6 refuse a ``text-end`` with any field they do not know, while every version since 5
takes data parts.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

from app.http.deps import PipelineDep, SettingsDep
from app.http.errors import error_response
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
from app.http.trace_headers import traced_options
from app.links import reference_link
from callbacks.events import (
    DoneData,
    DoneEvent,
    ErrorEvent,
    Event,
    EvidenceData,
    Reference,
    ReferenceEvent,
    TokenEvent,
)
from pipelines.core.options import RequestOptions
from pipelines.core.validation import validation_line
from pipelines.pipeline import AnswerPipeline
from pipelines.retrieval.refusal_rules import question_too_long

__all__ = ["UI_STREAM_HEADERS", "router"]

UI_STREAM_HEADERS = {
    "x-vercel-ai-ui-message-stream": "v1",
    "Cache-Control": "no-cache, no-transform",
    "X-Accel-Buffering": "no",
}
_TEXT_ID = "text-1"


class _UIMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: str
    parts: list[TextPart] = Field(default_factory=list)
    content: str | None = None  # the SDK before version 5

    def text(self) -> str:
        joined = text_of_parts(self.parts)
        return joined if joined is not None else self.content or ""


class UIChatRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    messages: list[_UIMessage] = Field(min_length=1, max_length=1000)
    # Strict, as a JSON boolean: "yes" or 1 is a mistake to report, not a true to guess.
    cite_urls: StrictBool | None = None
    language: LanguageTag | None = None


def _source(reference: Reference) -> dict[str, Any]:
    return {
        "type": "source-url",
        "sourceId": f"reference-{reference.n}",
        "url": reference_link(reference),
        "title": reference.display_name,
    }


def _evidence(number: int, item: EvidenceData) -> dict[str, Any]:
    # The id names the part, so a client keeps each (an SDK part with a repeated id replaces
    # the one before).
    return {
        "type": "data-evidence",
        "id": f"evidence-{number}",
        "data": item.model_dump(mode="json"),
    }


# Every route of this protocol answers.
router = APIRouter(prefix="/api", tags=["AI SDK"], route_class=AnswerRoute)


def _request_schema() -> dict[str, Any]:
    message = {
        "type": "object",
        "properties": {
            "role": {"type": "string", "examples": ["user"]},
            "parts": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"type": {"type": "string"}, "text": {"type": "string"}},
                    "required": ["type"],
                },
            },
        },
        "required": ["role"],
    }
    return {
        "type": "object",
        "properties": {
            "messages": {"type": "array", "items": message, "minItems": 1},
            "cite_urls": {"type": "boolean", "description": "cite user-guide pages by url"},
            "language": {
                "type": "string",
                "description": "the asker's language as a BCP 47 tag; unset: detected",
            },
        },
        "required": ["messages"],
    }


@router.post(
    "/chat",
    summary="The Vercel AI SDK's UI message stream (useChat's default endpoint)",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _request_schema()}},
        }
    },
)
async def chat(request: Request, pipeline: PipelineDep, settings: SettingsDep) -> Any:
    try:
        body = UIChatRequest.model_validate(read_json(await request.body()))
    except ValidationError as error:
        return error_response(422, "bad_input", validation_line(error, first=1, nothing="body"))
    except UnreadableBodyError as error:
        return error_response(400, "bad_input", str(error))
    split = split_conversation([(m.role, m.text()) for m in body.messages])
    if split is None or not split[0].strip():
        return error_response(422, "bad_input", "messages: no user message with text")
    question, history = split
    length = question_too_long(question, settings.max_question_chars)
    if length is not None:
        return error_response(422, "bad_input", length)
    options = RequestOptions(
        history=tuple(history),
        cite_urls=body.cite_urls,
        live_citations=True,
        language=body.language,
    )
    return StreamingResponse(
        _stream(pipeline, question, traced_options(options, request.headers, "ai_sdk")),
        media_type="text/event-stream",
        headers=UI_STREAM_HEADERS,
    )


async def _stream(
    pipeline: AnswerPipeline, question: str, options: RequestOptions
) -> AsyncIterator[bytes]:
    request_id = uuid.uuid4().hex
    batches = pipeline.event_batches(question, options, request_id=request_id)
    message = _Message(request_id)
    try:
        start = {
            "type": "start",
            "messageId": request_id,
            "messageMetadata": {"request_id": request_id},
        }
        yield data_frame(start)
        async for batch in batches:
            # The events already waiting go out in one write.
            frames = [frame for event in batch for frame in message.frames(event)]
            if frames:
                yield b"".join(frames)
        yield data_frame("[DONE]")
    finally:
        with anyio.CancelScope(shield=True):
            await batches.aclose()


class _Message:
    """One answer's UI message stream: the parts each event makes."""

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self.sent: set[int] = set()  # references already sent as source parts
        self.text_open = False
        self.error: ErrorEvent | None = None  # held until done: useChat reads nothing after it

    def frames(self, event: Event) -> Iterator[bytes]:
        if isinstance(event, ReferenceEvent):
            self.sent.add(event.data.n)
            yield data_frame(_source(event.data))
        elif isinstance(event, TokenEvent):
            if not self.text_open:
                self.text_open = True
                yield data_frame({"type": "text-start", "id": _TEXT_ID})
            yield data_frame({"type": "text-delta", "id": _TEXT_ID, "delta": event.data.text})
        elif isinstance(event, ErrorEvent):
            self.error = event
        elif isinstance(event, DoneEvent):
            yield from self._finish(event.data)

    def _finish(self, done: DoneData) -> Iterator[bytes]:
        error = self.error
        # A failed answer lists only what its text cites: the pipeline's rule.
        references = done.references
        # References no token announced (a model that did not stream), in order.
        for reference in references:
            if reference.n not in self.sent:
                yield data_frame(_source(reference))
        if not self.text_open and done.text and error is None:
            self.text_open = True
            yield data_frame({"type": "text-start", "id": _TEXT_ID})
            yield data_frame({"type": "text-delta", "id": _TEXT_ID, "delta": done.text})
        if self.text_open:
            yield data_frame({"type": "text-end", "id": _TEXT_ID})
        for number, item in enumerate(done.evidence, start=1):
            yield data_frame(_evidence(number, item))
        metadata = {
            "request_id": self.request_id,
            "state": done.state,
            "language": done.language,
            "references": [r.model_dump(mode="json") for r in references],
        }
        if error is not None:
            yield data_frame({"type": "message-metadata", "messageMetadata": metadata})
            yield data_frame({"type": "error", "errorText": error.data.message})
        finish = "error" if error is not None else "stop"
        yield data_frame({"type": "finish", "finishReason": finish, "messageMetadata": metadata})
