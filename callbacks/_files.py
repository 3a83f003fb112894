"""Reading a file of the logs folder without trusting what it is."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pipelines.core.errors import EventLogError

__all__ = ["MAX_LOG_BYTES", "read_regular_file"]

# A log larger than this is not read (a runaway or foreign file must not exhaust memory); an
# answer of 100,000 tokens writes about 30 MB.
MAX_LOG_BYTES = 64 * 1024 * 1024


def read_regular_file(path: Path, max_bytes: int = MAX_LOG_BYTES) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``max_bytes``: a FIFO would
    block, a device never end, a link loop or a folder fail further down. Anything else is
    an :class:`EventLogError`."""
    try:
        # Non-blocking, so that opening a FIFO returns at once instead of waiting for a writer.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise EventLogError(
            f"cannot read {path} ({error.strerror or error})", fix="give the path of a .jsonl log"
        ) from None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise EventLogError(
                f"{path} is not a regular file", fix="give the path of a .jsonl log"
            )
        with os.fdopen(descriptor, "rb", closefd=False) as stream:
            raw = stream.read(max_bytes + 1)
    finally:
        os.close(descriptor)
    if len(raw) > max_bytes:
        raise EventLogError(
            f"{path} is over {max_bytes:,} bytes, more than any log holds",
            fix="give the path of a .jsonl log",
        )
    return raw
