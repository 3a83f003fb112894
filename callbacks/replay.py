"""Replaying an event log: drive a fresh handler from the recorded callbacks and compare.

``replay --check`` needs no model and no store: what the handler received is in the log, so a
changed handler can be checked against real past answers.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Iterator
from typing import Any
from uuid import UUID

from langchain_core.documents import Document

from callbacks.events import DoneEvent, Event, to_jsonl
from callbacks.handler import AnswerEventHandler
from callbacks.log import LogContents
from pipelines.answering.evidence import Claim, Verdict
from pipelines.core.errors import EventLogError

__all__ = ["MAX_GAP_S", "comparable", "paced", "replay_diff", "replay_events"]


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


def _verdicts(recorded: Iterable[dict[str, Any]]) -> list[tuple[Claim, Verdict]]:
    """The judge's rulings as :meth:`AnswerEventHandler.finish` was given them."""
    return [
        (
            Claim(str(item["sentence"]), int(item["source_n"]), ""),
            Verdict(
                (int(item["quote_span"][0]), int(item["quote_span"][1])),
                float(item["score"]),
                bool(item["supported"]),
            ),
        )
        for item in recorded
    ]


_STARTS = {
    "chain_start": _chain_start,
    "model_start": _model_start,
    "retriever_start": _retriever_start,
}


def replay_events(contents: LogContents) -> list[Event]:
    """The events a fresh handler emits when fed the log's recorded callbacks."""
    events: list[Event] = []
    options = contents.header.get("options")
    if not isinstance(options, dict):  # an altered header: replay as with no options
        options = {}
    handler = AnswerEventHandler(
        request_id=str(contents.header["request_id"]),
        emit=events.append,
        cite_urls=bool(options.get("cite_urls")),
        live_citations=bool(options.get("live_citations")),
        raise_error=True,
    )
    for number, record in enumerate(contents.callbacks, start=1):
        hook = record.get("hook")
        try:
            if hook == "start":
                handler.start(record["question"], record["collections"], record["options"])
            elif hook == "finish":
                handler.finish(
                    record["state"],
                    record["text"],
                    verdicts=_verdicts(record.get("verdicts") or ()),
                    drop=bool(record.get("drop")),
                )
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
            elif hook in _STARTS:
                counted = (
                    {"prompt_tokens": record["prompt_tokens"]} if "prompt_tokens" in record else {}
                )
                _STARTS[hook](
                    handler,
                    run_id=_run_id(record.get("run_id")),
                    parent_run_id=_uuid(record.get("parent_run_id")),
                    tags=list(record["tags"]),
                    name=str(record["name"]),
                    **counted,
                )
            else:
                raise EventLogError(f"callback record {number} has an unknown hook {hook!r}")
        except (KeyError, TypeError, ValueError) as error:
            raise EventLogError(
                f"callback record {number} ({hook}) cannot be replayed ({error!r})",
                fix="the log is corrupt or from another version",
            ) from None
    return events


def comparable(event: Event) -> dict[str, Any]:
    """An event without what legitimately differs between runs: timing."""
    data: dict[str, Any] = json.loads(to_jsonl(event))
    data.pop("t_ms", None)
    if isinstance(event, DoneEvent):
        data["data"].pop("timings", None)
    return data


def replay_diff(contents: LogContents) -> list[str]:
    """Unified diff (recorded vs replayed) of the events, timing ignored; empty when equal.

    An incomplete log (no ``done`` at its end) is an :class:`EventLogError`: what it lacks
    cannot be compared, so calling it identical would hide that it was cut off."""
    contents.check_complete()
    recorded = [json.dumps(comparable(e), sort_keys=True) for e in contents.events]
    replayed = [json.dumps(comparable(e), sort_keys=True) for e in replay_events(contents)]
    return list(difflib.unified_diff(recorded, replayed, "recorded", "replayed", lineterm=""))


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
