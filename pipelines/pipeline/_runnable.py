"""The pipeline as a LangChain Runnable for LCEL chains and LangGraph nodes.

Input ``{"question", "history"?, "collections"?, "cite_urls"?, "live_citations"?,
"language"?}``, output the JSON result (``done``'s data plus ``request_id``, and ``error``
for a failed answer; ``language`` is the answer's, docs/contract.md). Each
of the request's events is dispatched as a custom event named after its type, with the event
as JSON for data, so ``astream_events(version="v2")`` over an application that contains this
Runnable shows ``citation``, ``reference``, ``token`` and ``done`` in the stream's order.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForChainRun,
    CallbackManagerForChainRun,
)
from langchain_core.callbacks.manager import adispatch_custom_event, dispatch_custom_event
from langchain_core.runnables import Runnable, RunnableConfig

from callbacks.events import Event
from pipelines.core.errors import InputError
from pipelines.core.options import RequestOptions
from pipelines.pipeline._result import answer_result

if TYPE_CHECKING:
    from pipelines.pipeline._parts import EventSource

__all__ = ["PipelineRunnable"]


def _arguments(inputs: Any) -> tuple[str, RequestOptions]:
    if isinstance(inputs, str):
        inputs = {"question": inputs}
    if not isinstance(inputs, dict) or not isinstance(inputs.get("question"), str):
        raise InputError(
            "the input has no question",
            fix='give {"question": "...", "history"?: [...], "collections"?: [...], '
            '"language"?: "es"}',
        )
    options = {key: value for key, value in inputs.items() if key != "question"}
    asked = RequestOptions.from_mapping(options)
    return inputs["question"], dataclasses.replace(asked, surface="runnable")


def _custom(event: Event) -> tuple[str, dict[str, Any]]:
    return event.type, event.model_dump(mode="json")


class PipelineRunnable(Runnable[dict[str, Any], dict[str, Any]]):
    """See the module: :meth:`AnswerPipeline.as_runnable` builds one."""

    name = "reactome-answers"

    def __init__(self, pipeline: EventSource) -> None:
        self._pipeline = pipeline

    @property
    def InputType(self) -> type[dict[str, Any]]:  # noqa: N802 (LangChain's name)
        return dict

    @property
    def OutputType(self) -> type[dict[str, Any]]:  # noqa: N802
        return dict

    def _run(
        self, inputs: Any, run_manager: CallbackManagerForChainRun, config: RunnableConfig
    ) -> dict[str, Any]:
        question, options = _arguments(inputs)
        events = []
        for event in self._pipeline.stream_options(question, options):
            events.append(event)
            dispatch_custom_event(*_custom(event), config=config)
        return answer_result(events)

    async def _arun(
        self, inputs: Any, run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig
    ) -> dict[str, Any]:
        question, options = _arguments(inputs)
        events = []
        async for event in self._pipeline.events(question, options):
            events.append(event)
            await adispatch_custom_event(*_custom(event), config=config)
        return answer_result(events)

    def invoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        return self._call_with_config(self._run, input, config)

    async def ainvoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        return await self._acall_with_config(self._arun, input, config)
