"""Finding the event logs a test's answers wrote."""

from __future__ import annotations

from pathlib import Path

from callbacks.log import LogContents, list_log_files, read_log

__all__ = ["logs_asking"]


def logs_asking(home: Path, question: str) -> list[LogContents]:
    """The logs in ``home``'s logs folder of the answers to ``question``, newest first; a log
    that cannot be read yet (being written right now) is left out."""
    found = []
    for path in list_log_files(home / "logs"):
        try:
            contents = read_log(path)
        except Exception:
            continue
        if contents.header.get("question") == question:
            found.append(contents)
    return found
