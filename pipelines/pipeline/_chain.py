"""The LangChain Runnable behind a pipeline: retrieval (tagged as the gate), then the answer
model, streamed even under ``invoke`` so that ``on_llm_new_token`` fires."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda, RunnablePassthrough

from pipelines.errors import ModelError, ReactomeAnswersError
from pipelines.prompts import answer_messages
from pipelines.redaction import one_line
from pipelines.sources import number_sources
from pipelines.tags import ANSWER_TAG, RETRIEVAL_TAG

__all__ = ["answer_chain", "tagged_retriever"]


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


def answer_chain(
    retriever: Callable[[], Runnable[str, list[Document]]],
    answer_model: BaseChatModel,
    *,
    cite_urls: bool,
    takes_options: bool,
) -> Runnable[dict[str, Any], str]:
    """``{"question", "history"?, "collections"?, "cite_urls"?}`` -> the raw answer text.

    ``retriever`` is called on each run (the tagged retriever is built on first use);
    ``takes_options``: it takes ``history`` and ``collections`` (ours does; a retriever from
    outside takes the question alone). ``cite_urls`` is the default when a run gives none."""
    model = answer_model.with_config(tags=[ANSWER_TAG], run_name="answer_model")

    def retrieval_kwargs(inputs: dict[str, Any]) -> dict[str, Any]:
        if not takes_options:
            return {}
        return {
            "history": list(inputs.get("history") or []),
            "collections": inputs.get("collections"),
        }

    def retrieve(inputs: dict[str, Any], config: RunnableConfig) -> list[Document]:
        return retriever().invoke(inputs["question"], config, **retrieval_kwargs(inputs))

    async def aretrieve(inputs: dict[str, Any], config: RunnableConfig) -> list[Document]:
        return await retriever().ainvoke(inputs["question"], config, **retrieval_kwargs(inputs))

    def prompt(inputs: dict[str, Any]) -> list[BaseMessage] | None:
        cite = inputs.get("cite_urls")
        cite = cite_urls if cite is None else bool(cite)
        sources, context = number_sources(inputs["documents"], cite_urls=cite)
        if not sources and not context:
            return None  # nothing found: no model call at all
        history = list(inputs.get("history") or [])
        return answer_messages(inputs["question"], sources, context, history)

    # Streaming the model even under invoke is what makes on_llm_new_token fire.
    def answer(inputs: dict[str, Any], config: RunnableConfig) -> str:
        messages = prompt(inputs)
        if messages is None:
            return ""
        with _model_errors():
            return "".join(_text_of(c.content) for c in model.stream(messages, config))

    async def aanswer(inputs: dict[str, Any], config: RunnableConfig) -> str:
        messages = prompt(inputs)
        if messages is None:
            return ""
        with _model_errors():
            parts = [_text_of(c.content) async for c in model.astream(messages, config)]
        return "".join(parts)

    return (
        RunnablePassthrough.assign(documents=RunnableLambda(retrieve, afunc=aretrieve))
        | RunnableLambda(answer, afunc=aanswer)
    ).with_config(run_name="reactome-answers")
