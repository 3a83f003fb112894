"""Reading a whole SSE response strictly, as a client would, for the fault and forgery tests."""

from __future__ import annotations

import re

from callbacks.events import Event
from callbacks.events import parse_event as parse_event_json

_TYPES = {"start", "citation", "reference", "token", "error", "done"}


def parse_sse(body: str) -> list[Event]:
    """Every event of an SSE body; fails on any frame that is not exactly one of ours.

    Frames end at a blank line (any of the three line endings); ``:`` lines are keep-alive
    comments. Each frame must carry ``id`` equal to its event's seq, ``event`` equal to its
    type, and one ``data`` line holding the whole event as JSON."""
    events: list[Event] = []
    for frame in re.split(r"\r\n\r\n|\n\n|\r\r", body):
        lines = [line for line in re.split(r"\r\n|\n|\r", frame) if line and line[0] != ":"]
        if not lines:
            continue
        fields: dict[str, list[str]] = {}
        for line in lines:
            name, _, value = line.partition(":")
            fields.setdefault(name, []).append(value.removeprefix(" "))
        assert set(fields) == {"id", "event", "data"}, f"unexpected frame {frame!r}"
        assert all(len(values) == 1 for values in fields.values()), f"repeated field {frame!r}"
        event = parse_event_json(fields["data"][0])
        assert event.type in _TYPES, frame
        assert fields["event"][0] == event.type, frame
        assert fields["id"][0] == str(event.seq), frame
        events.append(event)
    return events
