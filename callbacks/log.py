"""Event logs: one JSONL file per request, enough to replay what the handler saw.

Line 1 is a header (``kind: "header"``: schema version, request id, question, settings
digest, collections and their release, created_at). Every later line is either a raw record
of something the handler received (``kind: "callback"``: the hook's name and its arguments,
documents and tokens included) or a public event it emitted (``kind: "event"``), in the
order they happened. Each line is flushed as it is written, so a crash loses nothing already
emitted, and a log that cannot be written is reported once without stopping the answer.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from callbacks.events import Event, parse_event, to_jsonl
from pipelines.errors import EventLogError
from pipelines.redaction import redact_secrets
from pipelines.settings import Settings

__all__ = [
    "LOG_SCHEMA_VERSION",
    "EventLog",
    "LogContents",
    "log_file_name",
    "prune_configured_logs",
    "prune_logs",
    "read_log",
]

LOG_SCHEMA_VERSION = 1
_STAMP_FORMAT = "%Y%m%dT%H%M%S%f"
# Only files named as we name them are ever pruned; anything else in the folder is left alone.
_LOG_NAME = re.compile(r"(?P<stamp>\d{8}T\d{12})-[A-Za-z0-9_.-]+\.jsonl")


def log_file_name(request_id: str, now: datetime) -> str:
    """``<UTC timestamp>-<request id>.jsonl``: names sort by creation time."""
    safe_id = re.sub(r"[^A-Za-z0-9_.-]", "_", request_id)[:80] or "_"
    return f"{now.astimezone(UTC).strftime(_STAMP_FORMAT)}-{safe_id}.jsonl"


def prune_configured_logs(
    settings: Settings,
    *,
    keep_days: float | None = None,
    keep_count: int | None = None,
    dry_run: bool = False,
) -> list[Path]:
    """:func:`prune_logs` on the settings' log folder with their retention (either rule may
    be overridden), sparing logs touched within one request timeout plus a minute: their
    requests may still be running."""
    return prune_logs(
        settings.logs_dir,
        keep_days=settings.log_retention_days if keep_days is None else keep_days,
        keep_count=settings.log_retention_count if keep_count is None else keep_count,
        spare_newer_than=timedelta(seconds=settings.request_timeout_s + 60),
        dry_run=dry_run,
    )


def prune_logs(
    folder: Path,
    *,
    keep_days: float,
    keep_count: int,
    now: datetime | None = None,
    spare_newer_than: timedelta = timedelta(0),
    dry_run: bool = False,
) -> list[Path]:
    """Delete the logs older than ``keep_days`` and all but the newest ``keep_count`` (a zero
    turns that rule off); returns what was (or, with ``dry_run``, would be) deleted.

    A log written to within ``spare_newer_than`` is never deleted: its request may still be
    running. A file that cannot be deleted is skipped, and the first such error is raised
    once the others are done."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    logs: list[tuple[datetime, Path]] = []
    with contextlib.suppress(FileNotFoundError):
        for path in folder.iterdir():
            match = _LOG_NAME.fullmatch(path.name)
            if not match:
                continue
            try:
                created = datetime.strptime(match["stamp"], _STAMP_FORMAT).replace(tzinfo=UTC)
            except ValueError:  # looks like ours, but is no real time: not ours to delete
                continue
            logs.append((created, path))
    logs.sort(reverse=True)
    doomed = logs[keep_count:] if keep_count else []
    if keep_days:
        try:
            cutoff = now - timedelta(days=keep_days)
        except OverflowError:  # a retention longer than the calendar: nothing is that old
            cutoff = datetime.min.replace(tzinfo=UTC)
        doomed += [entry for entry in logs[: keep_count or None] if entry[0] < cutoff]
    deleted: list[Path] = []
    failure: OSError | None = None
    spare_after = now.timestamp() - spare_newer_than.total_seconds()
    for _, path in sorted(doomed):
        try:
            if path.stat().st_mtime > spare_after:
                continue
            if not dry_run:
                path.unlink()
        except FileNotFoundError:  # another process pruned it first
            continue
        except OSError as error:
            failure = failure or error
            continue
        deleted.append(path)
    if failure is not None:
        raise failure
    return deleted


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

    def _fail(self, error: Exception) -> None:
        if not self._failed:
            self._failed = True
            print(f"reactome-answers: warning: event log {self.path} not written "
                  f"({redact_secrets(str(error))})", file=sys.stderr)  # fmt: skip
        self._close_quietly()

    def _close_quietly(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            # Closing flushes, and on a full disk the flush fails again: already reported.
            with contextlib.suppress(OSError):
                stream.close()

    def _write(self, record: dict[str, Any]) -> None:
        if self._stream is None:
            return
        line = json.dumps(record, ensure_ascii=False, default=str)
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: JSON's escapes carry it exactly
            line = json.dumps(record, default=str)
        try:
            self._stream.write(line + "\n")
            self._stream.flush()
        except (OSError, ValueError) as error:
            self._fail(error)

    @property
    def writing(self) -> bool:
        """False once the log could not be opened or written."""
        return self._stream is not None

    def callback(self, hook: str, arguments: dict[str, Any]) -> None:
        self._write({"kind": "callback", "hook": hook, **arguments})

    def event(self, event: Event) -> None:
        if self._stream is not None:
            self._write({"kind": "event", "event": json.loads(to_jsonl(event))})

    def close(self) -> None:
        if self._stream is not None:
            try:
                self._stream.flush()
            except OSError as error:
                self._fail(error)
        self._close_quietly()


@dataclass
class LogContents:
    header: dict[str, Any]
    callbacks: list[dict[str, Any]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


def read_log(path: Path) -> LogContents:
    """Parse a log; a missing, corrupt, truncated or foreign file names the file and line."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise EventLogError(
            f"cannot read {path} ({error.strerror or error})", fix="give the path of a .jsonl log"
        ) from error
    lines: list[str] = []
    for number, encoded in enumerate(raw.split(b"\n"), start=1):
        try:
            lines.append(encoded.decode("utf-8").removesuffix("\r"))
        except UnicodeDecodeError:
            raise EventLogError(
                f"{path}:{number} is not UTF-8 text", fix="the log is corrupt here, or not a log"
            ) from None
    if lines and not lines[-1]:
        lines.pop()  # the newline that ends the last record
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
            if not isinstance(record.get("request_id"), str) or not record["request_id"]:
                raise EventLogError(f"{where}: the header has no request_id",
                                    fix="the log is corrupt or from another program")  # fmt: skip
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
