"""Finding the event logs a test's answers wrote."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from callbacks.events import DoneEvent
from callbacks.handler import AnswerEventHandler
from callbacks.log import EventLog, LogContents, list_log_files, log_file_name, read_log
from callbacks.log_header import LogHeader

if TYPE_CHECKING:
    from pipelines.pipeline import AnswerPipeline

__all__ = ["answered_with_log", "logs_asking", "refused_log"]


def logs_asking(home: Path, question: str) -> list[LogContents]:
    """The logs in ``home``'s logs folder of the answers to ``question``, newest first; a log
    that cannot be read yet (being written right now) is left out."""
    found = []
    for path in list_log_files(home / "logs"):
        try:
            contents = read_log(path)
        except Exception:
            continue
        if contents.header.question == question:
            found.append(contents)
    return found


def answered_with_log(
    pipeline: AnswerPipeline, question: str, home: Path
) -> tuple[DoneEvent, LogContents]:
    """Ask ``question``; its ``done`` (which must be an answer) and the log it wrote in
    ``home``."""
    done = list(pipeline.stream(question))[-1]
    assert isinstance(done, DoneEvent)
    assert done.data.state == "answered", done.data
    path = next(p for p in list_log_files(home / "logs") if done.request_id in p.name)
    return done, read_log(path)


def refused_log(folder: Path, header: LogHeader) -> Path:
    """A refused answer's log in ``folder``, written as a request writes one (no store or
    model): ``header``, the start, the refusal and its done."""
    path = folder / log_file_name(header.request_id, datetime.now(UTC))
    log = EventLog(path, header)
    handler = AnswerEventHandler(
        request_id=header.request_id, emit=log.event, record=log.callback, raise_error=True
    )
    handler.start(header.question or "", list(header.collections), {})
    handler.finish("refused", text="I cannot advise on your own care.")
    log.close()
    return path
