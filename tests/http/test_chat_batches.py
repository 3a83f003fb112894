"""The chat protocols' streams, like the native one, write the events already waiting in one
write: the frames one by one would give, in fewer writes for a reader that falls behind."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from langchain_core.language_models import FakeListChatModel

from app.http.routes import ai_sdk, openai_chat
from app.http.settings import load_server_settings
from pipelines.core.options import RequestOptions
from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline
from tests.support.fake_pipeline import ABCA1, CDK5, VARIANT, FakeRetriever
from tests.support.fakes import ScriptedStream
from tests.support.waiting import only_this_task_left

ANSWER = "ABCA1 moves cholesterol [1]. Its W590S variant cannot [3]."
DONE = b"data: [DONE]\n\n"
Frames = Callable[[], AsyncIterator[bytes]]


async def _writes(frames: AsyncIterator[bytes], *, slowly: bool) -> list[bytes]:
    """Each write the route makes; ``slowly``: the reader falls behind after the second (the
    first the answer's work made)."""
    try:
        writes = [await anext(frames), await anext(frames)]
        if slowly:
            await only_this_task_left()
        return [*writes, *[chunk async for chunk in frames]]
    finally:
        await frames.aclose()  # type: ignore[attr-defined]


def _payloads(writes: list[bytes], own: tuple[str, ...]) -> list[Any]:
    """The frames' JSON, less what each request has of its own (``own``: ids, times)."""
    frames = b"".join(writes).decode().split("\n\n")
    assert frames[-1] == ""
    found = []
    for frame in frames[:-1]:
        assert frame.startswith("data: ")
        data = frame.removeprefix("data: ")
        found.append(data if data == "[DONE]" else _without(json.loads(data), own))
    return found


def _without(value: Any, own: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        return {k: _without(v, own) for k, v in value.items() if k not in own}
    if isinstance(value, list):
        return [_without(item, own) for item in value]
    return value


def _pipeline() -> AnswerPipeline:
    # A token at a time, each after a timer: a reader that keeps up reads each alone.
    return AnswerPipeline(
        load_settings(),
        answer_model=ScriptedStream(script=lambda _: list(ANSWER), delay_s=0.001),
        expander_model=FakeListChatModel(responses=["unused"]),
        retriever=FakeRetriever(documents=[ABCA1, CDK5, VARIANT]),
        raise_handler_errors=True,
    )


def _openai() -> AsyncIterator[bytes]:
    options = RequestOptions(live_citations=True)
    server = load_server_settings()
    return openai_chat._stream(_pipeline(), server, "What does ABCA1 do?", options, "r1", True)


def _ai_sdk() -> AsyncIterator[bytes]:
    options = RequestOptions(live_citations=True)
    return ai_sdk._stream(_pipeline(), "What does ABCA1 do?", options)


def _check(
    make: Frames, own: tuple[str, ...], first: bytes, is_token: Callable[[Any], bool]
) -> None:
    keeping_up = asyncio.run(_writes(make(), slowly=False))
    # Sent at once, before the answer's work ran: the protocol's opening frame.
    assert keeping_up[0].startswith(first)
    assert keeping_up[-1] == DONE
    tokens = sum(1 for payload in _payloads(keeping_up, own) if is_token(payload))
    assert tokens > 20  # live numbering holds a marker's characters back: fewer than 58
    assert len(keeping_up) > tokens  # a write for each token
    slow = asyncio.run(_writes(make(), slowly=True))
    # All the work emitted while the reader was away went out in one write, before the end.
    assert len(slow) == 4
    assert slow[-1] == DONE
    assert slow[2].count(b"data: ") >= tokens - 1  # (the second write had one, perhaps)
    # The same frames, whatever the writes.
    assert _payloads(slow, own) == _payloads(keeping_up, own)


def test_an_openai_stream_writes_what_waited_in_one_write() -> None:
    own = ("created", "timings", "total_ms", "first_token_ms")

    def is_token(payload: Any) -> bool:
        choices = payload.get("choices") if isinstance(payload, dict) else None
        return (
            isinstance(choices, list) and bool(choices) and set(choices[0]["delta"]) == {"content"}
        )

    _check(_openai, own, b'data: {"id": ', is_token)


def test_an_ai_sdk_stream_writes_what_waited_in_one_write() -> None:
    own = ("messageId", "request_id", "timings", "total_ms", "first_token_ms")
    _check(
        _ai_sdk,
        own,
        b'data: {"type": "start"',
        lambda payload: isinstance(payload, dict) and payload["type"] == "text-delta",
    )
