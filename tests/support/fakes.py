"""A chat model whose stream is a script, for tests and benchmarks that need real streaming."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from pydantic import Field


class ScriptedStream(BaseChatModel):
    """Streams ``script(messages)`` token by token, ``delay_s`` before each one, and appends
    each token to ``produced`` as it goes (so a test can see when generation stops)."""

    script: Callable[[Sequence[BaseMessage]], Sequence[str]]
    delay_s: float = 0.0
    produced: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-stream"

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        raise NotImplementedError("stream this model")

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for token in self.script(messages):
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            self.produced.append(token)
            # LangChain's astream reports each chunk to the callbacks itself.
            yield ChatGenerationChunk(message=AIMessageChunk(content=token))
