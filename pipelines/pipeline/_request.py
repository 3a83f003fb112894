"""One request: its log, its handler, the chain under the time limit, and its events in order.

:meth:`AnswerPipeline.astream` builds an :class:`AnswerRun` and yields its events; the
pipeline holds the parts (models, retriever, chain), this module what one question needs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import threading
import uuid
from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_core.runnables import RunnableConfig

from callbacks.events import DoneEvent, Event, TokenEvent
from callbacks.handler import AnswerEventHandler
from callbacks.log import EventLog
from callbacks.log_header import LogHeader
from pipelines.catalog.catalog import catalog_for
from pipelines.core.errors import ErrorCode, PersonalAdviceError, ReactomeAnswersError
from pipelines.core.normalize import normalize_question
from pipelines.core.options import RequestOptions
from pipelines.core.redaction import one_line, redact_secrets
from pipelines.core.tags import ADVICE_RECORD, EVIDENCE_FAILED, EVIDENCE_STARTED, REFUSAL_EVENT
from pipelines.evidence.claims import Claim, Verdict
from pipelines.evidence.judges import judge_key
from pipelines.language import DEFAULT_LANGUAGE, detect_language
from pipelines.retrieval.refusal_rules import ADVICE_REFUSAL, Refusal, advice_refusal

if TYPE_CHECKING:
    from callbacks.tracing.tracer import TraceRecorder
    from pipelines.pipeline._parts import RequestParts

__all__ = ["REFUSAL_EVENT", "AnswerRun"]


# Queued after a request's events once its work has ended (see _end_without_done).
_WORK_ENDED = object()

_T = TypeVar("_T")


def _on_loop(function: Callable[..., None]) -> Callable[..., None]:
    """``function`` called as it is on the event loop's own thread, and from any other thread
    handed to the loop, in call order: the queue and the log are the loop's alone."""
    loop = asyncio.get_running_loop()
    loop_thread = threading.get_ident()

    def call(*args: Any) -> None:
        if threading.get_ident() == loop_thread:
            function(*args)
        else:
            loop.call_soon_threadsafe(function, *args)

    return call


async def _off_the_loop(work: Callable[[], _T]) -> _T:
    """Run CPU-bound finishing ``work`` in a worker thread, so a long answer's evidence and
    finalizing (seconds for 8,000 cited sentences) stall no other request on this worker.
    A cancellation waits for it, however often it comes (anyio cancels every await inside a
    cancelled scope, as Starlette's is after a disconnect, and the consumer's wait for this
    task is one): the work is bounded and already under way, and its ``done`` must reach the
    log before the log is closed."""
    running = asyncio.ensure_future(asyncio.to_thread(work))
    cancelled = False
    while not running.done():
        try:
            await asyncio.wait([running])
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return running.result()


def refuse(handler: AnswerEventHandler, refusal: Refusal) -> None:
    # Why, as a custom event: the log records it and a replay emits nothing for it.
    handler.on_custom_event(REFUSAL_EVENT, refusal.log_data(), run_id=uuid.uuid4())
    handler.finish("refused", text=refusal.text_in(handler.language))


def _conversation_language(options: RequestOptions) -> str:
    """The language of the asker's last turn, for a question too short to tell ("¿Y TP53?");
    English without one."""
    asked = [text for role, text in options.history if role == "user"]
    return detect_language(normalize_question(asked[-1])) if asked else DEFAULT_LANGUAGE


class AnswerRun:
    """One question through one pipeline; :meth:`events` runs it."""

    def __init__(
        self,
        pipeline: RequestParts,
        question: str,
        options: RequestOptions,
        request_id: str | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.settings = pipeline.settings
        self.request_id = request_id or uuid.uuid4().hex
        self.cite = self.settings.cite_urls if options.cite_urls is None else options.cite_urls
        # Every rule and the search read the canonical form; what is echoed (the start event)
        # and logged is what was asked, with pasted credentials redacted.
        self.normalized = normalize_question(question)
        self.shown = redact_secrets(question)
        self.collections = list(options.collections or ["auto"])
        # The language the asker named, else the question's own; the chain reads it from the
        # options (the answer prompt's variable), the handler puts it in ``done``.
        given = options.language
        # Only a question too short to tell reads the conversation's last turn ("" when unsure).
        self.language = (
            given or detect_language(self.normalized, "") or _conversation_language(options)
        )
        self.options = options = dataclasses.replace(options, language=self.language)
        self.surface = options.surface or "python"
        # The trace the answer joins, fixed before it starts (the log header and done name
        # it); None when it is not traced.
        tracer = pipeline.tracer
        self.trace = tracer.begin(options.traceparent, options.tracestate) if tracer else None
        self.start_options = {
            "llm": self.settings.llm,
            "cite_urls": self.cite,
            "live_citations": options.live_citations,
            "history_turns": len(options.history),
            "language": self.language,
            "language_from": "question" if given is None else "request",
        }

    def _handler(
        self,
        emit: Any,
        log: EventLog | None,
        record: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> AnswerEventHandler:
        return AnswerEventHandler(
            request_id=self.request_id,
            emit=emit,
            cite_urls=self.cite,
            live_citations=self.options.live_citations,
            language=self.language,
            raise_error=self.pipeline.raise_handler_errors,
            record=record or (log.callback if log is not None else None),
            trace_id=self.trace.trace_id if self.trace is not None else None,
            # A trace shows the models' text only with its content setting; a log keeps it.
            record_text=log is not None
            or self.pipeline.tracer is None
            or self.pipeline.tracer.content,
            # Without a log only a trace reads the records, once the answer has ended.
            records_later=log is None,
        )

    def _header(
        self,
        releases: dict[str, Any] | None = None,
        redact: Callable[[str], str] = redact_secrets,
    ) -> LogHeader:
        """What the request's log opens with, and its trace's spans are drawn under (with the
        redaction a batch of traces shares)."""
        trace = self.trace
        return LogHeader(
            request_id=self.request_id,
            question=self.shown,
            normalized_question=redact(self.normalized),
            # What the expander and the model saw before the question.
            history=tuple((role, redact(content)) for role, content in self.options.history),
            collections=tuple(self.options.collections or ("auto",)),
            releases=releases or {},
            options=self.start_options,
            surface=self.surface,
            trace_id=trace.trace_id if trace is not None else None,
            span_id=trace.span_id if trace is not None else None,
            parent_span_id=trace.parent_span_id if trace is not None else None,
        )

    # --- the log ---------------------------------------------------------------------------

    def _open_log(self) -> tuple[EventLog | None, dict[str, str] | None]:
        """The request's log, and the collection versions its header names (None when the
        store could not say: the search then takes the live ones)."""
        try:
            releases = self.pipeline.operator.collection_releases()
        except Exception:  # a log header is never worth failing a request
            releases = {}
        log = self.pipeline.logs.open(self._header(releases))
        pinned = {name: str(release["version"]) for name, release in releases.items()}
        return log, pinned or None

    def _log_cancelled_start(self, opened: asyncio.Future[Any]) -> None:
        """The caller left while the log was being opened: once it is, it still gets its
        start, a cancelled error and its done, like any other cancelled answer."""
        if opened.cancelled() or opened.exception() is not None:
            return
        log: EventLog | None = opened.result()[0]
        if log is None:
            return
        handler = self._handler(log.event, log)
        handler.start(self.shown, self.collections, self.start_options)
        handler.fail(ErrorCode.CANCELLED, "the request was cancelled before it started")
        log.close()

    # --- the work --------------------------------------------------------------------------

    async def _run(self, handler: AnswerEventHandler, options: RequestOptions) -> None:
        pipeline = self.pipeline
        config: RunnableConfig = {
            "callbacks": [handler, *pipeline.callbacks],
            "run_name": "reactome-answers",
        }
        limit = self.settings.request_timeout_s
        try:
            async with asyncio.timeout(limit) as deadline:
                if not pipeline.retrieval.checks_advice:
                    # Off the event loop: the first call embeds the examples, about a second.
                    refusal = await asyncio.to_thread(self._checked_advice, handler)
                    if refusal is not None:
                        refuse(handler, refusal)
                        return
                inputs = {"question": self.normalized, "options": options}
                reply = await pipeline.chain.ainvoke(inputs, config)
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
            refuse(handler, Refusal(ADVICE_REFUSAL, error.reason, error.detail))
            return
        except ReactomeAnswersError as error:
            handler.fail(error.code, str(error))
            return
        except Exception as error:
            handler.fail(ErrorCode.INTERNAL, one_line(error))
            return
        if not handler.retrieval_ended or (not handler.sources and not handler.context):
            handler.finish(
                "nothing_found", text=catalog_for(self.settings).nothing_found(self.language)
            )
        else:
            # A model that did not stream left no tokens: its reply is the answer. Judged
            # outside the answer's time limit: a slow judge costs the evidence, not the answer.
            try:
                verdicts = await self._judge(handler, reply)
            except asyncio.CancelledError:
                if handler.done is None:
                    handler.fail(
                        ErrorCode.CANCELLED, "the request was cancelled before it finished"
                    )
                raise
            await _off_the_loop(
                functools.partial(
                    handler.finish,
                    "answered",
                    text=None if handler.model_streamed else reply,
                    verdicts=verdicts,
                    drop=self.settings.evidence == "drop",
                )
            )

    def _checked_advice(self, handler: AnswerEventHandler) -> Refusal | None:
        """The advice gate's refusal, its ruling recorded as the retriever records its own."""
        judged = self.pipeline.judge_advice(self.normalized)
        if judged is None:
            return None
        verdict, started, ended = judged
        # From this worker thread, like the finishing work: the handler's records go to the
        # loop in call order (_on_loop).
        handler.on_custom_event(ADVICE_RECORD, verdict.timed(started, ended), run_id=uuid.uuid4())
        return advice_refusal(verdict)

    async def _judge(self, handler: AnswerEventHandler, reply: str) -> list[tuple[Claim, Verdict]]:
        """The judge's ruling on each (sentence, cited source) pair of the answer; none when
        the check is off, or the judge failed or took longer than one model call may (the
        answer is never failed for its judge: the log says why)."""
        judge = self.pipeline.evidence_judge
        if judge is None:
            return []
        limit = self.settings.model_timeout_s
        try:
            claims = await _off_the_loop(
                functools.partial(handler.claims, None if handler.model_streamed else reply)
            )
            if not claims:
                return []
            # When the step began and who rules, for a trace's evidence span.
            started = {"judge": self.settings.evidence_judge, "claims": len(claims)}
            handler.on_custom_event(EVIDENCE_STARTED, started, run_id=uuid.uuid4())
            async with asyncio.timeout(limit):
                found = await judge.judge(claims)
        except Exception as error:
            said = f"no ruling within {limit:g} s" if isinstance(error, TimeoutError) else None
            data = {"message": said or redact_secrets(one_line(error))}
            handler.on_custom_event(EVIDENCE_FAILED, data, run_id=uuid.uuid4())
            return []
        return [(claim, found[judge_key(claim)]) for claim in claims if judge_key(claim) in found]

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

    @staticmethod
    def _recording(
        log: EventLog | None, traced: TraceRecorder | None
    ) -> Callable[[str, dict[str, Any]], None] | None:
        """What the handler's records go to: the log and the trace, on the loop's thread."""
        if log is None and traced is None:
            return None
        if traced is None:
            assert log is not None
            return _on_loop(log.callback)
        if log is None:
            return _on_loop(traced.callback)
        log_callback, trace_callback = log.callback, traced.callback

        def both(hook: str, arguments: dict[str, Any]) -> None:
            log_callback(hook, arguments)
            trace_callback(hook, arguments)

        return _on_loop(both)

    async def events(self) -> AsyncGenerator[Event, None]:
        """``start``, ``citation``..., ``token``..., ``done``; leaving early cancels the work."""
        batches = self.batches()
        try:
            async for batch in batches:
                for event in batch:
                    yield event
        finally:
            # Closing this closes the request at once, as closing the batches does.
            await batches.aclose()

    async def batches(self) -> AsyncGenerator[list[Event], None]:
        """The events of :meth:`events`, in its order, as lists: each of the events that were
        already waiting when it was asked for, so that a writer sends them in one write (a
        slow reader, or a loaded server, costs fewer wakeups and sends)."""
        catalog_for(self.settings).check(self.options.collections or ())
        events: asyncio.Queue[Any] = asyncio.Queue()  # events, then perhaps _WORK_ENDED
        log: EventLog | None = None
        versions: dict[str, str] | None = None  # unpinned: each search takes the live ones
        if self.settings.event_logs:
            # In a worker thread: reading the collections' releases and pruning old logs touch
            # the store and the disk, which must not stall the other streams on this loop.
            opening = asyncio.ensure_future(asyncio.to_thread(self._open_log))
            try:
                log, versions = await asyncio.shield(opening)
            except asyncio.CancelledError:
                opening.add_done_callback(self._log_cancelled_start)
                raise

        observers = list(self.pipeline.observers)
        tokens = 0
        finished = False
        tracer = self.pipeline.tracer
        traced = tracer.recorder(self.trace) if tracer and self.trace else None

        @_on_loop  # finishing runs in a worker thread and emits from there
        def emit(event: Event) -> None:
            nonlocal tokens, finished
            events.put_nowait(event)
            if log is not None:
                log.event(event)
            if traced is not None:
                traced.event(event)
            if observers:
                if isinstance(event, TokenEvent):
                    tokens += 1
                elif isinstance(event, DoneEvent) and not finished:
                    finished = True
                    for observer in observers:
                        observer.answer_finished(event.data, tokens)

        def settle() -> None:
            """Once the work has ended: the log closed, and the answer counted out if its
            ``done`` never came (it always should)."""
            nonlocal finished
            try:
                if handler.done is None and task is not None and task.cancelled():
                    # Cancelled before it ever ran (its reader left after ``start``): the
                    # work's own ending never happened, so the log and the trace end here.
                    handler.fail(
                        ErrorCode.CANCELLED, "the request was cancelled before it finished"
                    )
            finally:
                if log is not None:
                    log.close()
                if traced is not None:
                    # made off the answer's path, with the batch's redaction
                    traced.submit(lambda redact: self._header(redact=redact))
                if not finished:
                    finished = True
                    for observer in observers:
                        observer.answer_finished(None, tokens)

        handler = self._handler(emit, log, record=self._recording(log, traced))
        for observer in observers:
            observer.answer_started()
        handler.start(self.shown, self.collections, self.start_options)
        refusal = self.pipeline.check_question(self.normalized)
        task: asyncio.Task[None] | None = None
        if refusal is not None:
            refuse(handler, refusal)
        else:
            # The versions the log header names are the ones searched, even if an ingest
            # makes others live meanwhile.
            task = asyncio.create_task(self._run(handler, self.options.pinned_to(versions)))
            # Every event the work emits is queued before it ends; this comes after them all.
            task.add_done_callback(lambda _: events.put_nowait(_WORK_ENDED))
        try:
            ended = False
            while not ended:
                batch: list[Event] = []
                item = await events.get()
                while True:
                    if item is _WORK_ENDED:
                        assert task is not None
                        self._end_without_done(task, handler)
                    else:
                        batch.append(item)
                        if isinstance(item, DoneEvent):
                            ended = True
                            break
                    if events.empty():
                        break
                    item = events.get_nowait()
                if batch:
                    yield batch
        finally:
            try:
                if task is not None and not task.done():
                    task.cancel()  # the consumer went away: stop the model work too
                    await asyncio.gather(task, return_exceptions=True)
            finally:
                if task is None or task.done():
                    settle()
                else:
                    # The wait above was itself cancelled (anyio cancels every await inside a
                    # cancelled scope, as Starlette's is after a disconnect). The work still
                    # ends on its own, a finishing thread's done included: settle then, so
                    # that done reaches the log and the answer is counted out once.
                    task.add_done_callback(lambda _: settle())
