"""The callback handler that turns one request's LangChain callbacks into public events.

It keeps a ``run_map`` from the start callbacks (tags and names arrive there), and:

- emits ``citation`` events only inside ``on_retriever_end`` of the one top-level run tagged
  :data:`RETRIEVAL_TAG` (nested retrievers inherit the tag but have a tagged parent);
- emits ``token`` events only from a chat model or LLM run tagged :data:`ANSWER_TAG`, and only
  once that retrieval has ended, so every citation is on the wire before the first token;
- passes the answer model's text through :class:`~pipelines.citations.model_sources.ModelSources`
  first, so a Sources section the model wrote itself reaches no surface: a line that may open
  one is held until it is decided;
- on :meth:`finish`, strips out-of-range markers, finalizes the citations and emits ``done``;
- with ``live_citations``, rewrites the markers while the tokens stream instead
  (:mod:`pipelines.citations.live`), sending a ``reference`` event right before the token that
  first cites each source, so ``done`` repeats what was streamed.

One handler serves one request; nothing is shared between requests.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, GenerationChunk, LLMResult

from callbacks.events import (
    CitationData,
    CitationEvent,
    DoneData,
    DoneEvent,
    DoneState,
    ErrorData,
    ErrorEvent,
    Event,
    EvidenceData,
    Reference,
    ReferenceEvent,
    StartData,
    StartEvent,
    Timings,
    TokenData,
    TokenEvent,
    Usage,
)
from callbacks.finish_record import FinishRecord
from pipelines.citations.finalize import (
    strip_out_of_range_markers,
)
from pipelines.citations.live import LiveCitations
from pipelines.citations.model_sources import ModelSources, without_model_sources
from pipelines.citations.sources import Source, number_sources
from pipelines.core.errors import EventHandlerError
from pipelines.core.redaction import one_line, redact_secrets
from pipelines.core.tags import ANSWER_TAG, RETRIEVAL_TAG
from pipelines.core.tokens import count_tokens
from pipelines.evidence.claims import Claim, Evidence, Verdict, claims_of, evidence_items
from pipelines.evidence.final import final_answer, live_references

__all__ = ["AnswerEventHandler"]


class _Reraised(logging.Filter):
    """LangChain logs a handler's error before re-raising it; ours is re-raised (the
    pipeline turns it into an ``error`` event), so that second report is noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "AnswerEventHandler." not in record.getMessage()


logging.getLogger("langchain_core.callbacks.manager").addFilter(_Reraised())


_E = TypeVar("_E", StartEvent, CitationEvent, ReferenceEvent, TokenEvent, ErrorEvent, DoneEvent)
_Hook = TypeVar("_Hook", bound=Callable[..., None])


def _guarded(hook: _Hook) -> _Hook:
    """A failure inside the handler becomes an :class:`EventHandlerError`, so the pipeline
    ends the answer with ``error`` then ``done`` rather than a model or store error."""

    @functools.wraps(hook)
    def guarded(self: AnswerEventHandler, *args: Any, **kwargs: Any) -> None:
        try:
            hook(self, *args, **kwargs)
        except EventHandlerError:
            raise
        except Exception as error:
            raise EventHandlerError(
                f"the event handler failed in {hook.__name__} ({one_line(error)})"
            ) from error

    return guarded  # type: ignore[return-value]


# LangChain's message types as the roles of the chat protocols, as the log shows them.
_ROLES = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}


def _content_text(content: str | list[str | dict[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    return "".join(part if isinstance(part, str) else str(part.get("text", "")) for part in content)


@dataclass(frozen=True)
class _Run:
    kind: str  # "retriever", "model" or "chain"
    name: str
    tags: tuple[str, ...]
    parent_run_id: UUID | None


@dataclass
class _Answer:
    sources: list[Source] = field(default_factory=list)
    context: list[Document] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)
    first_token_ms: float | None = None
    retrieval_ms: float | None = None
    live: LiveCitations[Source] | None = None  # live citation numbering only
    # The model's text less a Sources section of its own: what everything after reads.
    model_sources: ModelSources = field(default_factory=ModelSources)
    references_sent: int = 0  # live: how many reference events went out
    # live: (raw characters received, when) per token still (partly) held back, and the
    # longest any character waited
    arrivals: deque[tuple[int, float]] = field(default_factory=deque)
    raw_chars: int = 0
    held_chars: int = 0  # live: the most characters held at once, by either
    held_back_s: float = 0.0
    prompt_tokens: int | None = None  # the answer model's input, once it is asked
    # ... or its text, to count at the end, when no record needs the count at the start
    prompt_text: str | None = None


class AnswerEventHandler(BaseCallbackHandler):
    """Collects one request's callbacks and emits its events through ``emit``."""

    # Run in the caller's thread or event loop, in order, rather than in a thread pool:
    # ordering is the whole point of this handler, and a pool costs ~100 µs per token.
    run_inline = True

    @property
    def ignore_custom_event(self) -> bool:
        """Custom events are only for the records (the log, the trace): without them, none
        is sent here, and a run with no other listener does not make its own (the retrieval
        record, say: see ``pipelines.retrieval.retriever``)."""
        return self._record is None

    @property
    def reads_records_later(self) -> bool:
        """Whether its records are read only once the answer has ended (a trace with no log,
        drawn in the shipper's thread): a record made for them may then come as what makes
        it (``pipelines.retrieval.retrieval_record.PendingRecord``), and the answer model's
        input is counted at the end, as with no record at all."""
        return self._record is not None and self._records_later

    def __init__(
        self,
        *,
        request_id: str,
        emit: Callable[[Event], None],
        cite_urls: bool = False,
        live_citations: bool = False,
        language: str = "en",
        raise_error: bool = False,
        clock: Callable[[], float] = time.perf_counter,
        record: Callable[[str, dict[str, Any]], None] | None = None,
        trace_id: str | None = None,
        record_text: bool = True,
        records_later: bool = False,
    ) -> None:
        """``record`` receives every call the handler acts on, as (hook, JSON-able arguments),
        so an event log can replay them into a fresh handler (``replay --check``), and the end
        of each run, so that a trace can be drawn from them (:mod:`callbacks.tracing`); each
        but a token's carries ``t_ms``, the time on the events' clock.

        ``trace_id``: the answer's trace (32 hex digits), which ``done`` names.
        ``record_text``: whether ``record`` is given the models' messages and tokens (a log
        needs them to replay; a trace shows them only with its content setting, and without
        them no prompt of kilobytes is redacted, and no token recorded, for nothing on the
        answer's path).
        ``records_later``: ``record`` is read only once the answer has ended
        (:attr:`reads_records_later`); never for a log, which replays what it holds."""
        self.request_id = request_id
        self.trace_id = trace_id
        self.cite_urls = cite_urls
        self.live_citations = live_citations
        self.language = language
        self.raise_error = raise_error
        self.run_map: dict[UUID, _Run] = {}
        self.retrieval_run_id: UUID | None = None
        self.retrieval_ended = False
        self.done: DoneEvent | None = None
        self._emit = emit
        self._clock = clock
        self._started = clock()
        # The wall clock at t_ms 0, for a trace drawn from the records.
        self._started_ns = time.time_ns()
        self._seq = 0
        self._lock = threading.Lock()
        self._answer = _Answer()
        self._record = record
        self._record_text = record_text
        self._records_later = records_later

    def _elapsed_ms(self) -> float:
        return round((self._clock() - self._started) * 1000, 3)

    def _note(self, hook: str, **arguments: Any) -> None:
        if self._record is not None:
            arguments["t_ms"] = self._elapsed_ms()
            self._record(hook, arguments)

    # --- emitting ---------------------------------------------------------------------------

    def _send(self, kind: type[_E], data: Any) -> _E:
        with self._lock:
            if self.done is not None:
                raise RuntimeError("the stream already ended with done")
            t_ms = self._elapsed_ms()
            event = kind(seq=self._seq + 1, request_id=self.request_id, t_ms=t_ms, data=data)
            self._seq += 1  # only once the event exists: seq stays contiguous if it cannot
            if isinstance(event, DoneEvent):
                self.done = event
            self._emit(event)
            return event

    def start(self, question: str, collections: Sequence[str], options: dict[str, Any]) -> None:
        self._note(
            "start",
            question=question,
            collections=list(collections),
            options=options,
            started_ns=self._started_ns,
        )
        data = StartData(question=question, collections=list(collections), options=options)
        self._send(StartEvent, data)

    @property
    def sources(self) -> list[Source]:
        return list(self._answer.sources)

    @property
    def context(self) -> list[Document]:
        return list(self._answer.context)

    @property
    def raw_text(self) -> str:
        """The answer model's text so far, as it numbers its markers, less a Sources section
        of its own (and less a line still held while it may open one)."""
        return "".join(self._answer.parts)

    @property
    def model_streamed(self) -> bool:
        """Whether the answer model streamed any text after retrieval (perhaps all of it
        held so far, as a possible Sources section of its own)."""
        return self._answer.model_sources.started

    # --- the run map ----------------------------------------------------------------------

    def _register(
        self,
        kind: str,
        run_id: UUID,
        parent_run_id: UUID | None,
        tags: list[str] | None,
        name: str,
        **recorded: Any,
    ) -> None:
        self._note(
            f"{kind}_start",
            run_id=str(run_id),
            parent_run_id=str(parent_run_id) if parent_run_id else None,
            tags=list(tags or ()),
            name=name,
            **recorded,
        )
        self.run_map[run_id] = _Run(kind, name, tuple(tags or ()), parent_run_id)

    def _model_input(
        self,
        tags: list[str] | None,
        recorded: object,
        messages: Callable[[], list[dict[str, str]]],
    ) -> dict[str, Any]:
        """For the answer model: its input in tokens (``usage.prompt_tokens``), counted from
        what it is sent or as a replay passes it from the log, and, for the log, the
        messages themselves with pasted credentials redacted as in the question."""
        if ANSWER_TAG not in (tags or ()):
            return {}
        if isinstance(recorded, int):  # a replay: the log holds the messages already
            self._answer.prompt_tokens = recorded
            return {"prompt_tokens": recorded}
        sent = messages()
        text = "\n".join(message["content"] for message in sent)
        counted: dict[str, Any] = {}
        if self._record is None or self._records_later:
            # Nothing reads the model's start before the end: counted then, off the way to
            # the first token (a prompt of 2,500 tokens takes 1 to 1.5 ms to count); a trace
            # takes the count from done.
            self._answer.prompt_text = text
        else:
            count = self._answer.prompt_tokens = count_tokens(text)
            counted["prompt_tokens"] = count
        if self._record is None or not self._record_text:
            return counted
        redacted = [{**message, "content": redact_secrets(message["content"])} for message in sent]
        return {**counted, "messages": redacted}

    @_guarded
    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: dict[str, Any] | Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        self._register("chain", run_id, parent_run_id, tags, str(kwargs.get("name") or ""))

    @_guarded
    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        recorded = self._model_input(
            tags,
            kwargs.get("prompt_tokens"),
            lambda: [
                {"role": _ROLES.get(message.type, message.type),
                 "content": _content_text(message.content)}
                for batch in messages
                for message in batch
            ],
        )  # fmt: skip
        name = str(kwargs.get("name") or "")
        self._register("model", run_id, parent_run_id, tags, name, **recorded)

    @_guarded
    def on_llm_start(
        self,
        serialized: dict[str, Any] | None,
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        recorded = self._model_input(
            tags,
            kwargs.get("prompt_tokens"),
            lambda: [{"role": "user", "content": prompt} for prompt in prompts],
        )
        name = str(kwargs.get("name") or "")
        self._register("model", run_id, parent_run_id, tags, name, **recorded)

    @_guarded
    def on_retriever_start(
        self,
        serialized: dict[str, Any] | None,
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        self._register("retriever", run_id, parent_run_id, tags, str(kwargs.get("name") or ""))
        # Tags are inherited: a nested retriever carries the tag too, but its parent chain
        # leads back to a retriever that already carries it.
        if (
            self.retrieval_run_id is None
            and RETRIEVAL_TAG in (tags or ())
            and not self._has_tagged_ancestor(parent_run_id, RETRIEVAL_TAG)
        ):
            self.retrieval_run_id = run_id

    def _has_tagged_ancestor(self, run_id: UUID | None, tag: str) -> bool:
        while run_id is not None and run_id in self.run_map:
            run = self.run_map[run_id]
            if run.kind == "retriever" and tag in run.tags:
                return True
            run_id = run.parent_run_id
        return False

    @_guarded
    def on_custom_event(
        self,
        name: str,
        data: Any,
        *,
        run_id: UUID,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        # Nothing public: a custom event (the expander's fallback, say) is for the event log,
        # where whoever debugs the answer reads it.
        self._note("custom_event", run_id=str(run_id), name=name, data=data)

    # --- the ends of runs, for a trace (nothing public) -----------------------------------

    def _ended(self, run_id: UUID, error: BaseException | None = None, **recorded: Any) -> None:
        if self._record is None or run_id not in self.run_map:
            return
        if error is None:
            self._note("run_end", run_id=str(run_id), **recorded)
        else:
            self._note("run_error", run_id=str(run_id), error=redact_secrets(one_line(error)))

    @_guarded
    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._ended(run_id)

    @_guarded
    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._ended(run_id, error)

    @_guarded
    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        self._ended(run_id, **_model_usage(response))

    @_guarded
    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._ended(run_id, error)

    @_guarded
    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._ended(run_id, error)

    # --- the gate -------------------------------------------------------------------------

    @_guarded
    def on_retriever_end(
        self,
        documents: Sequence[Document],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._note(
            "retriever_end",
            run_id=str(run_id),
            documents=[
                {"page_content": d.page_content, "metadata": d.metadata, "id": d.id}
                for d in documents
            ],
        )
        if run_id != self.retrieval_run_id or self.retrieval_ended:
            return
        sources, context = number_sources(documents, cite_urls=self.cite_urls)
        for number, source in enumerate(sources):
            data = CitationData(
                n=source.n,
                st_id=source.st_id,
                url=source.url,
                display_name=source.display_name,
                collection=source.collection,
            )
            # Kept one by one: should a later one fail, done may list only what was sent.
            self._send(CitationEvent, data)
            self._answer.sources = sources[: number + 1]
        self._answer.context = context
        if self.live_citations:
            self._answer.live = LiveCitations(sources)
        # Only now may answer tokens flow: the sources are complete.
        self.retrieval_ended = True
        self._answer.retrieval_ms = self._elapsed_ms()

    @_guarded
    def on_llm_new_token(
        self,
        token: str | list[str | dict[str, Any]],
        *,
        chunk: GenerationChunk | ChatGenerationChunk | None = None,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(token, str):  # content blocks: keep their text
            token = "".join(
                part if isinstance(part, str) else str(part.get("text", "")) for part in token
            )
        if self._record is not None and self._record_text:  # no clock: the event has its time
            self._record("llm_new_token", {"run_id": str(run_id), "token": token})
        run = self.run_map.get(run_id)
        if run is None or ANSWER_TAG not in run.tags or not self.retrieval_ended or not token:
            return
        answer = self._answer
        text = answer.model_sources.feed(token)
        live = answer.live
        if live is None:
            self._take_text(text)
            return
        if text:  # _take_text's live branch, inline: this runs for every token
            answer.parts.append(text)
            released = live.feed(text)
            if "[" in released or (released and answer.first_token_ms is None):
                self._send_live(released, live)
            elif released:  # _send_live's common case: no new reference, not the first token
                self._send(TokenEvent, TokenData(text=released))
        # _track_hold's common case inline: most tokens leave nothing held before or after.
        if answer.arrivals or answer.model_sources.held or live.pending:
            self._track_hold(len(token))
        else:
            answer.raw_chars += len(token)

    def _take_text(self, text: str) -> None:
        """Stream answer text the model-sources filter released (the model's own markers,
        or final ones when live); empty while a line that may open a Sources section waits."""
        if not text:
            return
        live = self._answer.live
        if live is not None:
            self._answer.parts.append(text)  # the model's numbering, for its claims
            released = live.feed(text)
            if released:
                self._send_live(released, live)
            return
        if self._answer.first_token_ms is None:
            self._answer.first_token_ms = self._elapsed_ms()
        data = TokenData(text=text)
        self._send(TokenEvent, data)
        self._answer.parts.append(text)  # once sent: done.text holds only what was streamed

    @staticmethod
    def _feed_live(live: LiveCitations[Source], token: str | None) -> str:
        """Feed live numbering a token (None: the end of the text)."""
        return live.close() if token is None else live.feed(token)

    def _track_hold(self, arrived: int) -> None:
        """Note how long what was released waited, held by the model-sources filter or by
        live numbering (``arrived``: the model's characters just received, 0 at the end).
        The clock is read only when something waits or waited: most tokens neither."""
        answer = self._answer
        live = answer.live
        assert live is not None
        answer.raw_chars += arrived
        held = answer.model_sources.held + len(live.pending)
        if not answer.arrivals and not held:
            return
        answer.held_chars = max(answer.held_chars, held)
        now = self._clock()
        if arrived and held:
            answer.arrivals.append((answer.raw_chars, now))
        released_up_to = answer.raw_chars - held
        while answer.arrivals and answer.arrivals[0][0] <= released_up_to:
            answer.held_back_s = max(answer.held_back_s, now - answer.arrivals.popleft()[1])

    def _send_live(self, text: str, live: LiveCitations[Source]) -> None:
        """Send the references this text cites first, then the text itself."""
        if not text:
            return  # all of it held back, for now
        answer = self._answer
        if answer.first_token_ms is None:
            answer.first_token_ms = self._elapsed_ms()
        # A source is first cited by a marker in the text that cites it: no "[", none new.
        if "[" in text:
            while answer.references_sent < live.n_cited:
                source = live.cited_source(answer.references_sent)
                answer.references_sent += 1
                self._send(ReferenceEvent, _reference(answer.references_sent, source))
        self._send(TokenEvent, TokenData(text=text))

    # --- the end --------------------------------------------------------------------------

    def claims(self, text: str | None = None) -> list[Claim]:
        """The (sentence, cited source) pairs of the answer so far (or of ``text``, the
        reply of a model that did not stream), for a judge to rule on before :meth:`finish`.
        The model's own numbering is read, which is the retrieval order in either mode."""
        sources = self._answer.sources
        if text is None:
            raw = self.raw_text + self._answer.model_sources.peek_close()
        else:
            raw = without_model_sources(text)
        return claims_of(strip_out_of_range_markers(raw, len(sources)), sources)

    def finish(
        self,
        state: DoneState = "answered",
        text: str | None = None,
        *,
        verdicts: Sequence[tuple[Claim, Verdict]] = (),
        drop: bool = False,
    ) -> DoneEvent:
        """Finalize the answer's markers and references and emit ``done``.

        ``text`` replaces the streamed answer (a refusal, a "nothing found" message, or the
        reply of a model that did not stream, which loses a Sources section of its own as a
        streamed one does). A failed answer keeps exactly the references its partial text
        cites: none when it cites none, for the untouched list is a grounded answer's, and
        a failure is not one; a refused or empty one has none, and no markers either.

        ``verdicts`` are a judge's rulings on :meth:`claims`; ``done.evidence`` lists them for
        the final text. With ``drop``, markers ruled unsupported are removed before the
        finalizer runs, so a source cited by nothing else leaves the references; live, the
        markers are on the wire already, and ``drop`` flags them as ``flag`` does.
        """
        self._note("finish", **FinishRecord(state, text, tuple(verdicts), drop).record())
        ruled = {(claim.sentence, claim.source_n): verdict for claim, verdict in verdicts}
        if state == "answered":
            if text is None:
                # The text has ended: a held line that opened no Sources section goes out.
                self._take_text(self._answer.model_sources.close())
            else:
                text = without_model_sources(text)
        live = self._answer.live
        if live is not None and state in ("answered", "failed"):
            return self._finish_live(state, text, live, ruled)
        raw = self.raw_text if text is None else text
        final = final_answer(state, raw, self._answer.sources, ruled, drop=drop)
        references = [
            _reference(index, source) for index, source in enumerate(final.references, start=1)
        ]
        return self._send_done(state, final.text, references, evidence=final.evidence)

    def _finish_live(
        self,
        state: DoneState,
        text: str | None,
        live: LiveCitations[Source],
        ruled: dict[tuple[str, int], Verdict],
    ) -> DoneEvent:
        """``done`` repeats what was streamed: an answer sends what was held back first (and
        the reply of a model that did not stream, through the same rewrite); a failed one
        keeps exactly the text already sent, so what was held is dropped."""
        if state == "answered":
            if text:
                self._send_live(self._feed_live(live, text), live)
            self._send_live(self._feed_live(live, None), live)
            self._track_hold(0)
        elif self._answer.arrivals:
            # What was still held is dropped with the failure: it waited until now.
            waited = self._clock() - self._answer.arrivals[0][1]
            self._answer.held_back_s = max(self._answer.held_back_s, waited)
        sent = live.n_cited if state == "answered" else self._answer.references_sent
        cited = [live.cited_source(index) for index in range(sent)]
        kept = live_references(state, cited, self._answer.sources)
        references = [_reference(index, source) for index, source in enumerate(kept, start=1)]
        held = {
            "held_back_ms": round(self._answer.held_back_s * 1000, 3),
            "held_back_chars": max(live.held, self._answer.held_chars),
        }
        # What live numbering released is what was sent, in order: each release goes out at
        # once (_send_live), and a send fails only once done is out, when nothing follows.
        final_text = live.text
        evidence = evidence_items(final_text, kept, ruled) if ruled and cited else []
        return self._send_done(state, final_text, references, held, evidence=evidence)

    def _send_done(
        self,
        state: DoneState,
        final_text: str,
        references: list[Reference],
        held: dict[str, Any] | None = None,
        *,
        evidence: Sequence[Evidence] = (),
    ) -> DoneEvent:
        total_ms = self._elapsed_ms()
        timings = Timings(
            first_token_ms=self._answer.first_token_ms,
            retrieval_ms=self._answer.retrieval_ms,
            total_ms=total_ms,
            **held or {},
        )
        data = DoneData(
            state=state,
            text=final_text,
            references=references,
            evidence=[_evidence_data(item) for item in evidence],
            usage=Usage(
                answer_tokens=count_tokens(final_text), prompt_tokens=self._prompt_tokens()
            ),
            timings=timings,
            language=self.language,
            trace_id=self.trace_id,
        )
        return self._send(DoneEvent, data)

    def _prompt_tokens(self) -> int | None:
        answer = self._answer
        if answer.prompt_tokens is None and answer.prompt_text is not None:
            answer.prompt_tokens = count_tokens(answer.prompt_text)
        return answer.prompt_tokens

    def fail(self, code: str, message: str) -> DoneEvent:
        """Emit ``error`` then ``done`` (``failed``), keeping any text already streamed."""
        message = redact_secrets(message)
        self._note("fail", code=code, message=message)
        data = ErrorData(code=code or "internal", message=message or "the answer failed")
        self._send(ErrorEvent, data)
        record, self._record = self._record, None  # fail's own finish is not a separate call
        try:
            return self.finish("failed")
        except Exception:
            if self.done is not None:
                raise
            # Finalizing is what broke: the stream still ends, with nothing it cannot vouch
            # for (no text, no references), but the prompt's size, which a trace with no log
            # reads only from here.
            try:
                prompt: int | None = self._prompt_tokens()
            except Exception:
                prompt = None
            bare = DoneData(
                state="failed",
                usage=Usage(prompt_tokens=prompt),
                timings=Timings(total_ms=self._elapsed_ms()),
                language=self.language,
                trace_id=self.trace_id,
            )
            return self._send(DoneEvent, bare)
        finally:
            self._record = record


def _model_usage(response: LLMResult) -> dict[str, Any]:
    """What a model said of itself at its end: the model that answered and the tokens it
    counted, where its provider reports them (an OpenAI-compatible server does)."""
    found: dict[str, Any] = {}
    for batch in response.generations:
        for generation in batch:
            if not isinstance(generation, ChatGeneration):
                continue
            message = generation.message
            usage = getattr(message, "usage_metadata", None)
            if usage:
                found["usage"] = {
                    "input_tokens": int(usage.get("input_tokens", 0)),
                    "output_tokens": int(usage.get("output_tokens", 0)),
                }
            model = message.response_metadata.get("model_name")
            if isinstance(model, str) and model:
                found["model"] = model
    return found


def _evidence_data(item: Evidence) -> EvidenceData:
    return EvidenceData(
        n=item.n,
        sentence=item.sentence,
        quote=item.quote,
        quote_span=item.quote_span,
        score=item.score,
        supported=item.supported,
    )


def _reference(number: int, source: Source) -> Reference:
    return Reference(
        n=number,
        source_n=source.n,
        st_id=source.st_id,
        url=source.url,
        display_name=source.display_name,
        collection=source.collection,
    )
