"""One answer's spans, drawn from its records: what the event log holds, live or read back.

A pure function (:func:`answer_spans`) from the header, the callback records and the events,
in the order they happened, to :class:`SpanSpec` values, so that the answer traced live and its
log exported later (``logs export --otlp``) give the same tree, names, ids and attributes
(decision 0042). Nothing here imports OpenTelemetry's SDK: :mod:`callbacks.tracing.otlp`
turns the specs into its spans.

The tree::

    answer                     the request: surface, state, references, timings, refusal
      retrieval                RETRIEVER: the numbered sources as its documents, in order
        expander               LLM: the query expander's model call, when it has one
      answer_model             LLM: model, token usage; one evaluation event per ruling
      evidence                 EVALUATOR: the judge's rulings on the (sentence, source) pairs
      finalize                 CHAIN: the markers and references made to agree

Attribute names come from the conventions' packages: OpenTelemetry's GenAI conventions
(``gen_ai.*``) and OpenInference (``openinference.span.kind``, ``retrieval.documents.N.*``,
``input.value``, ``llm.*``), both set where they name the same thing. Every text attribute
passes :func:`~pipelines.core.redaction.redact_secrets`; the model's messages, the answer and
the passages' text are there only with ``content`` (``REACTOME_ANSWERS_TRACE_CONTENT``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeGuard

from openinference.semconv.trace import (
    DocumentAttributes,
    MessageAttributes,
    OpenInferenceSpanKindValues,
    SpanAttributes,
)
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv.attributes import error_attributes, exception_attributes

from callbacks.events import (
    CitationEvent,
    DoneData,
    DoneEvent,
    ErrorEvent,
    Event,
    StartEvent,
    TokenEvent,
)
from callbacks.finish_record import FinishRecord
from callbacks.log import LogContents
from callbacks.log_header import LogHeader
from callbacks.tracing.context import child_span_id
from pipelines.core.redaction import SecretRedactor, secret_redactor
from pipelines.core.tags import (
    ADVICE_RECORD,
    ANSWER_TAG,
    EVIDENCE_FAILED,
    EVIDENCE_STARTED,
    EXPANDER_TAG,
    EXPANSION_RECORD,
    REFUSAL_EVENT,
    RETRIEVAL_RECORD,
    RETRIEVAL_TAG,
)
from pipelines.retrieval.retrieval_record import (
    CandidateOutcome,
    PendingRecord,
    RetrievalRecord,
    candidate_outcomes,
)

__all__ = [
    "AnswerRecords",
    "AttributeValue",
    "SpanEventSpec",
    "SpanKind",
    "SpanSpec",
    "answer_ids",
    "answer_spans",
    "span_count",
]

AttributeValue = str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float]
SpanKind = Literal["server", "internal", "client"]

# Our own attributes, under one prefix.
_OURS = "reactome_answers"
# The evaluation each ruling reports (gen_ai.evaluation.name).
EVALUATION_NAME = "citation_support"
# Surfaces that answer a request over the network: their root span is a server span.
_SERVED = frozenset({"http", "sse", "openai", "ai_sdk", "mcp"})
# What a model choice (the ``llm`` setting) is called as gen_ai.provider.name.
_PROVIDERS = {"openai": "openai", "llamacpp": "llama.cpp", "extractive": "reactome-answers"}


# The attributes whose text is JSON: redacted string by string, not as text (a credential's
# shape could swallow the JSON's own quotes, and its escapes could hide a secret).
_JSON_ATTRIBUTES = frozenset(
    {
        gen_ai.GEN_AI_RETRIEVAL_DOCUMENTS,
        gen_ai.GEN_AI_INPUT_MESSAGES,
        gen_ai.GEN_AI_OUTPUT_MESSAGES,
        f"{_OURS}.retrieval.dropped",
    }
)
_JSON_METADATA = f".{DocumentAttributes.DOCUMENT_METADATA}"


def _is_json(key: str) -> bool:
    return key in _JSON_ATTRIBUTES or key.endswith(_JSON_METADATA)


def _json(value: Any) -> str:
    """A JSON attribute's text, its characters as they are: a scan of the text then sees
    each string whole, unless it holds what JSON escapes (a quote, a backslash)."""
    return json.dumps(value, ensure_ascii=False)


def _json_texts(value: Any) -> Iterator[str]:
    """The strings in a JSON value, keys and values."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _json_texts(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _json_texts(item)


def _json_redacted(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_json_redacted(item, redact) for item in value]
    if isinstance(value, dict):
        return {redact(key): _json_redacted(item, redact) for key, item in value.items()}
    return value


@dataclass(frozen=True)
class SpanEventSpec:
    name: str
    time_ns: int
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)


@dataclass(frozen=True)
class SpanSpec:
    """One span as OpenTelemetry will carry it; ids are hex (32 digits for the trace, 16
    for a span), times nanoseconds since the epoch."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    start_ns: int
    end_ns: int
    kind: SpanKind = "internal"
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    events: tuple[SpanEventSpec, ...] = ()
    # (our error code, its message) when what the span stands for failed
    error: tuple[str, str] | None = None


@dataclass(frozen=True)
class AnswerRecords:
    """What one answer's spans are drawn from: the log's header (its ``surface`` and trace
    ids), then the callback records (dicts with a ``hook``) and the events, interleaved in the
    order they happened, as the log holds them."""

    header: LogHeader
    items: Sequence[Mapping[str, Any] | Event]

    @classmethod
    def from_log(cls, contents: LogContents) -> AnswerRecords:
        """A log's records in the order its lines hold them."""
        lines: list[tuple[int, Mapping[str, Any] | Event]] = [
            *zip(contents.callback_lines, contents.callbacks, strict=False),
            *zip(contents.event_lines, contents.events, strict=False),
        ]
        if len(lines) < len(contents.callbacks) + len(contents.events):
            # Contents built without their lines (a test's): the callbacks, then the events.
            return cls(contents.header, [*contents.callbacks, *contents.events])
        return cls(contents.header, [item for _, item in sorted(lines, key=lambda x: x[0])])


def span_count(items: Sequence[Mapping[str, Any] | Event]) -> int:
    """How many spans :func:`answer_spans` draws from an answer's records ``items``, counted
    without drawing them (an answer dropped from a full queue is counted on the caller's
    thread): the root, each run but the chain's own, each advice ruling, and the evidence
    and finalizer spans when the answer reached them."""
    runs: set[str] = set()
    count, evidence, finish, done = 1, False, False, False
    for item in items:
        if not isinstance(item, Mapping):
            done = done or isinstance(item, DoneEvent)
            continue
        hook = item.get("hook")
        if hook == "custom_event":
            name = item.get("name")
            if name == ADVICE_RECORD and isinstance(item.get("data"), Mapping):
                count += 1
            evidence = evidence or name == EVIDENCE_STARTED
        elif hook == "finish":
            finish = True
        elif isinstance(hook, str) and hook.endswith("_start"):
            run_id = str(item.get("run_id") or "")
            if run_id and run_id not in runs:
                runs.add(run_id)
                # the chain with no parent is the answer itself: the root stands for it
                count += hook != "chain_start" or bool(item.get("parent_run_id"))
    return count + evidence + (finish and done)


def answer_ids(header: LogHeader) -> tuple[str, str, str | None]:
    """(trace id, root span id, the caller's span id) of the answer ``header`` opens: the
    ones it names, or for a log of an answer that was not traced, ids derived from its
    request id, so that exporting it twice gives the same trace."""
    if header.trace_id and header.span_id:
        return header.trace_id, header.span_id, header.parent_span_id
    digest = hashlib.blake2b(f"reactome-answers/{header.request_id}".encode(), digest_size=24)
    value = digest.hexdigest()
    return value[:32], value[32:], None


@dataclass
class _Run:
    run_id: str
    kind: str  # the hook's prefix: chain, model, retriever
    name: str
    tags: tuple[str, ...]
    parent_run_id: str | None
    start_ms: float
    record: Mapping[str, Any]
    end_ms: float | None = None
    end: Mapping[str, Any] | None = None
    error: str | None = None
    tokens: list[str] = field(default_factory=list)
    custom: list[tuple[str, Any, float]] = field(default_factory=list)  # name, data, t_ms


@dataclass
class _Reading:
    """The records read once, in order, into what the spans are made of."""

    runs: dict[str, _Run] = field(default_factory=dict)
    start: Mapping[str, Any] | None = None
    start_ms: float = 0.0
    end_ms: float = 0.0
    done: DoneData | None = None
    error: tuple[str, str] | None = None
    citations: list[CitationEvent] = field(default_factory=list)
    first_token_ms: float | None = None
    finish: Mapping[str, Any] | None = None
    finish_ms: float | None = None
    evidence_ms: float | None = None
    evidence_started: Mapping[str, Any] | None = None
    evidence_failed: str | None = None
    refusal: Mapping[str, Any] | None = None
    retrieval: RetrievalRecord | None = None  # read briefly: its candidates are in outcomes
    outcomes: list[CandidateOutcome] = field(default_factory=list)
    # The advice gate's rulings: (the run that sent it, or None, its data, when it came)
    advice: list[tuple[str | None, Mapping[str, Any], float]] = field(default_factory=list)
    documents: list[Mapping[str, Any]] = field(default_factory=list)


def _read(items: Sequence[Mapping[str, Any] | Event]) -> _Reading:
    reading = _Reading()
    now = 0.0
    for item in items:
        if not isinstance(item, Mapping):
            now = max(now, item.t_ms)
            _read_event(reading, item, now)
            continue
        recorded = item.get("t_ms")
        if isinstance(recorded, int | float) and not isinstance(recorded, bool):
            now = max(now, float(recorded))
        _read_callback(reading, item, now)
    reading.end_ms = max(reading.end_ms, now)
    return reading


def _read_event(reading: _Reading, event: Event, now: float) -> None:
    if isinstance(event, StartEvent):
        reading.start_ms = now
    elif isinstance(event, CitationEvent):
        reading.citations.append(event)
    elif isinstance(event, TokenEvent):
        if reading.first_token_ms is None:
            reading.first_token_ms = now
    elif isinstance(event, ErrorEvent):
        reading.error = (event.data.code, event.data.message)
    elif isinstance(event, DoneEvent):
        reading.done = event.data
        reading.end_ms = now


def _read_callback(reading: _Reading, record: Mapping[str, Any], now: float) -> None:
    hook = record.get("hook")
    run_id = str(record.get("run_id") or "")
    run = reading.runs.get(run_id)
    if hook == "start":
        reading.start = record
    elif isinstance(hook, str) and hook.endswith("_start") and run_id and run is None:
        parent = record.get("parent_run_id")
        reading.runs[run_id] = _Run(
            run_id=run_id,
            kind=hook.removesuffix("_start"),
            name=str(record.get("name") or hook.removesuffix("_start")),
            tags=tuple(str(tag) for tag in record.get("tags") or ()),
            parent_run_id=str(parent) if parent else None,
            start_ms=now,
            record=record,
        )
    elif hook in ("run_end", "retriever_end") and run is not None and run.end_ms is None:
        run.end_ms, run.end = now, record
        if hook == "retriever_end" and _is_retrieval(run, reading.runs):
            documents = record.get("documents")
            reading.documents = [d for d in documents or () if isinstance(d, Mapping)]
    elif hook == "run_error" and run is not None and run.end_ms is None:
        run.end_ms, run.error = now, str(record.get("error") or "")
    elif hook == "llm_new_token" and run is not None:
        token = record.get("token")
        if isinstance(token, str):
            run.tokens.append(token)
    elif hook == "custom_event":
        _read_custom(reading, record, run, now)
    elif hook == "finish":
        reading.finish, reading.finish_ms = record, now


def _read_custom(
    reading: _Reading, record: Mapping[str, Any], run: _Run | None, now: float
) -> None:
    name, data = record.get("name"), record.get("data")
    if run is not None:
        run.custom.append((str(name), data, now))
    if name == RETRIEVAL_RECORD and isinstance(data, PendingRecord):
        reading.retrieval, reading.outcomes = data.brief()  # made now, in the shipper's thread
    elif name == RETRIEVAL_RECORD and isinstance(data, Mapping):
        reading.retrieval = RetrievalRecord.read(data, brief=True)
        reading.outcomes = candidate_outcomes(data)
    elif name == REFUSAL_EVENT and isinstance(data, Mapping):
        reading.refusal = data
    elif name == ADVICE_RECORD and isinstance(data, Mapping):
        reading.advice.append((run.run_id if run is not None else None, data, now))
    elif name == EVIDENCE_STARTED:
        reading.evidence_ms = now
        reading.evidence_started = data if isinstance(data, Mapping) else {}
    elif name == EVIDENCE_FAILED:
        reading.evidence_failed = str(data.get("message")) if isinstance(data, Mapping) else ""


def _is_retrieval(run: _Run, runs: Mapping[str, _Run]) -> bool:
    """The one top-level retrieval run, as the handler tells it (its nested retrievers
    carry the tag too, under a tagged parent)."""
    if run.kind != "retriever" or RETRIEVAL_TAG not in run.tags:
        return False
    parent = runs.get(run.parent_run_id or "")
    while parent is not None:
        if parent.kind == "retriever" and RETRIEVAL_TAG in parent.tags:
            return False
        parent = runs.get(parent.parent_run_id or "")
    return True


class _Clock:
    """The events' milliseconds as nanoseconds since the epoch."""

    def __init__(self, zero_ns: int) -> None:
        self.zero_ns = zero_ns

    def __call__(self, t_ms: float) -> int:
        return self.zero_ns + round(t_ms * 1_000_000)


def _zero_ns(header: LogHeader, start: Mapping[str, Any] | None) -> int:
    recorded = (start or {}).get("started_ns")
    if isinstance(recorded, int) and not isinstance(recorded, bool) and recorded > 0:
        return recorded
    if header.created_at:  # a log from before the records carried the wall clock
        try:
            return int(datetime.fromisoformat(header.created_at).timestamp() * 1e9)
        except ValueError:
            pass
    return 0


def answer_spans(
    records: AnswerRecords, *, content: bool = False, redact: SecretRedactor | None = None
) -> list[SpanSpec]:
    """The answer's spans, root first (see the module's docstring); ``content`` puts the
    messages, the answer and the passages in too. ``redact``: the redaction to apply, one
    for a batch of answers (made now when not given)."""
    header = records.header
    reading = _read(records.items)
    trace_id, root_id, parent_id = answer_ids(header)
    clock = _Clock(_zero_ns(header, reading.start))
    end_ms = reading.end_ms
    spans: list[SpanSpec] = []

    chain_roots = {
        run.run_id for run in reading.runs.values() if run.kind == "chain" and not run.parent_run_id
    }

    def parent_of(run: _Run) -> str:
        parent = run.parent_run_id
        while parent and parent in reading.runs:
            if parent not in chain_roots:
                return child_span_id(root_id, f"run/{parent}")
            parent = reading.runs[parent].parent_run_id
        return root_id

    answer_span_id: str | None = None
    for run in reading.runs.values():
        if run.run_id in chain_roots:
            continue  # the chain is the answer itself: its runs hang from the root span
        span_id = child_span_id(root_id, f"run/{run.run_id}")
        if ANSWER_TAG in run.tags and answer_span_id is None:
            answer_span_id = span_id
        spans.append(
            _run_span(
                run,
                reading,
                header,
                trace_id=trace_id,
                span_id=span_id,
                parent_span_id=parent_of(run),
                clock=clock,
                end_ms=_run_end(run, reading),
                content=content,
                evaluated=answer_span_id == span_id,
            )
        )
    for index, (run_id, data, t_ms) in enumerate(reading.advice):
        sender = reading.runs.get(run_id or "")
        parent = root_id
        if sender is not None and sender.run_id not in chain_roots:
            parent = child_span_id(root_id, f"run/{sender.run_id}")
        span_id = child_span_id(root_id, f"advice/{index}")
        spans.append(_advice_span(data, t_ms, trace_id, span_id, parent, clock))
    spans.extend(_closing_spans(reading, trace_id, root_id, clock, content=content))
    root = _root_span(reading, header, trace_id, root_id, parent_id, clock, end_ms, content)
    drawn = [root, *spans]
    redact = redact or secret_redactor()
    if not redact.touches("\n".join(_texts(drawn))):
        return drawn  # one scan of them all found nothing a redaction would change
    cached = functools.lru_cache(maxsize=None)(redact)
    return [_redacted(span, cached) for span in drawn]


def _is_text_list(value: AttributeValue) -> TypeGuard[Sequence[str]]:
    """Whether ``value`` is a list of texts: what the redaction reads item by item, so the
    scan that may spare it must read the same (numbers first: a Sequence check is slow)."""
    if isinstance(value, str | int | float):
        return False
    return isinstance(value, Sequence) and bool(value) and isinstance(value[0], str)


def _texts(spans: Sequence[SpanSpec]) -> list[str]:
    """Every text the spans' attributes, events and errors hold."""
    found: list[str] = []
    for span in spans:
        for attributes in (span.attributes, *(event.attributes for event in span.events)):
            for key, value in attributes.items():
                if isinstance(value, str):
                    if "\\" in value and _is_json(key):  # escapes: its strings as they are
                        found.extend(_json_texts(json.loads(value)))
                    else:
                        found.append(value)
                elif _is_text_list(value):
                    found.extend(map(str, value))  # as _redacted reads them
        if span.error is not None:
            found.append(span.error[1])
    return found


def _advice_span(
    data: Mapping[str, Any],
    t_ms: float,
    trace_id: str,
    span_id: str,
    parent_span_id: str,
    clock: _Clock,
) -> SpanSpec:
    """The advice gate's ruling (:data:`~pipelines.core.tags.ADVICE_RECORD`): it ended
    ``ago_ms`` before its record came and took ``ms``."""
    took, ago = _milliseconds(data.get("ms")), _milliseconds(data.get("ago_ms"))
    end = max(t_ms - ago, 0.0)
    attributes: dict[str, AttributeValue] = {
        SpanAttributes.OPENINFERENCE_SPAN_KIND: OpenInferenceSpanKindValues.GUARDRAIL.value,
    }
    for key in ("refused", "score", "threshold"):
        value = data.get(key)
        if isinstance(value, bool | int | float):
            attributes[f"{_OURS}.advice.{key}"] = value
    return SpanSpec(
        name="advice_gate",
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent_span_id,
        start_ns=clock(max(end - took, 0.0)),
        end_ns=clock(end),
        attributes=attributes,
    )


def _milliseconds(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return 0.0


def _run_end(run: _Run, reading: _Reading) -> float:
    """When a run ended: its end record, else (a log from before they were recorded) the
    finish for the answer model and the answer's end for any other."""
    if run.end_ms is not None:
        return run.end_ms
    if ANSWER_TAG in run.tags and reading.finish_ms is not None:
        return reading.finish_ms
    return reading.end_ms


def _root_span(
    reading: _Reading,
    header: LogHeader,
    trace_id: str,
    span_id: str,
    parent_id: str | None,
    clock: _Clock,
    end_ms: float,
    content: bool,
) -> SpanSpec:
    done = reading.done
    surface = header.surface or "python"
    options = dict(header.options)
    attributes: dict[str, AttributeValue] = {
        SpanAttributes.OPENINFERENCE_SPAN_KIND: OpenInferenceSpanKindValues.CHAIN.value,
        f"{_OURS}.request_id": header.request_id,
        f"{_OURS}.surface": surface,
        f"{_OURS}.collections": list(header.collections),
    }
    question = header.question
    if question is not None:
        attributes[SpanAttributes.INPUT_VALUE] = question
        attributes[SpanAttributes.INPUT_MIME_TYPE] = "text/plain"
    if isinstance(options.get("llm"), str):
        attributes[f"{_OURS}.llm"] = options["llm"]
    if header.history:
        attributes[f"{_OURS}.history_turns"] = len(header.history)
    events: list[SpanEventSpec] = []
    if done is not None:
        attributes[f"{_OURS}.state"] = done.state
        attributes[f"{_OURS}.language"] = done.language
        attributes[f"{_OURS}.references"] = [_reference_id(ref) for ref in done.references]
        attributes[f"{_OURS}.references.count"] = len(done.references)
        attributes[f"{_OURS}.citations.count"] = len(reading.citations)
        for key, value in done.timings.model_dump(exclude_none=True).items():
            attributes[f"{_OURS}.timings.{key}"] = value
        for key, value in done.usage.model_dump(exclude_none=True).items():
            attributes[f"{_OURS}.usage.{key}"] = value
        if content:
            attributes[SpanAttributes.OUTPUT_VALUE] = done.text
            attributes[SpanAttributes.OUTPUT_MIME_TYPE] = "text/plain"
    else:
        attributes[f"{_OURS}.state"] = "incomplete"
    if reading.refusal is not None:
        # {"reason": "rule" or "similar_examples" or the expander's, "detail": {"rule", ...}}
        reason, detail = reading.refusal.get("reason"), reading.refusal.get("detail")
        if isinstance(reason, str):
            attributes[f"{_OURS}.refusal.reason"] = reason
        rule = detail.get("rule") if isinstance(detail, Mapping) else None
        if isinstance(rule, str):
            attributes[f"{_OURS}.refusal.rule"] = rule
    error = reading.error
    if error is not None:
        attributes[error_attributes.ERROR_TYPE] = error[0]
        events.append(_exception(error, clock(end_ms)))
    return SpanSpec(
        name="answer",
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent_id,
        start_ns=clock(reading.start_ms),
        end_ns=clock(end_ms),
        kind="server" if surface in _SERVED else "internal",
        attributes=attributes,
        events=tuple(events),
        error=error,
    )


def _exception(error: tuple[str, str], time_ns: int) -> SpanEventSpec:
    return SpanEventSpec(
        "exception",
        time_ns,
        {
            exception_attributes.EXCEPTION_TYPE: error[0],
            exception_attributes.EXCEPTION_MESSAGE: error[1],
        },
    )


def _reference_id(reference: Any) -> str:
    return str(reference.st_id or reference.url or "")


def _run_span(
    run: _Run,
    reading: _Reading,
    header: LogHeader,
    *,
    trace_id: str,
    span_id: str,
    parent_span_id: str,
    clock: _Clock,
    end_ms: float,
    content: bool,
    evaluated: bool,
) -> SpanSpec:
    attributes: dict[str, AttributeValue] = {}
    events: list[SpanEventSpec] = []
    if run.kind == "retriever":
        kind = OpenInferenceSpanKindValues.RETRIEVER.value
        if _is_retrieval(run, reading.runs):
            attributes.update(_retrieval_attributes(reading, header, content))
            attributes.update(_dropped(reading))
    elif run.kind == "model":
        kind = OpenInferenceSpanKindValues.LLM.value
        attributes.update(_model_attributes(run, reading, header, content))
        if evaluated:
            events.extend(_evaluations(reading, clock))
    else:
        kind = OpenInferenceSpanKindValues.CHAIN.value
    attributes[SpanAttributes.OPENINFERENCE_SPAN_KIND] = kind
    for name, data, t_ms in run.custom:
        if name == EXPANSION_RECORD and isinstance(data, Mapping):
            queries = [str(query) for query in data.get("queries") or ()]
            events.append(
                SpanEventSpec(f"{_OURS}.expansion", clock(t_ms), {f"{_OURS}.queries": queries})
            )
    # The answer's own code when its failure came from here (model_failed, say); the run's
    # message says what the run itself raised.
    code = reading.error[0] if reading.error is not None else "run_failed"
    error = (code, run.error) if run.error is not None else None
    if error is not None:
        attributes[error_attributes.ERROR_TYPE] = error[0]
        events.append(_exception(error, clock(end_ms)))
    # A model served elsewhere is a call out; the extractive model runs in the process.
    remote = run.kind == "model" and _provider(header) != "reactome-answers"
    kind_of_span: SpanKind = "client" if remote else "internal"
    return SpanSpec(
        name=run.name,
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent_span_id,
        start_ns=clock(run.start_ms),
        end_ns=clock(max(end_ms, run.start_ms)),
        kind=kind_of_span,
        attributes=attributes,
        events=tuple(events),
        error=error,
    )


def _retrieval_attributes(
    reading: _Reading, header: LogHeader, content: bool
) -> dict[str, AttributeValue]:
    """The numbered sources as the retriever's documents, in citation order, in both
    conventions; the unnumbered context and the search's counts as our own."""
    record = reading.retrieval
    scores = {c.n: c.score for c in reading.outcomes if c.outcome == "kept"}
    texts = _source_texts(reading)
    attributes: dict[str, AttributeValue] = {
        gen_ai.GEN_AI_OPERATION_NAME: "retrieval",
    }
    question = header.normalized_question or header.question
    if question is not None:
        attributes[SpanAttributes.INPUT_VALUE] = question
        attributes[gen_ai.GEN_AI_RETRIEVAL_QUERY_TEXT] = question
    if record is not None:
        attributes[gen_ai.GEN_AI_DATA_SOURCE_ID] = ",".join(record.collections)
        attributes[f"{_OURS}.retrieval.queries"] = list(record.queries)
        attributes[f"{_OURS}.retrieval.collections"] = list(record.collections)
        for key, value in (("considered", record.considered), ("read", record.ranked)):
            if value is not None:
                attributes[f"{_OURS}.retrieval.{key}"] = value
    listed: list[dict[str, Any]] = []
    prefix = SpanAttributes.RETRIEVAL_DOCUMENTS
    for index, citation in enumerate(reading.citations):
        data = citation.data
        identifier = str(data.st_id or data.url)
        score = scores.get(data.n)
        at = f"{prefix}.{index}"
        attributes[f"{at}.{DocumentAttributes.DOCUMENT_ID}"] = identifier
        metadata = {
            "n": data.n,
            "title": data.display_name,
            "collection": data.collection,
            **({"st_id": data.st_id} if data.st_id else {"url": data.url}),
        }
        attributes[f"{at}.{DocumentAttributes.DOCUMENT_METADATA}"] = _json(metadata)
        if score is not None:
            attributes[f"{at}.{DocumentAttributes.DOCUMENT_SCORE}"] = score
        if content and data.n in texts:
            attributes[f"{at}.{DocumentAttributes.DOCUMENT_CONTENT}"] = texts[data.n]
        listed.append({"id": identifier, **({"score": score} if score is not None else {})})
    attributes[gen_ai.GEN_AI_RETRIEVAL_DOCUMENTS] = _json(listed)
    context = _context_ids(reading)
    if context:
        attributes[f"{_OURS}.retrieval.context"] = context
    return attributes


def _source_texts(reading: _Reading) -> dict[int, str]:
    """Each numbered source's passage (the retriever's document whose id it cites)."""
    by_id: dict[str, str] = {}
    for document in reading.documents:
        metadata = document.get("metadata")
        if not isinstance(metadata, Mapping):
            continue
        identifier = metadata.get("st_id") or metadata.get("url")
        if isinstance(identifier, str) and identifier not in by_id:
            by_id[identifier] = str(document.get("page_content") or "")
    found = {}
    for citation in reading.citations:
        identifier = citation.data.st_id or citation.data.url
        if identifier in by_id:
            found[citation.data.n] = by_id[identifier]
    return found


def _context_ids(reading: _Reading) -> list[str]:
    """The documents the model was given without a number: their ids, or chunk ids."""
    cited = {c.data.st_id or c.data.url for c in reading.citations}
    found = []
    for document in reading.documents:
        metadata = document.get("metadata")
        metadata = metadata if isinstance(metadata, Mapping) else {}
        identifier = metadata.get("st_id") or metadata.get("url") or document.get("id")
        if identifier and identifier not in cited:
            found.append(str(identifier))
    return found


def _dropped(reading: _Reading) -> dict[str, AttributeValue]:
    """The candidates the search dropped, as one JSON list of their ids, outcomes and
    scores (their chunks and ranks are in the log), as ``gen_ai.retrieval.documents`` lists
    the kept ones: the record's own bound keeps them few
    (:data:`pipelines.retrieval.retrieval_record.RECORD_BOUND`), and one text costs the
    exporter's encoder a fraction of what a list value per candidate does."""
    dropped = [
        {"id": c.id, "outcome": c.outcome, **({"score": c.score} if c.score is not None else {})}
        for c in reading.outcomes
        if c.outcome not in ("kept", "context")
    ]
    return {f"{_OURS}.retrieval.dropped": _json(dropped)} if dropped else {}


def _provider(header: LogHeader) -> str:
    llm = str(header.options.get("llm") or "")
    return _PROVIDERS.get(llm.partition(":")[0], llm.partition(":")[0] or "unknown")


def _model_name(header: LogHeader, run: _Run) -> str:
    ended = (run.end or {}).get("model")
    if isinstance(ended, str) and ended:
        return ended
    llm = str(header.options.get("llm") or "")
    return llm.partition(":")[2] or llm or run.name


def _role(run: _Run) -> str:
    if ANSWER_TAG in run.tags:
        return "answer"
    return "expander" if EXPANDER_TAG in run.tags else "model"


def _model_attributes(
    run: _Run, reading: _Reading, header: LogHeader, content: bool
) -> dict[str, AttributeValue]:
    model = _model_name(header, run)
    attributes: dict[str, AttributeValue] = {
        gen_ai.GEN_AI_OPERATION_NAME: "chat",
        gen_ai.GEN_AI_REQUEST_MODEL: model,
        gen_ai.GEN_AI_PROVIDER_NAME: _provider(header),
        SpanAttributes.LLM_MODEL_NAME: model,
        SpanAttributes.LLM_PROVIDER: _provider(header),
        f"{_OURS}.role": _role(run),
    }
    usage = (run.end or {}).get("usage")
    prompt = usage.get("input_tokens") if isinstance(usage, Mapping) else None
    output = usage.get("output_tokens") if isinstance(usage, Mapping) else None
    if prompt is None and isinstance(run.record.get("prompt_tokens"), int):
        prompt = run.record["prompt_tokens"]
    if prompt is None and ANSWER_TAG in run.tags and reading.done is not None:
        prompt = reading.done.usage.prompt_tokens  # counted at the end with no log
    if output is None and ANSWER_TAG in run.tags and reading.done is not None:
        output = reading.done.usage.answer_tokens
    if isinstance(prompt, int):
        attributes[gen_ai.GEN_AI_USAGE_INPUT_TOKENS] = prompt
        attributes[SpanAttributes.LLM_TOKEN_COUNT_PROMPT] = prompt
    if isinstance(output, int):
        attributes[gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS] = output
        attributes[SpanAttributes.LLM_TOKEN_COUNT_COMPLETION] = output
    if ANSWER_TAG in run.tags and reading.first_token_ms is not None:
        attributes[f"{_OURS}.first_token_ms"] = round(reading.first_token_ms - run.start_ms, 3)
    if content:
        attributes.update(_messages(run))
    return attributes


def _messages(run: _Run) -> dict[str, AttributeValue]:
    """The model's messages, as each convention lists them (only with ``content``)."""
    attributes: dict[str, AttributeValue] = {}
    messages = run.record.get("messages")
    sent = [m for m in messages or () if isinstance(m, Mapping)]
    for index, message in enumerate(sent):
        at = f"{SpanAttributes.LLM_INPUT_MESSAGES}.{index}"
        attributes[f"{at}.{MessageAttributes.MESSAGE_ROLE}"] = str(message.get("role"))
        attributes[f"{at}.{MessageAttributes.MESSAGE_CONTENT}"] = str(message.get("content"))
    if sent:
        attributes[gen_ai.GEN_AI_INPUT_MESSAGES] = _json(
            [
                {
                    "role": str(m.get("role")),
                    "parts": [{"type": "text", "content": str(m.get("content"))}],
                }
                for m in sent
            ]
        )
    if run.tokens:
        text = "".join(run.tokens)
        at = f"{SpanAttributes.LLM_OUTPUT_MESSAGES}.0"
        attributes[f"{at}.{MessageAttributes.MESSAGE_ROLE}"] = "assistant"
        attributes[f"{at}.{MessageAttributes.MESSAGE_CONTENT}"] = text
        attributes[gen_ai.GEN_AI_OUTPUT_MESSAGES] = _json(
            [{"role": "assistant", "parts": [{"type": "text", "content": text}]}]
        )
        attributes[SpanAttributes.OUTPUT_VALUE] = text
    return attributes


def _judge(reading: _Reading) -> str:
    judge = (reading.evidence_started or {}).get("judge")
    return str(judge) if judge else "unknown"


def _evaluations(reading: _Reading, clock: _Clock) -> list[SpanEventSpec]:
    """One ``gen_ai.evaluation.result`` per (sentence, cited source) ruling of the final
    answer, at the time the rulings were handed to the finalizer."""
    done = reading.done
    if done is None or not done.evidence:
        return []
    time_ns = clock(reading.finish_ms if reading.finish_ms is not None else reading.end_ms)
    judge = _judge(reading)
    events = []
    for item in done.evidence:
        reference = done.references[item.n - 1]
        attributes: dict[str, AttributeValue] = {
            gen_ai.GEN_AI_EVALUATION_NAME: EVALUATION_NAME,
            gen_ai.GEN_AI_EVALUATION_SCORE_VALUE: item.score,
            gen_ai.GEN_AI_EVALUATION_SCORE_LABEL: "supported" if item.supported else "unsupported",
            f"{_OURS}.evidence.n": item.n,
            f"{_OURS}.evidence.source_id": _reference_id(reference),
            f"{_OURS}.evidence.sentence": list(item.sentence),
            f"{_OURS}.evidence.judge": judge,
        }
        events.append(SpanEventSpec("gen_ai.evaluation.result", time_ns, attributes))
    return events


def _closing_spans(
    reading: _Reading, trace_id: str, root_id: str, clock: _Clock, *, content: bool
) -> list[SpanSpec]:
    """The evidence step (its custom event to the finish) and the finalizer (the finish to
    ``done``), for an answer that reached them."""
    spans = []
    finish = FinishRecord.read(reading.finish or {})
    if reading.evidence_ms is not None:
        end = reading.finish_ms if reading.finish_ms is not None else reading.end_ms
        verdicts = finish.verdicts
        attributes: dict[str, AttributeValue] = {
            SpanAttributes.OPENINFERENCE_SPAN_KIND: OpenInferenceSpanKindValues.EVALUATOR.value,
            f"{_OURS}.evidence.judge": _judge(reading),
            f"{_OURS}.evidence.rulings": len(verdicts),
            f"{_OURS}.evidence.supported": sum(1 for _, v in verdicts if v.supported),
        }
        claims = (reading.evidence_started or {}).get("claims")
        if isinstance(claims, int):
            attributes[f"{_OURS}.evidence.claims"] = claims
        error = None
        if reading.evidence_failed is not None:
            error = ("evidence_failed", reading.evidence_failed)
            attributes[error_attributes.ERROR_TYPE] = error[0]
        spans.append(
            SpanSpec(
                name="evidence",
                trace_id=trace_id,
                span_id=child_span_id(root_id, "evidence"),
                parent_span_id=root_id,
                start_ns=clock(reading.evidence_ms),
                end_ns=clock(max(end, reading.evidence_ms)),
                attributes=attributes,
                events=(_exception(error, clock(end)),) if error else (),
                error=error,
            )
        )
    if reading.finish_ms is not None and reading.done is not None:
        attributes = {
            SpanAttributes.OPENINFERENCE_SPAN_KIND: OpenInferenceSpanKindValues.CHAIN.value,
            f"{_OURS}.state": reading.done.state,
            f"{_OURS}.references.count": len(reading.done.references),
            f"{_OURS}.drop_unsupported": finish.drop,
        }
        if content:
            attributes[SpanAttributes.OUTPUT_VALUE] = reading.done.text
        spans.append(
            SpanSpec(
                name="finalize",
                trace_id=trace_id,
                span_id=child_span_id(root_id, "finalize"),
                parent_span_id=root_id,
                start_ns=clock(reading.finish_ms),
                end_ns=clock(max(reading.end_ms, reading.finish_ms)),
                attributes=attributes,
            )
        )
    return spans


def _redacted(span: SpanSpec, redact: Callable[[str], str]) -> SpanSpec:
    """The span with every text in it passed through the redaction the logs apply."""

    def clean(key: str, value: AttributeValue) -> AttributeValue:
        if isinstance(value, str):
            if _is_json(key):
                return _json(_json_redacted(json.loads(value), redact))
            return redact(value)
        if _is_text_list(value):
            texts = [str(item) for item in value]
            if any("\n" in text for text in texts):
                return [redact(text) for text in texts]
            # One pass over the lot: no credential the redaction knows spans a line break.
            return redact("\n".join(texts)).split("\n")
        return value

    return dataclasses.replace(
        span,
        attributes={key: clean(key, value) for key, value in span.attributes.items()},
        events=tuple(
            SpanEventSpec(
                event.name,
                event.time_ns,
                {key: clean(key, value) for key, value in event.attributes.items()},
            )
            for event in span.events
        ),
        error=(span.error[0], redact(span.error[1])) if span.error else None,
    )
