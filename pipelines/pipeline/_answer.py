"""The :class:`AnswerPipeline`: its parts, built on first use, and the four ways to ask it.

One request's work is :class:`~pipelines.pipeline._request.AnswerRun`; what serves the
operator (``/healthz``, housekeeping) is :class:`~pipelines.pipeline._operator.PipelineOperator`.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import AsyncGenerator, Coroutine, Iterator, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, Unpack

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable

from callbacks.events import DoneEvent, Event
from pipelines.catalog.catalog import catalog_for, load_catalog
from pipelines.core.normalize import normalize_question
from pipelines.core.options import AskOptions, History, RequestOptions, asked_options
from pipelines.core.settings import Settings, load_settings
from pipelines.evidence.judges import EvidenceJudge

# Imported here, before any request starts a worker thread: a log opened in one thread and a
# search in another would otherwise import chromadb (and numpy) at the same time, and a
# package imported from two threads at once can be seen half initialized.
from pipelines.index import store  # noqa: F401
from pipelines.index.passages import RecentVectors, SentenceBank
from pipelines.language import detect_language
from pipelines.pipeline._chain import AnswerChain
from pipelines.pipeline._logs import RequestLogs
from pipelines.pipeline._operator import PipelineOperator
from pipelines.pipeline._parts import AnswerObserver
from pipelines.pipeline._request import AnswerRun
from pipelines.pipeline._result import answer_result
from pipelines.pipeline._retrieval import OutsideRetrieval, OwnRetrieval, Retrieval
from pipelines.pipeline._runnable import PipelineRunnable
from pipelines.pipeline._sync import SyncRunner
from pipelines.retrieval.advice import AdviceGate, AdviceVerdict
from pipelines.retrieval.refusal_rules import Refusal, advice_refusal, rule_refusal

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

    from callbacks.tracing.tracer import AnswerTracer
    from pipelines.retrieval.retriever import ReactomeRetriever

__all__ = ["AnswerPipeline", "History", "nothing_found_text"]


def _tracer(exporter: SpanExporter | None, *, content: bool) -> AnswerTracer | None:
    """Who traces this pipeline's answers: the exporter given, else the one the standard
    variables configure, else nobody (and nothing of OpenTelemetry is imported)."""
    if exporter is not None:
        from callbacks.tracing.tracer import AnswerTracer

        return AnswerTracer(exporter, where="the span exporter given", content=content)
    from callbacks.tracing.settings import TraceSettings

    settings = TraceSettings.from_environ()
    if settings is None:
        return None
    from callbacks.tracing.tracer import tracer_from_environ

    return tracer_from_environ(content=content, settings=settings)


def nothing_found_text() -> str:
    """What a nothing-found answer says with the bundled collections (a pipeline whose
    settings declare more names them too)."""
    return load_catalog().nothing_found()


class AnswerPipeline:
    """Answers questions from the ingested collections; see the package docstring."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        answer_model: BaseChatModel | None = None,
        expander_model: BaseChatModel | None = None,
        embeddings: Embeddings | None = None,
        client: Any = None,
        retriever: Runnable[str, list[Document]] | None = None,
        raise_handler_errors: bool = True,
        callbacks: Sequence[BaseCallbackHandler] = (),
        span_exporter: SpanExporter | None = None,
    ) -> None:
        """Everything is built from ``settings`` unless given: tests and embedders can pass
        their own models, embeddings, Chroma client, or a whole retriever (any Runnable from a
        question to documents; it is tagged as the retrieval run here).

        ``raise_handler_errors`` lets a failure inside the event handler end the answer with
        ``error`` then ``done`` (``failed``); off, LangChain logs it and carries on.

        ``callbacks``: more LangChain callback handlers for every request, beside ours: a
        tracer sees the run tree (the chain, its retrieval run with the expander's model run
        inside, and the answer model's run, each tagged). LangSmith's own tracer needs none:
        ``LANGSMITH_TRACING=true`` adds it (docs/deployment.md).

        ``span_exporter``: an OpenTelemetry exporter that every answer's trace goes to (the
        SDK's in-memory one in a test, say); without one, answers are traced when the
        standard variables name an endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT``;
        docs/operations.md), and nothing of OpenTelemetry is loaded otherwise."""
        self.settings = settings or load_settings()
        self._outside_retriever = retriever
        self.logs = RequestLogs(self.settings)
        self.raise_handler_errors = raise_handler_errors
        self.callbacks = list(callbacks)
        self.tracer = _tracer(span_exporter, content=self.settings.trace_content)
        self._sync = SyncRunner()
        # The sync runner's thread ends with the pipeline: nothing else holds its loop.
        weakref.finalize(self, self._sync.stop)
        self._embeddings = embeddings
        self._answer_model = answer_model
        self._expander_model = expander_model
        self._client = client
        # Told of every answer's start and end (the server's metrics); see AnswerObserver.
        self.observers: list[AnswerObserver] = []
        # What serves the operator rather than a request: /healthz, housekeeping.
        self.operator = PipelineOperator(self.settings, lambda: self.retrieval, client)

    # --- parts, built on first use --------------------------------------------------------

    @cached_property
    def embeddings(self) -> Embeddings:
        if self._embeddings is None:
            from pipelines.index.embeddings import make_embeddings

            self._embeddings = make_embeddings(self.settings)
        return self._embeddings

    @cached_property
    def models(self) -> tuple[BaseChatModel, BaseChatModel]:
        if self._answer_model is not None and self._expander_model is not None:
            return self._answer_model, self._expander_model
        from pipelines.answering.providers import make_models

        answer, expander = make_models(self.settings, self.embeddings, self.sentence_bank)
        return self._answer_model or answer, self._expander_model or expander

    @cached_property
    def retrieval(self) -> Retrieval:
        """Where documents come from: our retriever over the store, or the one given."""
        if self._outside_retriever is not None:
            return OutsideRetrieval(self._outside_retriever)
        return OwnRetrieval(self.settings, self._build_retriever, self._client)

    def _build_retriever(self) -> ReactomeRetriever:
        from pipelines.retrieval.retriever import ReactomeRetriever

        return ReactomeRetriever(
            settings=self.settings,
            client=self._client,  # None: the process's own client, reopened as versions change
            # The question's vector is kept for the answer model (RecentVectors).
            embeddings=self.recent_vectors.recording(),
            expander=self.models[1],
            k=self.settings.max_sources,
            # Judged on the vector the search computes anyway: no embedding of its own.
            advice_gate=self.advice_gate,
            multilingual=self._multilingual_embeddings,
        )

    def _multilingual_embeddings(self) -> Embeddings | None:
        """The multilingual model beside the embeddings (decision 0037), loaded when a
        question in another language first needs it."""
        from pipelines.index.embeddings import make_multilingual_embeddings

        return make_multilingual_embeddings(self.settings, self.embeddings)

    @property
    def own_retriever(self) -> ReactomeRetriever | None:
        """The retriever built from the settings; None when one was given from outside."""
        return self.retrieval.retriever

    @property
    def retriever(self) -> Runnable[str, list[Document]]:
        """The one top-level retrieval run (tagged: its end is the gate)."""
        return self.retrieval.runnable

    @cached_property
    def chain(self) -> Runnable[dict[str, Any], str]:
        """``{"question", "history"?, "collections"?, "cite_urls"?}`` -> the raw answer text;
        it works with LangChain's own ``astream_events``."""
        return AnswerChain(
            lambda: self.retrieval.runnable,
            self.models[0],
            cite_urls=self.settings.cite_urls,
            takes_options=self.retrieval.takes_options,
        )

    def as_runnable(self) -> PipelineRunnable:
        """This pipeline as a LangChain Runnable for LCEL chains and LangGraph nodes: input
        ``{"question", "history"?, "collections"?, "cite_urls"?, "live_citations"?}``, output
        the JSON result; each event is dispatched as a custom event named after its type, so
        ``astream_events`` shows them (``pipeline.chain`` is the inner chain, raw text)."""
        return PipelineRunnable(self)

    @cached_property
    def advice_gate(self) -> AdviceGate | None:
        """The personal-advice gate over this pipeline's embeddings
        (:mod:`pipelines.retrieval.advice`); None for a pipeline built around an outside
        retriever without embeddings of its own, which then has the rules alone."""
        if self._outside_retriever is not None and self._embeddings is None:
            return None
        return AdviceGate(
            self.embeddings,
            catalog=catalog_for(self.settings),
            multilingual=self._multilingual_embeddings,
        )

    @cached_property
    def sentence_bank(self) -> SentenceBank:
        """Retrieved passages' sentences and vectors, shared by the answer model and the
        evidence judge (:mod:`pipelines.index.passages`). A pipeline given its retriever
        and answer model but no embeddings loads no embedding model for the judge alone: it
        weighs the words."""
        given = self._outside_retriever is not None and self._answer_model is not None
        if given and self._embeddings is None:
            return SentenceBank(None)
        return SentenceBank(self.recent_vectors)

    @cached_property
    def recent_vectors(self) -> RecentVectors:
        """The embeddings as the retriever and the sentence bank use them: the vectors of
        the texts embedded or found lately are kept, so the answer model and the judge do
        not embed again the question the retriever embedded or a sentence found stored."""
        return RecentVectors(self.embeddings)

    @cached_property
    def evidence_judge(self) -> EvidenceJudge | None:
        """Who rules on each citation (``evidence_judge``); None when ``evidence`` is off."""
        if self.settings.evidence == "off":
            return None
        from pipelines.evidence.judges import make_judge

        return make_judge(self.settings, self.sentence_bank, self._multilingual_embeddings)

    # --- the checks before any search ----------------------------------------------------

    def check_question(self, question: str) -> Refusal | None:
        """The rules' refusal of the (normalized) question, or None: cheap, no model."""
        return rule_refusal(question, self.settings.max_question_chars)

    def check_advice(self, question: str) -> Refusal | None:
        """The advice gate's refusal of the (normalized) question, or None: one embedding."""
        judged = self.judge_advice(question)
        return None if judged is None else advice_refusal(judged[0])

    def judge_advice(self, question: str) -> tuple[AdviceVerdict, float, float] | None:
        """The advice gate's verdict on the (normalized) question, and when it began and
        ended (``time.perf_counter``); None without a gate."""
        gate = self.advice_gate
        if gate is None:
            return None
        started = time.perf_counter()
        verdict = gate.check(question)
        return verdict, started, time.perf_counter()

    def refusal(self, question: str, language: str | None = None) -> str | None:
        """Why ``question`` would be refused before any search, or None when it would be
        answered: what a request checks first (the rules, then the advice gate), without
        running one. A generative expander may still refuse it during retrieval. The text is
        in ``language``, else in the question's own."""
        normalized = normalize_question(question)
        found = self.check_question(normalized) or self.check_advice(normalized)
        if found is None:
            return None
        return found.text_in(language or detect_language(normalized))

    # --- asking -----------------------------------------------------------------------------

    def events(
        self, question: str, options: RequestOptions, *, request_id: str | None = None
    ) -> AsyncGenerator[Event, None]:
        """:meth:`astream` with the options as one object (what the HTTP routes and the
        Runnable build)."""
        # Closing what the caller holds must close the request at once (it cancels the
        # model's work): the request's events close its batches as they close.
        return AnswerRun(self, question, options, request_id).events()

    def event_batches(
        self, question: str, options: RequestOptions, *, request_id: str | None = None
    ) -> AsyncGenerator[list[Event], None]:
        """:meth:`events` as lists: each list the events already waiting when it was asked
        for (one or more), for a writer that sends each list in one write."""
        return AnswerRun(self, question, options, request_id).batches()

    def astream(
        self, question: str, *, request_id: str | None = None, **options: Unpack[AskOptions]
    ) -> AsyncGenerator[Event, None]:
        """Yield the request's events: ``start``, ``citation``..., ``token``..., ``done``.

        The options are :class:`~pipelines.core.options.RequestOptions`' (``history``,
        ``collections``, ``cite_urls``, ``live_citations``, ``language``): with
        ``live_citations`` the tokens carry their final markers, and a ``reference`` event
        comes right before the token that first cites each source (docs/contract.md);
        ``language`` is the asker's (a BCP 47 tag; None: detected from the question)."""
        return self.events(question, asked_options(options), request_id=request_id)

    def ainvoke(
        self, question: str, *, request_id: str | None = None, **options: Unpack[AskOptions]
    ) -> Coroutine[Any, Any, dict[str, Any]]:
        """The JSON result: the ``done`` event's data plus ``request_id``, and for a failed
        answer the ``error`` event's data (``code``, ``message``) as ``error``. A coroutine
        from a plain method, so that a misspelt option fails at the call, as the others do."""
        return _collected(self.astream(question, request_id=request_id, **options))

    def stream(
        self, question: str, *, request_id: str | None = None, **options: Unpack[AskOptions]
    ) -> Iterator[Event]:
        """:meth:`astream` for synchronous callers (the work runs on the pipeline's own event
        loop, in a thread of its own).

        Leaving the loop early cancels the work at once, as a disconnecting client would.
        """
        asked = asked_options(options)
        return self.stream_options(question, asked, request_id=request_id)

    def stream_options(
        self, question: str, options: RequestOptions, *, request_id: str | None = None
    ) -> Iterator[Event]:
        """:meth:`events` for synchronous callers."""
        return self._sync.iterate(
            lambda: self.events(question, options, request_id=request_id),
            last=lambda event: isinstance(event, DoneEvent),
        )

    def invoke(
        self, question: str, *, request_id: str | None = None, **options: Unpack[AskOptions]
    ) -> dict[str, Any]:
        """:meth:`ainvoke` for synchronous callers."""
        return answer_result(list(self.stream(question, request_id=request_id, **options)))


async def _collected(events: AsyncGenerator[Event, None]) -> dict[str, Any]:
    return answer_result([event async for event in events])
