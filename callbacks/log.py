"""Event logs: one JSONL file per request, enough to replay what the handler saw.

Line 1 is a header (``kind: "header"``: schema version, request id, question, settings
digest, collections and their release, created_at). Every later line is either a raw record
of something the handler received (``kind: "callback"``: the hook's name and its arguments,
documents and tokens included) or a public event it emitted (``kind: "event"``), in the
order they happened. Each line is flushed as it is written, so a crash loses nothing already
emitted, and a log that cannot be written is reported once without stopping the answer.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from callbacks.events import Event, parse_event, to_jsonl
from pipelines.errors import EventLogError

__all__ = ["LOG_SCHEMA_VERSION", "EventLog", "LogContents", "read_log"]

LOG_SCHEMA_VERSION = 1


class EventLog:
    """Writes one request's log; never raises once open (failures are reported once)."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.path = path
        self._stream: IO[str] | None = None
        self._failed = False
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._stream = path.open("x", encoding="utf-8")
        except OSError as error:
            self._fail(error)
            return
        self._write({"kind": "header", "schema": LOG_SCHEMA_VERSION, **header})

    def _fail(self, error: OSError) -> None:
        if not self._failed:
            self._failed = True
            print(f"reactome-answers: warning: event log {self.path} not written ({error})",
                  file=sys.stderr)  # fmt: skip
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def _write(self, record: dict[str, Any]) -> None:
        if self._stream is None:
            return
        try:
            self._stream.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
            self._stream.flush()
        except OSError as error:
            self._fail(error)

    def callback(self, hook: str, arguments: dict[str, Any]) -> None:
        self._write({"kind": "callback", "hook": hook, **arguments})

    def event(self, event: Event) -> None:
        if self._stream is not None:
            self._write({"kind": "event", "event": json.loads(to_jsonl(event))})

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None


@dataclass
class LogContents:
    header: dict[str, Any]
    callbacks: list[dict[str, Any]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


def read_log(path: Path) -> LogContents:
    """Parse a log; a missing, corrupt, truncated or foreign file names the file and line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise EventLogError(
            f"cannot read {path} ({error})", fix="give the path of a .jsonl log"
        ) from error
    contents: LogContents | None = None
    for number, line in enumerate(lines, start=1):
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise EventLogError(f"{where} is not JSON ({error.msg})",
                                fix="the log is corrupt or truncated here") from None  # fmt: skip
        if not isinstance(record, dict):
            raise EventLogError(f"{where} is not a log record", fix="give a reactome-answers log")
        kind = record.get("kind")
        if number == 1:
            if kind != "header" or record.get("schema") != LOG_SCHEMA_VERSION:
                raise EventLogError(f"{where} is not a reactome-answers event log header",
                                    fix="give a log written by this version")  # fmt: skip
            contents = LogContents(header=record)
        elif contents is None:  # pragma: no cover - line 1 always sets it
            raise EventLogError(f"{where}: no header")
        elif kind == "callback":
            contents.callbacks.append(record)
        elif kind == "event":
            try:
                contents.events.append(parse_event(record["event"]))
            except Exception as error:
                raise EventLogError(f"{where} holds an invalid event ({error})",
                                    fix="the log was altered or is corrupt") from None  # fmt: skip
        else:
            raise EventLogError(
                f"{where} has an unknown kind {kind!r}", fix="give a reactome-answers log"
            )
    if contents is None:
        raise EventLogError(f"{path} is empty", fix="give the path of a .jsonl log")
    return contents
