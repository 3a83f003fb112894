"""The SSE response our streams go out in: sse-starlette's, each send made directly (no
cancel scope per send), and a send that fails still marks the response as interrupted, so
that no closing body is attempted on a transport in an unknown state."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from starlette.types import Message, Scope

from app.http.sse import EventStream

SCOPE: Scope = {"type": "http", "method": "POST", "path": "/", "headers": []}


async def _frames() -> AsyncIterator[bytes]:
    for number in range(3):
        yield f"id: {number}\ndata: {number}\n\n".encode()


async def _never_leaves() -> Message:
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


def test_each_frame_is_sent_as_it_is_without_a_cancel_scope(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scopes = 0
    opened = anyio.move_on_after

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal scopes
        scopes += 1
        return opened(*args, **kwargs)

    monkeypatch.setattr(anyio, "move_on_after", counted)  # what sse-starlette calls
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    response = EventStream(_frames(), ping=0)
    anyio.run(response.__call__, SCOPE, _never_leaves, send)
    bodies = [m["body"] for m in sent if m["type"] == "http.response.body"]
    assert bodies == [f"id: {n}\ndata: {n}\n\n".encode() for n in range(3)] + [b""]
    assert scopes == 0


def test_a_failed_send_marks_the_response_interrupted() -> None:
    response = EventStream(_frames(), ping=0)
    sent: list[Message] = []

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body":
            raise OSError("the peer went away")
        sent.append(message)

    with pytest.raises(OSError, match="peer went away"):
        anyio.run(response.__call__, SCOPE, _never_leaves, send)
    assert response._send_interrupted
    assert [m["type"] for m in sent] == ["http.response.start"]
