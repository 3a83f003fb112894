"""A base for our own chat models: the reply is computed from the prompt, then streamed."""

from __future__ import annotations

import asyncio
import re
from abc import abstractmethod
from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

__all__ = ["ComposedChatModel"]

_TOKEN_RE = re.compile(r"\S+\s*|\s+")


class ComposedChatModel(BaseChatModel):
    """A chat model whose whole reply is computed at once and streamed word by word.

    LangChain calls ``on_llm_new_token`` for each chunk, so callbacks see these models
    exactly as they see a generative model.
    """

    # LangChain streams under invoke only a model built with streaming=True explicitly (a
    # default does not count); the pipeline streams its answer model either way.
    streaming: bool = False

    @abstractmethod
    def reply(self, messages: list[BaseMessage]) -> str:
        """The whole answer to ``messages``."""

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self.reply(messages)))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for token in _TOKEN_RE.findall(self.reply(messages)):
            yield ChatGenerationChunk(message=AIMessageChunk(content=token))

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        # A reply may run an embedding model: keep it off the event loop.
        text = await asyncio.to_thread(self.reply, messages)
        for token in _TOKEN_RE.findall(text):
            yield ChatGenerationChunk(message=AIMessageChunk(content=token))
