"""The JSON result of one request: what ``invoke``, ``POST /v1/answer`` and ``ask --json`` give."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from callbacks.events import DoneEvent, ErrorEvent, Event

__all__ = ["answer_result"]


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
