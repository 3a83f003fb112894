"""The pipeline object: one question in, events or a JSON result out.

    from pipelines.pipeline import AnswerPipeline

    pipeline = AnswerPipeline()                    # settings from the environment
    result = pipeline.invoke("What causes Tangier disease?")
    result["text"], result["references"]           # the done event's data, plus request_id

    for event in pipeline.stream("What does IDH1 R132H do?"):
        print(event.type, event.data)              # start, citation..., token..., done

``ainvoke`` and ``astream`` are the same for asyncio. ``pipeline.chain`` is the underlying
LangChain Runnable (``{"question", "history", "collections", "cite_urls"}`` -> answer text);
it works with LangChain's own ``astream_events``. Each call builds its own
:class:`AnswerEventHandler`, so one pipeline serves concurrent requests.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import queue
import sys
import threading
import time
import uuid
import weakref
from collections.abc import AsyncGenerator, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda, RunnablePassthrough

from callbacks.events import DoneEvent, ErrorEvent, Event
from callbacks.handler import ANSWER_TAG, RETRIEVAL_TAG, AnswerEventHandler
from callbacks.log import EventLog, log_file_name, prune_configured_logs

# Imported here, before any request starts a worker thread: a log opened in one thread and a
# search in another would otherwise import chromadb (and numpy) at the same time, and a
# package imported from two threads at once can be seen half initialized.
from pipelines import store
from pipelines.definitions import catalog_for, load_catalog
from pipelines.errors import ModelError, ReactomeAnswersError, StoreUnavailableError
from pipelines.normalize import normalize_question
from pipelines.prompts import answer_messages
from pipelines.questions import refusal_for
from pipelines.redaction import one_line, redact_secrets
from pipelines.settings import Settings, load_settings
from pipelines.sources import number_sources

__all__ = ["NOTHING_FOUND", "AnswerPipeline", "answer_result"]

_PRUNE_EVERY_S = 60.0
_RELEASES_TTL_S = 10.0

# What a nothing-found answer says with the bundled collections (a pipeline whose settings
# declare more names them too).
NOTHING_FOUND = load_catalog().nothing_found()

History = Sequence[tuple[str, str]]


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


def answer_result(events: Sequence[Event]) -> dict[str, Any]:
    """The JSON result of a request's events: ``done``'s data, ``request_id``, and ``error``
    (the error event's data) when the answer failed."""
    done = events[-1]
    assert isinstance(done, DoneEvent)
    result = {"request_id": done.request_id, **done.data.model_dump(mode="json")}
    errors = [event for event in events if isinstance(event, ErrorEvent)]
    if errors:
        result["error"] = errors[-1].data.model_dump(mode="json")
    return result


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
    ) -> None:
        """Everything is built from ``settings`` unless given: tests and embedders can pass
        their own models, embeddings, Chroma client, or a whole retriever (any Runnable from a
        question to documents; it is tagged as the retrieval run here).

        ``raise_handler_errors`` lets a failure inside the event handler end the answer with
        ``error`` then ``done`` (``failed``); off, LangChain logs it and carries on."""
        self.settings = settings or load_settings()
        self._retriever = retriever
        self._logs_pruned_at: float | None = None
        self._releases: tuple[float, dict[str, dict[str, str]]] | None = None
        self.raise_handler_errors = raise_handler_errors
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_lock = threading.Lock()
        self._embeddings = embeddings
        self._answer_model = answer_model
        self._expander_model = expander_model
        self._client = client

    # --- parts, built on first use --------------------------------------------------------

    @cached_property
    def embeddings(self) -> Embeddings:
        if self._embeddings is None:
            from pipelines.embeddings import make_embeddings

            self._embeddings = make_embeddings(self.settings)
        return self._embeddings

    @cached_property
    def models(self) -> tuple[BaseChatModel, BaseChatModel]:
        if self._answer_model is not None and self._expander_model is not None:
            return self._answer_model, self._expander_model
        from pipelines.providers import make_models

        answer, expander = make_models(self.settings, self.embeddings)
        return self._answer_model or answer, self._expander_model or expander

    @cached_property
    def retriever(self) -> Runnable[str, list[Document]]:
        if self._retriever is not None:
            given = self._retriever
            if not isinstance(given, BaseRetriever):
                # The handler opens the gate on a retriever run's end: wrap plain Runnables.
                given = _RunnableRetriever(runnable=given)
            return given.with_config(tags=[RETRIEVAL_TAG], run_name="retrieval")
        from pipelines.retriever import ReactomeRetriever

        retriever = ReactomeRetriever(
            settings=self.settings,
            client=self._client,  # None: the process's own client, reopened as versions change
            embeddings=self.embeddings,
            expander=self.models[1],
            k=self.settings.max_sources,
        )
        return retriever.with_config(tags=[RETRIEVAL_TAG], run_name="retrieval")

    def collection_releases(self) -> dict[str, dict[str, str]]:
        """Which release and version of each collection answers now, for the event log.

        Read at most every few seconds (an ingest may switch versions under a running server),
        and empty when the store cannot say: a log header is never worth failing a request."""
        now = time.monotonic()
        if self._releases is not None and now - self._releases[0] < _RELEASES_TTL_S:
            return self._releases[1]
        releases: dict[str, dict[str, str]] = {}
        if self._retriever is None:
            try:
                releases = {
                    info.name: {"release": info.release, "version": info.version}
                    for info in store.collection_infos(
                        self.store_client(), catalog_for(self.settings).names
                    )
                }
            except Exception:
                releases = {}
        self._releases = (now, releases)
        return releases

    def store_client(self) -> Any:
        """The Chroma client this pipeline reads through: the one given, or the process's own
        client for the settings' store (which the retriever may have reopened since)."""
        return self._client if self._client is not None else store.open_client(self.settings)

    def remove_retired_versions(self) -> None:
        """Remove the versions an ingest retired once no request can still read them
        (:func:`pipelines.store.remove_retired_versions`); ``serve`` calls this every few
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
            print(f"reactome-answers: warning: retired collection versions not removed "
                  f"({one_line(error)})", file=sys.stderr)  # fmt: skip

    @cached_property
    def chain(self) -> Runnable[dict[str, Any], str]:
        """``{"question", "history"?, "collections"?, "cite_urls"?}`` -> the raw answer text."""
        answer_model = self.models[0].with_config(tags=[ANSWER_TAG], run_name="answer_model")

        def retrieval_kwargs(inputs: dict[str, Any]) -> dict[str, Any]:
            if self._retriever is not None:
                return {}  # a retriever given from outside takes the question alone
            return {
                "history": list(inputs.get("history") or []),
                "collections": inputs.get("collections"),
            }

        def retrieve(inputs: dict[str, Any], config: RunnableConfig) -> list[Document]:
            return self.retriever.invoke(inputs["question"], config, **retrieval_kwargs(inputs))

        async def aretrieve(inputs: dict[str, Any], config: RunnableConfig) -> list[Document]:
            return await self.retriever.ainvoke(
                inputs["question"], config, **retrieval_kwargs(inputs)
            )

        def prompt(inputs: dict[str, Any]) -> list[BaseMessage] | None:
            cite_urls = inputs.get("cite_urls")
            cite_urls = self.settings.cite_urls if cite_urls is None else bool(cite_urls)
            sources, context = number_sources(inputs["documents"], cite_urls=cite_urls)
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
                return "".join(_text_of(c.content) for c in answer_model.stream(messages, config))

        async def aanswer(inputs: dict[str, Any], config: RunnableConfig) -> str:
            messages = prompt(inputs)
            if messages is None:
                return ""
            with _model_errors():
                parts = [_text_of(c.content) async for c in answer_model.astream(messages, config)]
            return "".join(parts)

        return (
            RunnablePassthrough.assign(documents=RunnableLambda(retrieve, afunc=aretrieve))
            | RunnableLambda(answer, afunc=aanswer)
        ).with_config(run_name="reactome-answers")

    # --- one request ----------------------------------------------------------------------

    def _check_question(self, question: str) -> str | None:
        """Why the question is refused, or None."""
        return refusal_for(question, self.settings.max_question_chars)

    async def _run(self, handler: AnswerEventHandler, inputs: dict[str, Any]) -> None:
        config: RunnableConfig = {"callbacks": [handler], "run_name": "reactome-answers"}
        limit = self.settings.request_timeout_s
        try:
            async with asyncio.timeout(limit) as deadline:
                reply = await self.chain.ainvoke(inputs, config)
        except TimeoutError:
            if deadline.expired():
                handler.fail(
                    "timeout",
                    f"no answer within {limit:g} s; raise REACTOME_ANSWERS_REQUEST_TIMEOUT_S "
                    "or try again",
                )
            else:  # the model or its client timed out, not the request
                handler.fail("model_failed", "the model did not answer in time; try again")
            return
        except asyncio.CancelledError:
            if handler.done is None:
                handler.fail("cancelled", "the request was cancelled before it finished")
            raise
        except ReactomeAnswersError as error:
            handler.fail(error.code, str(error))
            return
        except Exception as error:
            handler.fail("internal", one_line(error))
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
        request_id: str | None = None,
    ) -> AsyncGenerator[Event, None]:
        """Yield the request's events: ``start``, ``citation``..., ``token``..., ``done``."""
        catalog_for(self.settings).check(collections or ())
        cite = self.settings.cite_urls if cite_urls is None else cite_urls
        request_id = request_id or uuid.uuid4().hex
        options = {"llm": self.settings.llm, "cite_urls": cite, "history_turns": len(history)}
        # Every rule and the search read the canonical form; what is echoed (the start event)
        # and logged is what was asked, with pasted credentials redacted.
        normalized = normalize_question(question)
        shown = redact_secrets(question)
        events: asyncio.Queue[Event] = asyncio.Queue()
        log: EventLog | None = None
        if self.settings.event_logs:
            # In a worker thread: reading the collections' releases and pruning old logs touch
            # the store and the disk, which must not stall the other streams on this loop.
            opening = asyncio.ensure_future(
                asyncio.to_thread(
                    self._open_log,
                    request_id,
                    {"question": shown, "normalized_question": redact_secrets(normalized)},
                    collections,
                    options,
                )
            )
            try:
                log = await asyncio.shield(opening)
            except asyncio.CancelledError:
                # The caller left while the log was being opened: once it is, it still gets
                # its start, a cancelled error and its done, like any other cancelled answer.
                def end_cancelled(opened: asyncio.Future[EventLog | None]) -> None:
                    failed = opened.cancelled() or opened.exception() is not None
                    cancelled_log = None if failed else opened.result()
                    if cancelled_log is None:
                        return
                    handler = AnswerEventHandler(
                        request_id=request_id,
                        emit=cancelled_log.event,
                        cite_urls=cite,
                        record=cancelled_log.callback,
                    )
                    handler.start(shown, list(collections or ["auto"]), options)
                    handler.fail("cancelled", "the request was cancelled before it started")
                    cancelled_log.close()

                opening.add_done_callback(end_cancelled)
                raise

        def emit(event: Event) -> None:
            events.put_nowait(event)
            if log is not None:
                log.event(event)

        handler = AnswerEventHandler(
            request_id=request_id,
            emit=emit,
            cite_urls=cite,
            raise_error=self.raise_handler_errors,
            record=log.callback if log is not None else None,
        )
        handler.start(shown, list(collections or ["auto"]), options)
        refusal = self._check_question(normalized)
        task: asyncio.Task[None] | None = None
        if refusal is not None:
            handler.finish("refused", text=refusal)
        else:
            inputs = {
                "question": normalized,
                "history": list(history),
                "collections": list(collections) if collections else None,
                "cite_urls": cite,
            }
            task = asyncio.create_task(self._run(handler, inputs))
        try:
            while True:
                event = await self._next_event(events, task, handler)
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

    def _open_log(
        self,
        request_id: str,
        questions: dict[str, str],
        collections: Sequence[str] | None,
        options: dict[str, Any],
    ) -> EventLog | None:
        if not self.settings.event_logs:
            return None
        now = datetime.now(UTC)
        settings = self.settings.model_dump(mode="json", exclude={"home"})
        log = EventLog(
            self.settings.logs_dir / log_file_name(request_id, now),
            {
                "request_id": request_id,
                **questions,
                "collections": list(collections or ["auto"]),
                "releases": self.collection_releases(),
                "options": options,
                "settings_digest": hashlib.sha256(
                    json.dumps(settings, sort_keys=True).encode()
                ).hexdigest()[:16],
                "created_at": now.isoformat(timespec="milliseconds"),
            },
        )
        # After opening, so the new log counts as the newest and is never the one pruned; a
        # folder that cannot be written has already been reported once.
        if log.writing:
            self._prune_logs_now_and_then()
        return log

    def _prune_logs_now_and_then(self) -> None:
        # Listing the folder on every request would cost a busy server; once a minute keeps
        # the folder within its limits give or take a minute's worth of logs.
        now = time.monotonic()
        if self._logs_pruned_at is not None and now - self._logs_pruned_at < _PRUNE_EVERY_S:
            return
        self._logs_pruned_at = now
        try:
            prune_configured_logs(self.settings)
        except Exception as error:  # housekeeping must never fail an answer
            print(f"reactome-answers: warning: old event logs not pruned ({one_line(error)})",
                  file=sys.stderr)  # fmt: skip

    @staticmethod
    async def _next_event(
        events: asyncio.Queue[Event],
        task: asyncio.Task[None] | None,
        handler: AnswerEventHandler,
    ) -> Event:
        """The next event; if the work ended without ``done`` (a bug), a ``done`` anyway."""
        getter = asyncio.ensure_future(events.get())
        if task is not None and not task.done():
            await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
        if getter.done() or not events.empty() or task is None or not task.done():
            return await getter
        # The work is over and left no event behind: it died without its done.
        getter.cancel()
        if handler.done is None:
            problem = None if task.cancelled() else task.exception()
            why = one_line(problem) if problem is not None else "cancelled"
            handler.fail("internal", f"the answer stopped unexpectedly ({why})")
        return events.get_nowait()

    async def ainvoke(self, question: str, **options: Any) -> dict[str, Any]:
        """The JSON result: the ``done`` event's data plus ``request_id``, and for a failed
        answer the ``error`` event's data (``code``, ``message``) as ``error``."""
        return answer_result([event async for event in self.astream(question, **options)])

    def _stream_loop(self) -> asyncio.AbstractEventLoop:
        """One event loop in a daemon thread for every :meth:`stream` of this pipeline; a
        loop (and its thread pool) per call cost a few milliseconds before each answer."""
        with self._loop_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()

                def run() -> None:
                    loop.run_forever()
                    loop.close()

                threading.Thread(target=run, name="reactome-answers-stream", daemon=True).start()
                # The thread ends with the pipeline: nothing else holds the loop.
                weakref.finalize(self, loop.call_soon_threadsafe, loop.stop)
                self._loop = loop
            return self._loop

    def stream(self, question: str, **options: Any) -> Iterator[Event]:
        """:meth:`astream` for synchronous callers (the work runs on the pipeline's own event
        loop, in a thread of its own).

        Leaving the loop early cancels the work at once, as a disconnecting client would.
        """
        events: queue.Queue[Event | BaseException] = queue.Queue()
        finished = threading.Event()

        async def pump() -> None:
            try:
                async for event in self.astream(question, **options):
                    events.put(event)
            except BaseException as error:  # delivered to the caller's thread
                events.put(error)
            finally:
                finished.set()

        work = asyncio.run_coroutine_threadsafe(pump(), self._stream_loop())
        try:
            while True:
                item = events.get()
                if isinstance(item, asyncio.CancelledError):
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
                if isinstance(item, DoneEvent):
                    break
        finally:
            work.cancel()
            finished.wait()  # the cancelled work has cleaned up (its log is closed)

    def invoke(self, question: str, **options: Any) -> dict[str, Any]:
        """:meth:`ainvoke` for synchronous callers."""
        return answer_result(list(self.stream(question, **options)))
