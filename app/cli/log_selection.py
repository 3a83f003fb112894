"""Which logs a command reads: one named by path, file name or request id
(:func:`find_log`), or many selected by ``--last``, ``--since`` and ``--state``
(:func:`add_selection_arguments`, :func:`selected_log_paths`)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from callbacks.log import find_request_logs, list_log_files
from pipelines.core.errors import EventLogError
from pipelines.core.settings import Settings

__all__ = ["STATES", "add_selection_arguments", "find_log", "selected_log_paths"]

STATES = ("answered", "nothing_found", "refused", "failed", "incomplete")


def add_selection_arguments(parser: argparse.ArgumentParser) -> None:
    """--last, --since and --state: which logs an action over many reads (all by default)."""
    parser.add_argument("--last", type=_positive_int, metavar="N", help="only the newest N logs")
    parser.add_argument(
        "--since",
        type=_date_or_time,
        metavar="DATE",
        help="only logs written at or after DATE (2026-12-03 or 2026-12-03T14:00, UTC)",
    )
    parser.add_argument("--state", choices=STATES, help="only answers that ended in this state")


def selected_log_paths(args: argparse.Namespace, folder: Path) -> list[Path]:
    """The logs in ``folder`` that --since and --last select, newest first (--state needs
    each log read: the caller filters by it)."""
    paths = list_log_files(folder)  # newest first: names start with the time
    if args.since is not None:
        stamp = args.since.strftime("%Y%m%dT%H%M%S")
        paths = [path for path in paths if path.name[: len(stamp)] >= stamp]
    if args.last is not None:
        paths = paths[: args.last]
    return paths


def find_log(settings: Settings, log: str) -> Path:
    """A log by path, by the file name ``logs list`` prints, or by request id; all taken
    literally, never as a pattern."""
    candidates = [Path(log)]
    if Path(log).name == log and log not in ("", ".", ".."):
        candidates.append(settings.logs_dir / log)
    for candidate in candidates:
        try:
            if candidate.exists():
                return candidate  # whether it is a log at all is read_log's to say
        except OSError:  # a name too long for the system cannot name a file either
            continue
    matches = find_request_logs(settings.logs_dir, log)
    if not matches:
        shown = log if len(log) <= 80 else log[:79] + "…"
        raise EventLogError(
            f"no log file {shown!r} and no request {shown!r} in {settings.logs_dir}",
            fix="see 'reactome-answers logs list'",
        )
    return matches[-1]


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of 1 or more")
    return number


def _date_or_time(value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a date or time like 2026-12-03 or 2026-12-03T14:00"
        ) from None
    return moment if moment.tzinfo is None else moment.astimezone(UTC).replace(tzinfo=None)
