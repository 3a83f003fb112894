"""Replaying an event log: drive a fresh handler from the recorded callbacks and compare.

``replay --check`` needs no model and no store: what the handler received is in the log, so a
changed handler can be checked against real past answers.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Iterator
from typing import Any
from uuid import UUID

from langchain_core.documents import Document
from pydantic import ValidationError

from callbacks.events import DoneEvent, Event, StartEvent, to_jsonl
from callbacks.finish_record import FinishRecord
from callbacks.handler import AnswerEventHandler
from callbacks.log import LogContents
from pipelines.core.errors import EventLogError
from pipelines.core.validation import validation_line

__all__ = [
    "MAX_GAP_S",
    "check_recorded",
    "comparable",
    "compare_replay",
    "paced",
    "replay_diff",
    "replay_events",
]


def _uuid(value: Any) -> UUID | None:
    return UUID(str(value)) if value else None


def _run_id(value: Any) -> UUID:
    run_id = _uuid(value)
    if run_id is None:
        raise ValueError("a run_id is missing")
    return run_id


def _chain_start(handler: AnswerEventHandler, **ids: Any) -> None:
    handler.on_chain_start(None, {}, **ids)


def _model_start(handler: AnswerEventHandler, **ids: Any) -> None:
    handler.on_chat_model_start(None, [], **ids)


def _retriever_start(handler: AnswerEventHandler, **ids: Any) -> None:
    handler.on_retriever_start(None, "", **ids)


class _UnknownHookError(Exception):
    """A record names a hook the handler has no call for."""


_ALTERED = "the log was altered, is corrupt or is from another version"


def _shown(text: str, limit: int = 60) -> str:
    """``text`` on one line and short: an altered log may put anything where a name was."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _reason(error: Exception) -> str:
    """What is wrong, in one line and in words rather than an exception's repr."""
    if isinstance(error, KeyError):
        return f"it has no {_shown(repr(error.args[0]) if error.args else 'field')}"
    if isinstance(error, ValidationError):
        return validation_line(error, first=3)
    return _shown(str(error) or type(error).__name__, 300)


_STARTS = {
    "chain_start": _chain_start,
    "model_start": _model_start,
    "retriever_start": _retriever_start,
}


def _replay_record(handler: AnswerEventHandler, hook: object, record: dict[str, Any]) -> None:
    """Hand one recorded callback to ``handler`` as the pipeline handed it the first time."""
    if hook == "start":
        handler.start(record["question"], record["collections"], record["options"])
    elif hook == "finish":
        finish = FinishRecord.read(record)
        if finish.problems or finish.state is None:
            raise ValueError("; ".join(finish.problems.values()))
        handler.finish(finish.state, finish.text, verdicts=finish.verdicts, drop=finish.drop)
    elif hook == "fail":
        handler.fail(record["code"], record["message"])
    elif hook == "retriever_end":
        documents = [Document(**document) for document in record["documents"]]
        handler.on_retriever_end(documents, run_id=_run_id(record.get("run_id")))
    elif hook == "llm_new_token":
        handler.on_llm_new_token(record["token"], run_id=_run_id(record.get("run_id")))
    elif hook == "custom_event":
        handler.on_custom_event(
            str(record["name"]), record["data"], run_id=_run_id(record.get("run_id"))
        )
    elif hook in ("run_end", "run_error"):
        return  # the end of a run: the handler only records it, for a trace
    elif isinstance(hook, str) and hook in _STARTS:
        counted = {"prompt_tokens": record["prompt_tokens"]} if "prompt_tokens" in record else {}
        _STARTS[hook](
            handler,
            run_id=_run_id(record.get("run_id")),
            parent_run_id=_uuid(record.get("parent_run_id")),
            tags=list(record["tags"]),
            name=str(record["name"]),
            **counted,
        )
    else:
        raise _UnknownHookError


def _language(recorded: object) -> str:
    if isinstance(recorded, str) and re.fullmatch("[a-z]{2,3}", recorded):
        return recorded
    return "en"


def replay_events(contents: LogContents) -> list[Event]:
    """The events a fresh handler emits when fed the log's recorded callbacks."""
    events: list[Event] = []
    options = contents.header.options
    handler = AnswerEventHandler(
        request_id=contents.header.request_id,
        emit=events.append,
        cite_urls=bool(options.get("cite_urls")),
        live_citations=bool(options.get("live_citations")),
        # A log from before answers had a language was answered in English.
        language=_language(options.get("language")),
        raise_error=True,
        trace_id=contents.header.trace_id,
    )
    for index, record in enumerate(contents.callbacks):
        hook = record.get("hook")
        try:
            _replay_record(handler, hook, record)
        except _UnknownHookError:
            what = f"of unknown hook {_shown(repr(hook))}" if "hook" in record else "without a hook"
            raise EventLogError(
                f"{contents.where_callback(index)}: a callback record {what}", fix=_ALTERED
            ) from None
        except Exception as error:
            # Whatever an altered record makes the handler do (a field of the wrong type, a
            # second finish after done), it is this record that cannot be replayed.
            raise EventLogError(
                f"{contents.where_callback(index)}: the {_shown(str(hook))} record cannot be "
                f"replayed ({_reason(error)})",
                fix=_ALTERED,
            ) from error  # kept for a test's traceback; the command prints the message alone
    return events


def comparable(event: Event) -> dict[str, Any]:
    """An event without what legitimately differs between runs: timing."""
    data: dict[str, Any] = json.loads(to_jsonl(event))
    data.pop("t_ms", None)
    if isinstance(event, DoneEvent):
        data["data"].pop("timings", None)
    return data


def check_recorded(contents: LogContents) -> None:
    """Raise an :class:`EventLogError` naming the file and line when the log breaks what every
    log we write keeps: the request's ``start`` record first and once, each run started and
    ended once; events of the log's request, numbered from 1 without a gap, ``start`` first
    and ``done`` once, last. Only an altered or damaged log breaks them; replayed as it is,
    it would end in a diff of every later event, or in a record the handler refuses, neither
    of which says what is wrong."""
    _check_callbacks(contents)
    _check_events(contents)


def _altered(where: str, what: str) -> EventLogError:
    return EventLogError(f"{where}: {what}", fix=_ALTERED)


# Hooks LangChain calls once per run: a second record of one run id was copied.
_ONCE_PER_RUN = frozenset({*_STARTS, "retriever_end"})


def _check_callbacks(contents: LogContents) -> None:
    seen: set[tuple[str, str]] = set()
    for index, record in enumerate(contents.callbacks):
        hook = record.get("hook")
        if index == 0 and hook != "start":
            raise _altered(
                contents.where_callback(0),
                "the first callback record is not the request's start record "
                "(it was removed or moved)",
            )
        if index and hook == "start":
            raise _altered(
                contents.where_callback(index),
                "a second start record (a log records one request, started once)",
            )
        if isinstance(hook, str) and hook in _ONCE_PER_RUN:
            run = (hook, str(record.get("run_id")))
            if run in seen:
                raise _altered(
                    contents.where_callback(index),
                    f"a second {hook} record of run {_shown(run[1])} (each run has one)",
                )
            seen.add(run)


def _check_events(contents: LogContents) -> None:
    request_id = contents.header.request_id
    last = len(contents.events) - 1
    for index, event in enumerate(contents.events):
        where = contents.where_event(index)
        if event.request_id != request_id:
            raise _altered(
                where,
                f"event {event.seq} is of request {_shown(repr(event.request_id))}, not of "
                f"this log's {_shown(repr(request_id))}",
            )
        if event.seq != index + 1:
            what = (
                "an event before it is missing"
                if event.seq > index + 1
                else "an event is repeated or out of order"
            )
            raise _altered(where, f"event seq {event.seq} where seq {index + 1} was due ({what})")
        if index == 0 and not isinstance(event, StartEvent):
            raise _altered(where, f"the first event is {event.type!r}, not 'start'")
        if index and isinstance(event, StartEvent):
            raise _altered(where, f"a second start event (seq {event.seq})")
        if isinstance(event, DoneEvent) and index != last:
            raise _altered(
                where, f"events follow the done event (seq {event.seq}); done comes once, last"
            )


def compare_replay(contents: LogContents) -> tuple[list[str], str | None]:
    """:func:`replay_diff`'s diff, and where the two first part in words (None when equal):
    what a one-line message can say of a diff of many."""
    check_recorded(contents)
    contents.check_complete()
    recorded = [comparable(event) for event in contents.events]
    replayed = [comparable(event) for event in replay_events(contents)]
    recorded_lines = [json.dumps(event, sort_keys=True) for event in recorded]
    replayed_lines = [json.dumps(event, sort_keys=True) for event in replayed]
    diff = list(
        difflib.unified_diff(recorded_lines, replayed_lines, "recorded", "replayed", lineterm="")
    )
    if not diff:
        return diff, None
    first = next(
        (
            index
            for index, (old, new) in enumerate(zip(recorded_lines, replayed_lines, strict=False))
            if old != new
        ),
        min(len(recorded_lines), len(replayed_lines)),
    )

    def kind(events: list[dict[str, Any]]) -> str:
        return f"a {events[first].get('type')} event" if first < len(events) else "no event"

    return diff, (
        f"from seq {first + 1} on: the log has {kind(recorded)} where a fresh handler "
        f"sends {kind(replayed)}"
        if kind(recorded) != kind(replayed)
        else f"from seq {first + 1} on: the {recorded[first].get('type')} events differ"
    )


def replay_diff(contents: LogContents) -> list[str]:
    """Unified diff (recorded vs replayed) of the events, timing ignored; empty when equal.

    An incomplete log (no ``done`` at its end) is an :class:`EventLogError`: what it lacks
    cannot be compared, so calling it identical would hide that it was cut off. So is a log
    that breaks what every log keeps (:func:`check_recorded`)."""
    return compare_replay(contents)[0]


# A recorded gap longer than this is replayed as this long: no real answer waits longer
# between two events (the request limit ends it first), and an altered log's 1e300 must not
# stall a replay for ever or overflow the sleep.
MAX_GAP_S = 60.0


def paced(events: Iterable[Event], speed: float | None) -> Iterator[tuple[float, Event]]:
    """Each event with the seconds to wait before it: the recorded gaps (at most
    :data:`MAX_GAP_S` each) divided by ``speed``, or none at all when ``speed`` is None."""
    previous = 0.0
    for event in events:
        gap = min(max(event.t_ms - previous, 0.0) / 1000, MAX_GAP_S)
        previous = event.t_ms
        yield (0.0 if speed is None else gap / speed), event
