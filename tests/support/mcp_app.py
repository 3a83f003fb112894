"""What the MCP tests against the real app share: the question and answer they ask, the app
served on 127.0.0.1 with chosen server settings, a model held until the test releases it (so
"at once" is a count, not a race), and an async wait for a condition."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from pydantic import Field

from app.http.factory import create_app
from app.http.settings import load_server_settings
from pipelines.pipeline import AnswerPipeline
from tests.support.servers import serve

__all__ = ["ANSWER", "QUESTION", "HeldModel", "served_app", "until"]

QUESTION = "What does ABCA1 do?"
ANSWER = "ABCA1 exports cholesterol [1]."


@contextmanager
def served_app(pipeline: AnswerPipeline, **server: Any) -> Iterator[str]:
    """The app over ``pipeline`` under uvicorn on 127.0.0.1, ``server`` its server settings;
    yields its base URL."""
    app = create_app(pipeline.settings, pipeline=pipeline, server=load_server_settings(**server))
    yield from serve(app)


class HeldModel(BaseChatModel):
    """Streams its answer only once ``release`` is set; ``started`` says it was asked."""

    answer: str
    started: threading.Event = Field(default_factory=threading.Event)
    release: threading.Event = Field(default_factory=threading.Event)

    @property
    def _llm_type(self) -> str:
        return "held"

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        raise NotImplementedError("stream this model")

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        self.started.set()
        await anyio.to_thread.run_sync(self.release.wait, abandon_on_cancel=True)
        yield ChatGenerationChunk(message=AIMessageChunk(content=self.answer))


async def until(condition: Any, what: str) -> None:
    """Wait for ``condition()`` without blocking the loop; fail naming ``what`` after a
    generous bound (on a loaded machine it only waits longer)."""
    with anyio.fail_after(60):
        while not condition():
            await anyio.sleep(0.02)
    assert condition(), what
