"""Event logs: one JSONL file per request, enough to replay what the handler saw.

Line 1 is a header (``kind: "header"``, the schema version, then a
:class:`~callbacks.log_header.LogHeader`: request id, question, the earlier turns of the
conversation, settings digest, collections and their release, created_at). Every
later line is either a raw record of something the handler received (``kind: "callback"``:
the hook's name and its arguments, documents and tokens included) or a public event it
emitted (``kind: "event"``), in the order they happened. Each line is flushed as it is
written, so a crash loses nothing already emitted, and a log that cannot be written is
reported once without stopping the answer.

Every line is well-formed UTF-8: a lone surrogate anywhere in a record (a question sent as
the JSON escape ``\\ud800``, a broken decoder's output) is written as U+FFFD, as the events
already carry it. Reading is as tolerant: a log from an older version, or one altered by
hand, with lone surrogate escapes, raw control characters or bytes that are not UTF-8 inside
its strings is read with U+FFFD in their place, so every reader of a log gets text that can
be printed, encoded and sent.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import socket
import stat
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from callbacks._files import MAX_LOG_BYTES, read_regular_file
from callbacks.events import DoneEvent, Event, parse_event, to_jsonl
from callbacks.feedback import FEEDBACK_SUFFIX, feedback_path
from callbacks.log_header import LogHeader
from pipelines.core.errors import EventLogError
from pipelines.core.json_text import UnreadableJSONError, parse_json
from pipelines.core.redaction import redact_secrets
from pipelines.core.settings import Settings
from pipelines.core.text import without_surrogates
from pipelines.core.validation import validation_line

__all__ = [
    "LOG_SCHEMA_VERSION",
    "MAX_LOG_BYTES",
    "EventLog",
    "LogContents",
    "find_request_logs",
    "list_log_files",
    "log_file_name",
    "prune_configured_logs",
    "prune_logs",
    "read_log",
]

LOG_SCHEMA_VERSION = 1
_STAMP_FORMAT = "%Y%m%dT%H%M%S%f"
# Only files named as we name them are ever pruned; anything else in the folder is left alone.
_LOG_NAME = re.compile(r"(?P<stamp>\d{8}T\d{12})-[A-Za-z0-9_.-]+\.jsonl")


# A JSON escape of a surrogate (a lone one, or half of a pair): only a line holding one can
# parse to a str with a lone surrogate in it.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _file_id(request_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", request_id)[:80] or "_"


def log_file_name(request_id: str, now: datetime) -> str:
    """``<UTC timestamp>-<request id>.jsonl``: names sort by creation time."""
    return f"{now.astimezone(UTC).strftime(_STAMP_FORMAT)}-{_file_id(request_id)}.jsonl"


def list_log_files(folder: Path) -> list[Path]:
    """Every ``*.jsonl`` entry in ``folder``, newest name first, whatever kind of file it is
    (reading one is :func:`read_log`'s business); a missing folder has none, an unreadable
    one is an :class:`EventLogError`."""
    try:
        with os.scandir(folder) as entries:
            names = [entry.name for entry in entries if entry.name.endswith(".jsonl")]
    except FileNotFoundError:
        return []
    except OSError as error:
        raise EventLogError(
            f"cannot list the logs folder {folder} ({error.strerror or error})",
            fix="check its permissions, or point REACTOME_ANSWERS_LOGS_DIR elsewhere",
        ) from None
    return [folder / name for name in sorted(names, reverse=True)]


def find_request_logs(folder: Path, request_id: str) -> list[Path]:
    """The logs of ``request_id``, matched literally (never as a pattern), oldest first."""
    suffix = f"-{_file_id(request_id)}.jsonl"
    found = [
        path
        for path in reversed(list_log_files(folder))
        if path.name.endswith(suffix) and _LOG_NAME.fullmatch(path.name)
    ]
    if _file_id(request_id) != request_id:  # the name holds a cleaned id: ask the header
        found = [path for path in found if _header_request_id(path) == request_id]
    return found


def _header_request_id(path: Path) -> object:
    try:
        return read_log(path).header.request_id
    except EventLogError:
        return None


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
    (as an :class:`EventLogError`) once the others are done.

    A deleted log's feedback (:mod:`callbacks.feedback`) goes with it, and so does feedback
    whose log is already gone (stored while another process pruned that log); feedback of a
    log that is kept is never touched. Several processes may prune one folder at once (a
    fleet sharing it): a file another deleted first is simply skipped."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    logs: list[tuple[datetime, Path]] = []
    for path in list_log_files(folder):
        match = _LOG_NAME.fullmatch(path.name)
        if match:
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
            info = path.lstat()  # a link is not followed: it, and what it points at, are not ours
            if not stat.S_ISREG(info.st_mode) or info.st_mtime > spare_after:
                continue
            if not dry_run:
                path.unlink()
        except FileNotFoundError:  # another process pruned it first
            continue
        except OSError as error:
            failure = failure or error
            continue
        deleted.append(path)
    if not dry_run:
        for sidecar in [feedback_path(path) for path in deleted] + _orphans(folder, spare_after):
            try:
                if stat.S_ISREG(sidecar.lstat().st_mode):  # as with logs: no link, no folder
                    sidecar.unlink()
            except FileNotFoundError:  # none was given, or another process pruned it first
                continue
            except OSError as error:
                failure = failure or error
    if failure is not None:
        raise EventLogError(
            f"cannot delete {failure.filename} ({failure.strerror or failure})",
            fix="check the permissions of the logs folder",
        )
    return deleted


def _orphans(folder: Path, spare_after: float) -> list[Path]:
    """Feedback files named as we name them whose log is gone, and which were written before
    ``spare_after``: on a shared folder another host may not see a new log at once."""
    try:
        with os.scandir(folder) as entries:
            names = [entry.name for entry in entries if entry.name.endswith(FEEDBACK_SUFFIX)]
    except OSError:  # the logs were listed a moment ago; the next prune looks again
        return []
    found = []
    for name in names:
        log = folder / (name.removesuffix(FEEDBACK_SUFFIX) + ".jsonl")
        if not _LOG_NAME.fullmatch(log.name):
            continue
        try:
            if os.path.lexists(log) or (folder / name).lstat().st_mtime > spare_after:
                continue
        except OSError:
            continue
        found.append(folder / name)
    return found


class EventLog:
    """Writes one request's log; never raises once open (failures are reported once)."""

    def __init__(self, path: Path, header: LogHeader) -> None:
        self.path = path
        self._stream: IO[str] | None = None
        self._failed = False
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._stream = path.open("x", encoding="utf-8")
        except OSError as error:
            self._fail(error)
            return
        # The host beside the process: a fleet sharing one logs folder has the same process
        # ids on several hosts, so a pid alone names no process.
        named = header if header.host else dataclasses.replace(header, host=socket.gethostname())
        self._write({"kind": "header", "schema": LOG_SCHEMA_VERSION, **named.record()})

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
            line.encode("utf-8")  # in C: cheaper than looking for surrogates in every line
        except UnicodeEncodeError:
            # Unescaped, a lone surrogate in any string of the record (or a key) is a
            # character of the line itself, so one pass over the line repairs them all.
            line = without_surrogates(line)
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
    header: LogHeader
    callbacks: list[dict[str, Any]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    source: str = ""  # the file it was read from, for messages
    # The line of the file each callback record and each event was read from, so that what
    # is wrong with one (replaying it, its place in the stream) can name the line to look at.
    callback_lines: list[int] = field(default_factory=list)
    event_lines: list[int] = field(default_factory=list)

    def where_callback(self, index: int) -> str:
        """``file:line`` of the callback record at ``index`` (0-based), for messages."""
        return self._where(self.callback_lines, index, "callback record")

    def where_event(self, index: int) -> str:
        """``file:line`` of the event at ``index`` (0-based), for messages."""
        return self._where(self.event_lines, index, "event")

    def _where(self, lines: list[int], index: int, what: str) -> str:
        source = self.source or "the log"
        if 0 <= index < len(lines):
            return f"{source}:{lines[index]}"
        return f"{source}, {what} {index + 1}"  # contents built without their lines

    @property
    def complete(self) -> bool:
        """Whether the log ends with its ``done`` event; one that does not was cut off (the
        process stopped, or the disk filled, while the answer was running)."""
        return bool(self.events) and isinstance(self.events[-1], DoneEvent)

    def check_complete(self) -> None:
        """Raise :class:`EventLogError` for a log that does not end with ``done``."""
        if not self.complete:
            raise EventLogError(
                f"{self.source or 'the log'} is incomplete: it does not end with a done event "
                "(the answer was cut off, or the process stopped while answering)",
                fix="replay a complete log; 'reactome-answers logs list' marks incomplete ones",
            )


def _decode_lines(raw: bytes) -> list[str]:
    """The lines of a log; bytes that are not UTF-8 (a log altered or damaged on disk) read
    as U+FFFD, so the rest of it can still be shown."""
    lines = [line.removesuffix("\r") for line in raw.decode("utf-8", "replace").split("\n")]
    if lines and not lines[-1]:
        lines.pop()  # the newline that ends the last record
    return lines


# strict=False: a raw control character inside a string (never written by us, but found in
# altered logs) is read, not refused; the CLI shows it escaped. One decoder for every line:
# json.loads with an option builds a new one per call, a fifth of the time reading a log took.
_DECODER = json.JSONDecoder(strict=False)
# How every callback record but a custom event's starts (EventLog writes kind, then hook).
_CUSTOM_EVENT_PREFIX = '{"kind": "callback", "hook": "custom_event"'


def _parse_record(line: str, where: str) -> Any:
    """One line's JSON, every string in it well-formed; an :class:`EventLogError` naming
    ``where`` when it is no JSON we can read."""
    try:
        record = parse_json(line, _DECODER)
    except UnreadableJSONError as error:
        fix = "the log was altered or is corrupt here" if error.kind == "nesting" else (
            "the log is corrupt or truncated here")  # fmt: skip
        raise EventLogError(f"{where} is not JSON ({error.reason})", fix=fix) from None
    if _SURROGATE_ESCAPE.search(line):  # an older version wrote lone surrogates escaped
        record = json.loads(without_surrogates(json.dumps(record, ensure_ascii=False)))
    return record


def _one_line(error: Exception) -> str:
    """What is wrong with an event, in one line (pydantic's own message takes several)."""
    if isinstance(error, ValidationError):
        return validation_line(error, first=3, nothing="event")
    return str(error)


def read_log(path: Path, *, callbacks: bool = True) -> LogContents:
    """Parse a log; a missing, corrupt, truncated or foreign file names the file and line.

    With ``callbacks=False`` only the custom events among the callback records are read (the
    refusal, the expansion, the candidates), the others skipped unparsed: what ``logs
    stats`` needs from many logs, at half the cost. Such contents cannot be replayed."""
    contents: LogContents | None = None
    for number, line in enumerate(_decode_lines(read_regular_file(path)), start=1):
        if (
            not callbacks
            and number > 1
            and line.startswith('{"kind": "callback"')
            and not line.startswith(_CUSTOM_EVENT_PREFIX)
        ):
            continue
        where = f"{path}:{number}"
        record = _parse_record(line, where)
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
            contents = LogContents(header=LogHeader.read(record), source=str(path))
        elif contents is None:  # pragma: no cover - line 1 always sets it
            raise EventLogError(f"{where}: no header")
        elif kind == "callback":
            contents.callbacks.append(record)
            contents.callback_lines.append(number)
        elif kind == "event":
            try:
                contents.events.append(parse_event(record["event"]))
            except Exception as error:
                raise EventLogError(f"{where} holds an invalid event ({_one_line(error)})",
                                    fix="the log was altered or is corrupt") from None  # fmt: skip
            contents.event_lines.append(number)
        else:
            raise EventLogError(
                f"{where} has an unknown kind {kind!r}", fix="give a reactome-answers log"
            )
    if contents is None:
        raise EventLogError(f"{path} is empty", fix="give the path of a .jsonl log")
    return contents
