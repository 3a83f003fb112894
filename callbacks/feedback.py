"""A user's rating of one answer, kept in a sidecar file beside the answer's event log.

For ``<stamp>-<id>.jsonl`` the feedback is ``<stamp>-<id>.feedback.json``: one JSON object
``{"request_id", "rating": "up" | "down", "comment": str | null, "at": ISO time}``. The log
itself is never touched, so it stays exactly what the handler wrote and ``replay --check``
still passes; a later rating replaces the earlier one whole. The file is written to a
temporary name in the same folder and renamed over the old one, so that two writers (two
instances sharing one logs folder) leave one complete rating, never a mixture or half a file.

The comment carries no secret: it is redacted as a question is.

:func:`rate_answer` reads the rating it replaces and writes the new one as one step for every
process sharing the folder (an exclusive lock on the folder's :data:`FEEDBACK_LOCK`), so that
each rating replaces exactly the one before it and a count of changes adds up.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, get_args

from callbacks._files import read_regular_file
from pipelines.core.errors import EventLogError, InputError
from pipelines.core.json_text import UnreadableJSONError, parse_json
from pipelines.core.redaction import redact_secrets
from pipelines.core.text import without_surrogates

__all__ = [
    "FEEDBACK_LOCK",
    "FEEDBACK_SUFFIX",
    "MAX_COMMENT_CHARS",
    "RATINGS",
    "Rating",
    "clean_comment",
    "feedback_path",
    "rate_answer",
    "read_feedback",
    "write_feedback",
]

Rating = Literal["up", "down"]
RATINGS: tuple[str, ...] = get_args(Rating)
# As long as the longest question: room for a sentence or two on what was wrong.
MAX_COMMENT_CHARS = 2000
FEEDBACK_SUFFIX = ".feedback.json"
# One per logs folder, never renamed or deleted (a lock on a file that a rename replaces
# would guard nothing). Hidden and not named *.jsonl: no reader takes it for a log.
FEEDBACK_LOCK = ".feedback.lock"
# A sidecar is a few kilobytes at most; anything larger is not ours and is not read.
_MAX_SIDECAR_BYTES = 64 * 1024


def feedback_path(log_path: Path) -> Path:
    """The sidecar of ``log_path``: the same name with ``.feedback.json`` for ``.jsonl``."""
    return log_path.with_name(log_path.name.removesuffix(".jsonl") + FEEDBACK_SUFFIX)


def read_feedback(log_path: Path) -> dict[str, Any] | None:
    """The feedback stored for the log at ``log_path``, or None when there is none, or the
    sidecar cannot be read or is not feedback we wrote (a reader of logs must not fail on
    a damaged sidecar: the log is what matters)."""
    try:
        # Never blocks: a FIFO or a device named like a sidecar is not read.
        raw = read_regular_file(feedback_path(log_path), _MAX_SIDECAR_BYTES)
    except EventLogError:
        return None
    try:
        record = parse_json(raw.decode("utf-8", "replace"))
    except UnreadableJSONError:
        return None
    if not isinstance(record, dict) or record.get("rating") not in RATINGS:
        return None
    comment = record.get("comment")
    return {
        "request_id": str(record.get("request_id", "")),
        "rating": record["rating"],
        "comment": comment if isinstance(comment, str) else None,
        "at": str(record.get("at", "")),
    }


def clean_comment(comment: str | None) -> str | None:
    """``comment`` redacted, None when it is blank; an :class:`InputError` when it is over
    :data:`MAX_COMMENT_CHARS` (measured as sent, before redaction)."""
    if comment is None or not comment.strip():
        return None
    if len(comment) > MAX_COMMENT_CHARS:
        raise InputError(
            f"the comment is {len(comment):,} characters, over the {MAX_COMMENT_CHARS:,} allowed",
            fix=f"shorten it to at most {MAX_COMMENT_CHARS:,} characters",
        )
    # A lone surrogate (sent as the JSON escape \\ud800) is stored as U+FFFD, as logs do.
    return without_surrogates(redact_secrets(comment.strip()))


def write_feedback(
    log_path: Path,
    request_id: str,
    rating: str,
    comment: str | None,
    *,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Store ``rating`` (and the redacted ``comment``) for the answer logged at ``log_path``,
    replacing any earlier feedback; returns what was stored. A bad rating or comment is an
    :class:`InputError`, a folder that cannot be written an :class:`EventLogError`."""
    if rating not in RATINGS:
        raise InputError(f"the rating {rating!r} is neither 'up' nor 'down'",
                         fix="send 'up' or 'down'")  # fmt: skip
    record: dict[str, Any] = {
        "request_id": request_id,
        "rating": rating,
        "comment": clean_comment(comment),
        "at": (now or datetime.now(UTC)).astimezone(UTC).isoformat(timespec="milliseconds"),
    }
    target = feedback_path(log_path)
    data = json.dumps(record, ensure_ascii=False).encode("utf-8")
    temporary: Path | None = None
    try:
        # Hidden and not named *.jsonl: no reader of the folder takes it for a log.
        descriptor, name = tempfile.mkstemp(
            dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
        )
        temporary = Path(name)
        with os.fdopen(descriptor, "wb") as stream:
            # mkstemp makes the file private (0600); readable as its log is, so every
            # account that reads a shared logs folder sees the rating too.
            os.fchmod(stream.fileno(), stat.S_IMODE(log_path.stat().st_mode) & 0o666)
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        temporary.replace(target)  # atomic: a reader sees the old rating or the new
        temporary = None
    except OSError as error:
        raise EventLogError(
            # No path: the message reaches the HTTP client.
            f"cannot store this answer's feedback ({error.strerror or error})",
            fix="check that the logs folder is writable",
        ) from None
    finally:
        if temporary is not None:
            with contextlib.suppress(OSError):
                temporary.unlink()
    return record


def rate_answer(
    log_path: Path,
    request_id: str,
    rating: str,
    comment: str | None,
    *,
    now: datetime | None = None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """:func:`write_feedback`, and the feedback it replaced (None: none), read and written
    while holding the folder's lock: two ratings of one answer, sent to two workers or two
    instances at once, never both replace the same earlier one. Errors as
    :func:`write_feedback`'s."""
    with _feedback_lock(log_path.parent):
        earlier = read_feedback(log_path)
        return write_feedback(log_path, request_id, rating, comment, now=now), earlier


@contextlib.contextmanager
def _feedback_lock(folder: Path) -> Iterator[None]:
    """The folder's feedback lock, held until the block ends (or the process dies). A
    rating is a read and a write of a small file: every writer of a fleet waits its turn on
    one lock rather than each log having a lock file that pruning would have to follow."""
    try:
        # Not followed if a link, not waited on if a FIFO; read-write, since over NFS an
        # exclusive lock needs a descriptor open for writing.
        descriptor = os.open(
            folder / FEEDBACK_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666
        )
    except OSError as error:
        raise EventLogError(
            f"cannot store this answer's feedback ({error.strerror or error})",
            fix="check that the logs folder is writable",
        ) from None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise EventLogError(
                "cannot store this answer's feedback (its lock is not a regular file)",
                fix=f"remove {FEEDBACK_LOCK} from the logs folder",
            )
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # gives the lock back
