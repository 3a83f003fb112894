"""What the chat-protocol adapters (``_openai_api``, ``_ai_sdk``) share: reading a
conversation sent as messages, and their ``data:`` frames."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from app.http.models import MAX_TURNS
from pipelines.core.json_text import UnreadableJSONError, parse_json

__all__ = [
    "TextPart",
    "UnreadableBodyError",
    "data_frame",
    "read_json",
    "split_conversation",
    "text_of_parts",
]


def split_conversation(
    turns: Sequence[tuple[str, str]],
) -> tuple[str, list[tuple[str, str]]] | None:
    """``(role, text)`` messages in order -> the last user message's text and the user and
    assistant turns before it (the last ``MAX_TURNS``, what the native API allows); None when
    no message is the user's. Other roles (system, tool) are left out."""
    users = [number for number, (role, _) in enumerate(turns) if role == "user"]
    if not users:
        return None
    history = [(role, text) for role, text in turns[: users[-1]] if role in ("user", "assistant")]
    return turns[users[-1]][1], history[-MAX_TURNS:]


class UnreadableBodyError(ValueError):
    """A request body that is not JSON this server can read; the message says why."""


def read_json(body: bytes) -> Any:
    """``body`` parsed as JSON, or :class:`UnreadableBodyError` (a 400: any way a body is no
    JSON we can read is the client's doing, nesting too deep for the parser included)."""
    try:
        return parse_json(body)
    except UnreadableJSONError as error:
        if error.kind == "nesting":
            raise UnreadableBodyError(
                "the body nests arrays or objects too deeply to read; send a flatter body"
            ) from None
        raise UnreadableBodyError(f"the body is not JSON text ({error.reason})") from None


def data_frame(payload: dict[str, Any] | str) -> bytes:
    """One Server-Sent Events ``data:`` frame: JSON, or a literal such as ``[DONE]``."""
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return f"data: {data}\n\n".encode()


class TextPart(BaseModel):
    """One part of a chat message, as both protocols send it (OpenAI's ``content`` list, the
    AI SDK's ``parts``): its type, and its text when it is a text part; the rest is ignored."""

    model_config = ConfigDict(extra="ignore")

    type: str
    text: str | None = None


def text_of_parts(parts: Sequence[TextPart]) -> str | None:
    """The message's text parts joined, or None when it has none (an image, a tool call)."""
    texts = [part.text or "" for part in parts if part.type == "text"]
    return "".join(texts) if texts else None
