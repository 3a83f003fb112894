"""The LangChain Runnable behind a pipeline: retrieval (tagged as the gate), then the answer
model, streamed even under ``invoke`` so that ``on_llm_new_token`` fires."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForChainRun,
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForChainRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableConfig

from pipelines.answering.prompts import answer_messages
from pipelines.citations.sources import number_sources
from pipelines.core.errors import ModelError, ReactomeAnswersError
from pipelines.core.options import RequestOptions
from pipelines.core.redaction import one_line
from pipelines.core.tags import ANSWER_TAG, RETRIEVAL_TAG
from pipelines.language import detect_language

__all__ = ["AnswerChain", "tagged_retriever"]


@contextmanager
def _model_errors() -> Iterator[None]:
    """Whatever the model's client raises (HTTP errors, a dropped connection, llama.cpp)
    becomes a :class:`ModelError`; our own errors, the handler's among them, pass through."""
    try:
        yield
    except ReactomeAnswersError:
        raise
    except Exception as error:
        raise ModelError(
            f"the answer model failed ({one_line(error)})", fix="try again, or check the model"
        ) from error


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p if isinstance(p, str) else str(p.get("text", "")) for p in content or [])


class _RunnableRetriever(BaseRetriever):
    """Any Runnable from a question to documents, as a retriever run."""

    runnable: Runnable[str, list[Document]]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self.runnable.invoke(query, {"callbacks": run_manager.get_child()})

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        return await self.runnable.ainvoke(query, {"callbacks": run_manager.get_child()})


def tagged_retriever(retriever: Runnable[str, list[Document]]) -> Runnable[str, list[Document]]:
    """``retriever`` as the one top-level retrieval run whose end opens the handler's gate."""
    if not isinstance(retriever, BaseRetriever):
        # The handler opens the gate on a retriever run's end: wrap plain Runnables.
        retriever = _RunnableRetriever(runnable=retriever)
    return retriever.with_config(tags=[RETRIEVAL_TAG], run_name="retrieval")


class AnswerChain(Runnable[dict[str, Any], str]):
    """Retrieval, then the answer model, as one chain run with those two runs as its
    children. Written out rather than composed (``RunnablePassthrough.assign(...) |
    RunnableLambda(...)``): the composition started five chain runs per answer, each a round
    of callbacks, which was most of the time between retrieval and the first token."""

    name = "reactome-answers"

    def __init__(
        self,
        retriever: Callable[[], Runnable[str, list[Document]]],
        answer_model: BaseChatModel,
        *,
        cite_urls: bool,
        takes_options: bool,
    ) -> None:
        self._retriever = retriever
        self._model = answer_model.with_config(tags=[ANSWER_TAG], run_name="answer_model")
        self._cite_urls = cite_urls
        self._takes_options = takes_options

    @property
    def InputType(self) -> type[dict[str, Any]]:  # noqa: N802 (LangChain's name)
        return dict

    @property
    def OutputType(self) -> type[str]:  # noqa: N802
        return str

    @staticmethod
    def _options(inputs: dict[str, Any]) -> RequestOptions:
        # The pipeline passes its typed options; a LangChain caller of ``pipeline.chain``
        # passes the same options as plain keys.
        given = inputs.get("options")
        if isinstance(given, RequestOptions):
            return given
        return RequestOptions.from_mapping({k: v for k, v in inputs.items() if k != "question"})

    def _retrieval_kwargs(self, options: RequestOptions) -> dict[str, Any]:
        # A retriever from outside takes the question alone.
        return {"options": options} if self._takes_options else {}

    def _prompt(
        self, question: str, options: RequestOptions, documents: list[Document]
    ) -> list[BaseMessage] | None:
        cite = self._cite_urls if options.cite_urls is None else options.cite_urls
        sources, context = number_sources(documents, cite_urls=cite)
        if not sources and not context:
            return None  # nothing found: no model call at all
        return answer_messages(
            question,
            sources,
            context,
            list(options.history),
            # A LangChain caller of the chain itself gets the question's language too.
            language=options.language or detect_language(question),
        )

    # Streaming the model even under invoke is what makes on_llm_new_token fire. ``config``
    # carries this run's callbacks (LangChain passes it with them), so both runs are its
    # children.
    def _answer(
        self,
        inputs: dict[str, Any],
        run_manager: CallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> str:
        options = self._options(inputs)
        documents = self._retriever().invoke(
            inputs["question"], config, **self._retrieval_kwargs(options)
        )
        messages = self._prompt(inputs["question"], options, documents)
        if messages is None:
            return ""
        with _model_errors():
            return "".join(_text_of(c.content) for c in self._model.stream(messages, config))

    async def _aanswer(
        self,
        inputs: dict[str, Any],
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> str:
        options = self._options(inputs)
        documents = await self._retriever().ainvoke(
            inputs["question"], config, **self._retrieval_kwargs(options)
        )
        messages = self._prompt(inputs["question"], options, documents)
        if messages is None:
            return ""
        with _model_errors():
            parts = [_text_of(c.content) async for c in self._model.astream(messages, config)]
        return "".join(parts)

    def invoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> str:
        return self._call_with_config(self._answer, input, config)

    async def ainvoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> str:
        return await self._acall_with_config(self._aanswer, input, config)
