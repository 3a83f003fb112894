"""What one request and the Runnable read of the pipeline, as protocols.

:class:`~pipelines.pipeline._answer.AnswerPipeline` builds an
:class:`~pipelines.pipeline._request.AnswerRun` and a
:class:`~pipelines.pipeline._runnable.PipelineRunnable` over itself; they name what they use
of it here rather than the class, so that neither module imports the one that imports it
(tests/project/test_layers.py allows no cycle between modules).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from callbacks.events import DoneData, Event
from pipelines.core.options import RequestOptions
from pipelines.core.settings import Settings

if TYPE_CHECKING:
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.runnables import Runnable

    from callbacks.tracing.tracer import AnswerTracer
    from pipelines.evidence.judges import EvidenceJudge
    from pipelines.pipeline._logs import RequestLogs
    from pipelines.pipeline._operator import PipelineOperator
    from pipelines.pipeline._retrieval import Retrieval
    from pipelines.retrieval.advice import AdviceVerdict
    from pipelines.retrieval.refusal_rules import Refusal

__all__ = ["AnswerObserver", "EventSource", "RequestParts"]


class AnswerObserver(Protocol):
    """Hears each answer start and end (``done`` None if it somehow ended without one), with
    the number of token events it sent; called on the event loop, so it must be quick."""

    def answer_started(self) -> None: ...

    def answer_finished(self, done: DoneData | None, tokens: int) -> None: ...


class RequestParts(Protocol):
    """What an :class:`~pipelines.pipeline._request.AnswerRun` runs with."""

    settings: Settings
    raise_handler_errors: bool
    operator: PipelineOperator
    logs: RequestLogs
    callbacks: list[BaseCallbackHandler]
    observers: list[AnswerObserver]
    tracer: AnswerTracer | None

    @property
    def retrieval(self) -> Retrieval: ...

    @property
    def chain(self) -> Runnable[dict[str, Any], str]: ...

    @property
    def evidence_judge(self) -> EvidenceJudge | None: ...

    def check_question(self, question: str) -> Refusal | None: ...

    def check_advice(self, question: str) -> Refusal | None: ...

    def judge_advice(self, question: str) -> tuple[AdviceVerdict, float, float] | None: ...


class EventSource(Protocol):
    """What the Runnable answers with: a question and its options in, events out."""

    def events(
        self, question: str, options: RequestOptions, *, request_id: str | None = None
    ) -> AsyncGenerator[Event, None]: ...

    def stream_options(
        self, question: str, options: RequestOptions, *, request_id: str | None = None
    ) -> Iterator[Event]: ...
