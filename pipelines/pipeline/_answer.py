"""The :class:`AnswerPipeline`: its parts, built on first use, and one request's events."""

from __future__ import annotations

import asyncio
import uuid
import weakref
from collections.abc import AsyncGenerator, Iterator, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, cast

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable, RunnableConfig

from callbacks.events import DoneData, DoneEvent, Event, TokenEvent
from callbacks.handler import AnswerEventHandler
from callbacks.log import EventLog
from pipelines.catalog.catalog import catalog_for, load_catalog
from pipelines.core.errors import (
    ErrorCode,
    PersonalAdviceError,
    ReactomeAnswersError,
    StoreUnavailableError,
)
from pipelines.core.normalize import normalize_question
from pipelines.core.redaction import one_line, redact_also, redact_secrets, warn_not_done
from pipelines.core.settings import Settings, load_settings

# Imported here, before any request starts a worker thread: a log opened in one thread and a
# search in another would otherwise import chromadb (and numpy) at the same time, and a
# package imported from two threads at once can be seen half initialized.
from pipelines.index import store
from pipelines.pipeline._chain import AnswerChain, tagged_retriever
from pipelines.pipeline._logs import RequestLogs
from pipelines.pipeline._result import answer_result
from pipelines.pipeline._runnable import PipelineRunnable
from pipelines.pipeline._sync import SyncRunner
from pipelines.retrieval.advice import AdviceGate
from pipelines.retrieval.refusal_rules import ADVICE_REFUSAL, Refusal, rule_refusal

if TYPE_CHECKING:
    from pipelines.retrieval.retriever import ReactomeRetriever

__all__ = ["NOTHING_FOUND", "REFUSAL_EVENT", "AnswerObserver", "AnswerPipeline", "History"]

# The custom callback event that records why a question was refused: the event log keeps it
# as a callback record, which ``replay --check`` passes through without an event.
REFUSAL_EVENT = "reactome-answers:refusal"

# What a nothing-found answer says with the bundled collections (a pipeline whose settings
# declare more names them too).
NOTHING_FOUND = load_catalog().nothing_found()

History = Sequence[tuple[str, str]]

# Queued after a request's events once its work has ended (see _end_without_done).
_WORK_ENDED = object()


class AnswerObserver(Protocol):
    """Hears each answer start and end (``done`` None if it somehow ended without one), with
    the number of token events it sent; called on the event loop, so it must be quick."""

    def answer_started(self) -> None: ...

    def answer_finished(self, done: DoneData | None, tokens: int) -> None: ...


class AnswerPipeline:
    """Answers questions from the ingested collections; see the module docstring."""

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
    ) -> None:
        """Everything is built from ``settings`` unless given: tests and embedders can pass
        their own models, embeddings, Chroma client, or a whole retriever (any Runnable from a
        question to documents; it is tagged as the retrieval run here).

        ``raise_handler_errors`` lets a failure inside the event handler end the answer with
        ``error`` then ``done`` (``failed``); off, LangChain logs it and carries on.

        ``callbacks``: more LangChain callback handlers for every request, beside ours: a
        tracer sees the run tree (the chain, its retrieval run with the expander's model run
        inside, and the answer model's run, each tagged). LangSmith's own tracer needs none:
        ``LANGSMITH_TRACING=true`` adds it (docs/deployment.md)."""
        self.settings = settings or load_settings()
        # The server's own API keys, pasted into a question, are redacted from the start event
        # and the logs like any credential: no pattern or variable name would reveal them.
        redact_also(self.settings.api_key_set)
        self._retriever = retriever
        self._logs = RequestLogs(self.settings)
        self.raise_handler_errors = raise_handler_errors
        self.callbacks = list(callbacks)
        self._sync = SyncRunner()
        # The sync runner's thread ends with the pipeline: nothing else holds its loop.
        weakref.finalize(self, self._sync.stop)
        self._embeddings = embeddings
        self._answer_model = answer_model
        self._expander_model = expander_model
        self._client = client
        # Told of every answer's start and end (the server's metrics); see AnswerObserver.
        self.observers: list[AnswerObserver] = []

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

        answer, expander = make_models(self.settings, self.embeddings)
        return self._answer_model or answer, self._expander_model or expander

    @cached_property
    def own_retriever(self) -> ReactomeRetriever | None:
        """The retriever built from the settings; None when one was given from outside."""
        if self._retriever is not None:
            return None
        from pipelines.retrieval.retriever import ReactomeRetriever

        return ReactomeRetriever(
            settings=self.settings,
            client=self._client,  # None: the process's own client, reopened as versions change
            embeddings=self.embeddings,
            expander=self.models[1],
            k=self.settings.max_sources,
            # Judged on the vector the search computes anyway: no embedding of its own.
            advice_gate=self.advice_gate,
        )

    @cached_property
    def retriever(self) -> Runnable[str, list[Document]]:
        """The one top-level retrieval run (tagged: its end is the gate)."""
        own = self.own_retriever
        return tagged_retriever(own if own is not None else cast(Any, self._retriever))

    def collection_releases(self) -> dict[str, dict[str, Any]]:
        """What answers now for each ingested collection: its release, the version searched,
        which indexes rank it (``indexes``: vectors, and bm25 unless its keyword index is
        missing, then ``problem`` says why) and where its chunks are read from. Builds the
        local indexes of a version this machine has not seen (an instance sharing a Chroma
        server); empty for a retriever from outside."""
        own = self.own_retriever
        if own is None:
            return {}
        found = own.live_versions(catalog_for(self.settings).names)
        return {
            name: {
                "release": str(version.metadata.get(store.RELEASE, "unknown")),
                "version": version.name,
                **index.report(),
            }
            for name, (version, index) in found.items()
        }

    def degraded(self) -> dict[str, str]:
        """The collections answered with less than their indexes, and why (``/healthz``)."""
        return {
            name: str(release.get("problem", "keyword index missing"))
            for name, release in self.collection_releases().items()
            if "bm25" not in release["indexes"]
        }

    def store_client(self) -> Any:
        """The Chroma client this pipeline reads through: the one given, or the process's own
        client for the settings' store (which the retriever may have reopened since)."""
        return self._client if self._client is not None else store.open_client(self.settings)

    def remove_retired_versions(self) -> None:
        """Remove the versions an ingest retired once no request can still read them
        (:func:`pipelines.index.store.remove_retired_versions`); ``serve`` calls this every few
        seconds off its event loop, so they go even when no further ingest runs. Never raises:
        housekeeping must not fail a server, and a store that is down is reported by the
        answers and ``/healthz`` already."""
        if self._retriever is not None:
            return  # a retriever from outside: no store of ours
        try:
            store.remove_retired_versions(self.store_client(), self.settings)
        except StoreUnavailableError:
            pass
        except Exception as error:
            warn_not_done("retired collection versions not removed", error)

    @cached_property
    def chain(self) -> Runnable[dict[str, Any], str]:
        """``{"question", "history"?, "collections"?, "cite_urls"?}`` -> the raw answer text;
        it works with LangChain's own ``astream_events``."""
        return AnswerChain(
            lambda: self.retriever,
            self.models[0],
            cite_urls=self.settings.cite_urls,
            takes_options=self._retriever is None,
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
        if self._retriever is not None and self._embeddings is None:
            return None
        return AdviceGate(self.embeddings, catalog=catalog_for(self.settings))

    # --- one request ----------------------------------------------------------------------

    def _check_question(self, question: str) -> Refusal | None:
        """The rules' refusal of the (normalized) question, or None: cheap, no model."""
        return rule_refusal(question, self.settings.max_question_chars)

    def _check_advice(self, question: str) -> Refusal | None:
        """The advice gate's refusal of the (normalized) question, or None: one embedding."""
        gate = self.advice_gate
        if gate is None:
            return None
        verdict = gate.check(question)
        if not verdict.refused:
            return None
        return Refusal(ADVICE_REFUSAL, "similar_examples", verdict.detail())

    def refusal(self, question: str) -> str | None:
        """Why ``question`` would be refused before any search, or None when it would be
        answered: what a request checks first (the rules, then the advice gate), without
        running one. A generative expander may still refuse it during retrieval."""
        normalized = normalize_question(question)
        found = self._check_question(normalized) or self._check_advice(normalized)
        return None if found is None else found.text

    @staticmethod
    def _refuse(handler: AnswerEventHandler, refusal: Refusal) -> None:
        # Why, as a custom event: the log records it and a replay emits nothing for it.
        handler.on_custom_event(REFUSAL_EVENT, refusal.log_data(), run_id=uuid.uuid4())
        handler.finish("refused", text=refusal.text)

    async def _run(self, handler: AnswerEventHandler, inputs: dict[str, Any]) -> None:
        config: RunnableConfig = {
            "callbacks": [handler, *self.callbacks],
            "run_name": "reactome-answers",
        }
        limit = self.settings.request_timeout_s
        try:
            async with asyncio.timeout(limit) as deadline:
                if self._retriever is not None:
                    # An outside retriever does not consult the gate: ask it first, off the
                    # event loop (the first call embeds the examples, about a second).
                    refusal = await asyncio.to_thread(self._check_advice, inputs["question"])
                    if refusal is not None:
                        self._refuse(handler, refusal)
                        return
                reply = await self.chain.ainvoke(inputs, config)
        except TimeoutError:
            if deadline.expired():
                handler.fail(
                    ErrorCode.TIMEOUT,
                    f"no answer within {limit:g} s; raise REACTOME_ANSWERS_REQUEST_TIMEOUT_S "
                    "or try again",
                )
            else:  # the model or its client timed out, not the request
                handler.fail(ErrorCode.MODEL_FAILED, "the model did not answer in time; try again")
            return
        except asyncio.CancelledError:
            if handler.done is None:
                handler.fail(ErrorCode.CANCELLED, "the request was cancelled before it finished")
            raise
        except PersonalAdviceError as error:
            # The expander's or the gate's verdict, raised inside the retrieval run before any
            # search: no citation was sent and no answer token, so the answer is a plain refusal.
            self._refuse(handler, Refusal(ADVICE_REFUSAL, error.reason, error.detail))
            return
        except ReactomeAnswersError as error:
            handler.fail(error.code, str(error))
            return
        except Exception as error:
            handler.fail(ErrorCode.INTERNAL, one_line(error))
            return
        if not handler.retrieval_ended or (not handler.sources and not handler.context):
            handler.finish("nothing_found", text=catalog_for(self.settings).nothing_found())
        else:
            # A model that did not stream left no tokens: its reply is the answer.
            handler.finish("answered", text=None if handler.raw_text else reply)

    async def astream(
        self,
        question: str,
        *,
        history: History = (),
        collections: Sequence[str] | None = None,
        cite_urls: bool | None = None,
        live_citations: bool = False,
        request_id: str | None = None,
    ) -> AsyncGenerator[Event, None]:
        """Yield the request's events: ``start``, ``citation``..., ``token``..., ``done``.

        ``live_citations``: the tokens carry their final markers, and a ``reference`` event
        comes right before the token that first cites each source (docs/contract.md)."""
        catalog_for(self.settings).check(collections or ())
        cite = self.settings.cite_urls if cite_urls is None else cite_urls
        request_id = request_id or uuid.uuid4().hex
        options = {
            "llm": self.settings.llm,
            "cite_urls": cite,
            "live_citations": live_citations,
            "history_turns": len(history),
        }
        # Every rule and the search read the canonical form; what is echoed (the start event)
        # and logged is what was asked, with pasted credentials redacted.
        normalized = normalize_question(question)
        shown = redact_secrets(question)
        events: asyncio.Queue[Any] = asyncio.Queue()  # events, then perhaps _WORK_ENDED
        log: EventLog | None = None
        versions: dict[str, str] | None = None  # unpinned: each search takes the live ones
        if self.settings.event_logs:
            # In a worker thread: reading the collections' releases and pruning old logs touch
            # the store and the disk, which must not stall the other streams on this loop.
            opening = asyncio.ensure_future(
                asyncio.to_thread(
                    self._open_log,
                    request_id,
                    {
                        "question": shown,
                        "normalized_question": redact_secrets(normalized),
                        # What the expander and the model saw before the question.
                        "history": [
                            {"role": role, "content": redact_secrets(content)}
                            for role, content in history
                        ],
                    },
                    collections,
                    options,
                )
            )
            try:
                log, versions = await asyncio.shield(opening)
            except asyncio.CancelledError:
                # The caller left while the log was being opened: once it is, it still gets
                # its start, a cancelled error and its done, like any other cancelled answer.
                def end_cancelled(opened: asyncio.Future[tuple[EventLog | None, Any]]) -> None:
                    failed = opened.cancelled() or opened.exception() is not None
                    cancelled_log = None if failed else opened.result()[0]
                    if cancelled_log is None:
                        return
                    handler = AnswerEventHandler(
                        request_id=request_id,
                        emit=cancelled_log.event,
                        cite_urls=cite,
                        live_citations=live_citations,
                        record=cancelled_log.callback,
                    )
                    handler.start(shown, list(collections or ["auto"]), options)
                    handler.fail(ErrorCode.CANCELLED, "the request was cancelled before it started")
                    cancelled_log.close()

                opening.add_done_callback(end_cancelled)
                raise

        observers = list(self.observers)
        tokens = 0
        finished = False

        def emit(event: Event) -> None:
            nonlocal tokens, finished
            events.put_nowait(event)
            if log is not None:
                log.event(event)
            if observers:
                if isinstance(event, TokenEvent):
                    tokens += 1
                elif isinstance(event, DoneEvent):
                    finished = True
                    for observer in observers:
                        observer.answer_finished(event.data, tokens)

        handler = AnswerEventHandler(
            request_id=request_id,
            emit=emit,
            cite_urls=cite,
            live_citations=live_citations,
            raise_error=self.raise_handler_errors,
            record=log.callback if log is not None else None,
        )
        for observer in observers:
            observer.answer_started()
        handler.start(shown, list(collections or ["auto"]), options)
        refusal = self._check_question(normalized)
        task: asyncio.Task[None] | None = None
        if refusal is not None:
            self._refuse(handler, refusal)
        else:
            inputs = {
                "question": normalized,
                "history": list(history),
                "collections": list(collections) if collections else None,
                "cite_urls": cite,
                # The versions the log header names are the ones searched, even if an
                # ingest makes others live meanwhile.
                "versions": versions,
            }
            task = asyncio.create_task(self._run(handler, inputs))
            # Every event the work emits is queued before it ends; this comes after them all.
            task.add_done_callback(lambda _: events.put_nowait(_WORK_ENDED))
        try:
            while True:
                event = await events.get()
                if event is _WORK_ENDED:
                    assert task is not None
                    self._end_without_done(task, handler)
                    continue
                yield event
                if isinstance(event, DoneEvent):
                    break
        finally:
            try:
                if task is not None and not task.done():
                    task.cancel()  # the consumer went away: stop the model work too
                    await asyncio.gather(task, return_exceptions=True)
            finally:
                # Closed even when the await above is itself cancelled (anyio cancels every
                # await inside a cancelled scope, as Starlette's is after a disconnect).
                if log is not None:
                    log.close()
                if not finished:  # done never came (it always should): still counted out
                    for observer in observers:
                        observer.answer_finished(None, tokens)

    def _open_log(
        self,
        request_id: str,
        questions: dict[str, Any],
        collections: Sequence[str] | None,
        options: dict[str, Any],
    ) -> tuple[EventLog | None, dict[str, str] | None]:
        """The request's log, and the collection versions its header names (None when the
        store could not say: the search then takes the live ones)."""
        try:
            releases = self.collection_releases()
        except Exception:  # a log header is never worth failing a request
            releases = {}
        log = self._logs.open(request_id, questions, collections, options, releases)
        pinned = {name: str(release["version"]) for name, release in releases.items()}
        return log, pinned or None

    @staticmethod
    def _end_without_done(task: asyncio.Task[None], handler: AnswerEventHandler) -> None:
        """The work ended and no ``done`` came before (a bug): a failure, and ``done``, anyway.

        Waiting on the queue alone, with this marker queued when the work ends, costs one
        future per event; waiting on the queue and the task together cost a task and a
        wait per event (a tenth of the per-token time at a hosted model's pace)."""
        if handler.done is None:
            problem = None if task.cancelled() else task.exception()
            why = one_line(problem) if problem is not None else "cancelled"
            handler.fail(ErrorCode.INTERNAL, f"the answer stopped unexpectedly ({why})")

    async def ainvoke(
        self,
        question: str,
        *,
        history: History = (),
        collections: Sequence[str] | None = None,
        cite_urls: bool | None = None,
        live_citations: bool = False,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """The JSON result: the ``done`` event's data plus ``request_id``, and for a failed
        answer the ``error`` event's data (``code``, ``message``) as ``error``."""
        events = self.astream(
            question,
            history=history,
            collections=collections,
            cite_urls=cite_urls,
            live_citations=live_citations,
            request_id=request_id,
        )
        return answer_result([event async for event in events])

    def stream(
        self,
        question: str,
        *,
        history: History = (),
        collections: Sequence[str] | None = None,
        cite_urls: bool | None = None,
        live_citations: bool = False,
        request_id: str | None = None,
    ) -> Iterator[Event]:
        """:meth:`astream` for synchronous callers (the work runs on the pipeline's own event
        loop, in a thread of its own).

        Leaving the loop early cancels the work at once, as a disconnecting client would.
        """
        return self._sync.iterate(
            lambda: self.astream(
                question,
                history=history,
                collections=collections,
                cite_urls=cite_urls,
                live_citations=live_citations,
                request_id=request_id,
            ),
            last=lambda event: isinstance(event, DoneEvent),
        )

    def invoke(
        self,
        question: str,
        *,
        history: History = (),
        collections: Sequence[str] | None = None,
        cite_urls: bool | None = None,
        live_citations: bool = False,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """:meth:`ainvoke` for synchronous callers."""
        events = self.stream(
            question,
            history=history,
            collections=collections,
            cite_urls=cite_urls,
            live_citations=live_citations,
            request_id=request_id,
        )
        return answer_result(list(events))
