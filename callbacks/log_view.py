"""One answer's log as the log page shows it: a JSON object built from the log alone.

:func:`log_view` is pure: the page (``GET /logs/{request_id}``, ``logs view``, ``replay
--serve``) only draws what it returns, so what the page says about an answer (which event
came when, which candidate became which reference, what the model was sent) is decided and
tested here, once, without a browser. :func:`read_log_view` is the one reader of files.

Every value comes from a file that may have been altered by hand, so every field is read
tolerantly (a record of the wrong shape reads as absent) and the result is plain JSON:
strings, finite numbers, booleans, None, lists and objects.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from callbacks.events import (
    CitationEvent,
    DoneEvent,
    ErrorEvent,
    Event,
    Reference,
    ReferenceEvent,
    StartEvent,
    TokenEvent,
)
from callbacks.feedback import read_feedback
from callbacks.log import LogContents, read_log
from callbacks.log_records import (
    custom_data,
    mapping,
    model_input,
    model_raw_text,
    read_retrieval_record,
    searched_queries,
)
from pipelines.core.tags import EXPANSION_RECORD
from pipelines.retrieval.retrieval_record import RetrievalRecord

__all__ = ["SUMMARY_CHARS", "VIEW_VERSION", "log_view", "read_log_view", "shorten", "trace_link"]

E = TypeVar("E")

# Bumped when a field changes meaning, so a page can tell a view it does not know.
VIEW_VERSION = 1
# A timeline row's summary is one glance long; the whole text is elsewhere on the page.
SUMMARY_CHARS = 160
_CANDIDATE_FIELDS = (
    "collection",
    "st_id",
    "url",
    "title",
    "chunk_id",
    "fused",
    "similarity",
    "keyword_evidence",
    "score",
)


def read_log_view(path: Path, trace_url: str | None = None) -> dict[str, Any]:
    """The view of the log at ``path``, with the feedback stored beside it; an
    :class:`~pipelines.core.errors.EventLogError` when it cannot be read."""
    return log_view(read_log(path), feedback=read_feedback(path), trace_url=trace_url)


def trace_link(trace_id: str | None, trace_url: str | None) -> str | None:
    """The page of the trace ``trace_id`` in the operator's tracing backend: ``trace_url``
    (``REACTOME_ANSWERS_TRACE_URL``) with the id in place of ``{trace_id}``; None without
    either, or when the template is no http(s) address (a page links to nothing else)."""
    if not trace_id or not trace_url or not trace_url.startswith(("http://", "https://")):
        return None
    return trace_url.replace("{trace_id}", trace_id)


def log_view(
    contents: LogContents,
    feedback: dict[str, Any] | None = None,
    trace_url: str | None = None,
) -> dict[str, Any]:
    """What the page shows of one log (see the module's docstring); ``feedback`` is
    :func:`callbacks.feedback.read_feedback`'s, passed in so that this reads no file;
    ``trace_url`` the settings' template of a trace's page (:func:`trace_link`)."""
    header = contents.header
    done = _last(contents.events, DoneEvent)
    start = _last(contents.events, StartEvent)
    error = _last(contents.events, ErrorEvent)
    references = _references(contents.events, done)
    expansion = mapping(custom_data(contents, EXPANSION_RECORD))
    view: dict[str, Any] = {
        "view": VIEW_VERSION,
        "request_id": header.request_id,
        "created_at": header.created_at,
        "trace_id": header.trace_id,
        "trace_url": trace_link(header.trace_id, trace_url),
        "state": done.data.state if done else "incomplete",
        "question": header.question or "",
        "normalized_question": header.normalized_question,
        "history": [{"role": role, "content": content} for role, content in header.history],
        "collections": list(header.collections),
        "options": dict(start.data.options) if start else {},
        "releases": _releases(header.releases),
        "searched": {
            "queries": searched_queries(contents),
            "collections": _strings(expansion.get("collections")),
        },
        "timeline": timeline(contents.events),
        "candidates": _candidates(read_retrieval_record(contents), references),
        "answer": {
            "text": done.data.text if done else _streamed_text(contents.events),
            "references": [reference.model_dump() for reference in references],
            # Each citation's quote and ruling, so the page can mark unsupported ones.
            "evidence": [item.model_dump(mode="json") for item in done.data.evidence]
            if done
            else [],
            "error": error.data.model_dump() if error else None,
        },
        "model": {"input": model_input(contents), "raw_text": model_raw_text(contents)},
        "timings": done.data.timings.model_dump() if done else None,
        "usage": done.data.usage.model_dump() if done else None,
        "feedback": feedback,
    }
    safe: dict[str, Any] = _json_safe(view)
    return safe


def shorten(text: str, limit: int = SUMMARY_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def timeline(events: Sequence[Event]) -> list[dict[str, Any]]:
    """One row per event in ``t_ms`` order (``type``, ``seq``, ``t_ms``, ``summary``); a run
    of consecutive tokens is one row (``count`` tokens, up to ``seq_last`` and
    ``t_ms_last``), so a long answer is a few rows, and its first token keeps its seq."""
    rows: list[dict[str, Any]] = []
    tokens: list[TokenEvent] = []

    def flush() -> None:
        if tokens:
            text = "".join(token.data.text for token in tokens)
            count = len(tokens)
            rows.append({
                "type": "token", "seq": tokens[0].seq, "t_ms": tokens[0].t_ms,
                "summary": f"{count} token{'s' if count != 1 else ''}: {shorten(text)}",
                "count": count, "seq_last": tokens[-1].seq, "t_ms_last": tokens[-1].t_ms,
            })  # fmt: skip
            tokens.clear()

    # Stable: events recorded at the same t_ms keep their seq order.
    for event in sorted(events, key=lambda event: event.t_ms):
        if isinstance(event, TokenEvent):
            tokens.append(event)
            continue
        flush()
        rows.append(
            {"type": event.type, "seq": event.seq, "t_ms": event.t_ms, "summary": _summary(event)}
        )
    flush()
    return rows


def _summary(event: Event) -> str:
    if isinstance(event, StartEvent):
        return shorten(event.data.question)
    if isinstance(event, CitationEvent):
        data = event.data
        return shorten(
            f"[{data.n}] {data.display_name} ({data.collection}, {data.st_id or data.url})"
        )
    if isinstance(event, ReferenceEvent):
        reference = event.data
        return shorten(f"[{reference.n}] (source {reference.source_n}) {reference.display_name}")
    if isinstance(event, ErrorEvent):
        return shorten(f"{event.data.code}: {event.data.message}")
    if isinstance(event, DoneEvent):
        count = len(event.data.references)
        return f"{event.data.state}, {count} reference{'s' if count != 1 else ''}"
    return ""  # pragma: no cover - tokens are grouped by the caller


def _last(events: Iterable[Event], kind: type[E]) -> E | None:
    found: E | None = None
    for event in events:
        if isinstance(event, kind):
            found = event
    return found


def _references(events: Sequence[Event], done: DoneEvent | None) -> list[Reference]:
    """The answer's references: done's, or for a log cut off before it, those its reference
    events had announced."""
    if done is not None:
        return list(done.data.references)
    return [event.data for event in events if isinstance(event, ReferenceEvent)]


def _streamed_text(events: Sequence[Event]) -> str:
    return "".join(event.data.text for event in events if isinstance(event, TokenEvent))


def _text_or_none(value: object) -> str | None:
    return None if value is None else str(value)


def _strings(value: object) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else []


def _releases(value: object) -> list[dict[str, Any]]:
    """Each collection searched, with its release and the version and indexes that ranked it."""
    return [
        {
            "collection": str(name),
            "release": _text_or_none(mapping(info).get("release")),
            "version": _text_or_none(mapping(info).get("version")),
            "indexes": _strings(mapping(info).get("indexes")),
        }
        for name, info in mapping(value).items()
    ]


def _candidates(
    record: RetrievalRecord | None, references: Sequence[Reference]
) -> dict[str, Any] | None:
    """The retriever's record of its candidates (None when the log holds none), each with
    ``cited``: kept, and given the number that a final reference came from
    (``reference_n`` is that reference's number in the answer)."""
    if record is None:
        return None
    final_number = {reference.source_n: reference.n for reference in references}
    candidates = []
    for row in record.candidates:
        candidate: dict[str, Any] = {name: getattr(row, name) for name in _CANDIDATE_FIELDS}
        candidate["ranks"] = [{"dense": r.dense, "keyword": r.keyword} for r in row.ranks]
        candidate["outcome"] = row.outcome or ""
        candidate["n"] = row.n
        cited = row.outcome == "kept" and row.n is not None and row.n in final_number
        candidate["cited"] = cited
        candidate["reference_n"] = final_number[row.n] if cited and row.n is not None else None
        candidates.append(candidate)
    return {
        "queries": list(record.queries),
        "collections": list(record.collections),
        "bound": record.bound,
        "considered": record.considered,
        "read": record.ranked,
        "candidates": candidates,
    }


def _json_safe(value: Any) -> Any:
    """``value`` as strict JSON: a number that is not finite (``NaN`` in an altered log) is
    None, a key is a string, anything else that JSON lacks is its text."""
    if isinstance(value, dict):
        return {str(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(item) for item in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, str | int | bool):
        return value
    return str(value)
