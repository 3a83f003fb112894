"""One event log per request: opened with its header, and the folder pruned now and then."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from datetime import UTC, datetime

from callbacks.log import EventLog, log_file_name, prune_configured_logs
from callbacks.log_header import LogHeader
from pipelines.core.redaction import warn_not_done
from pipelines.core.settings import Settings

__all__ = ["RequestLogs"]

# Listing the folder on every request would cost a busy server; once a minute keeps the
# folder within its limits give or take a minute's worth of logs.
_PRUNE_EVERY_S = 60.0


class RequestLogs:
    """Where a pipeline's requests are logged (``settings.logs_dir``), if logs are on."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._pruned_at: float | None = None
        # What identifies the settings a log was written under, without the home folder or
        # the logs folder: instances answering alike get one digest wherever they log.
        dumped = settings.model_dump(mode="json", exclude={"home", "logs_path"})
        self._digest = hashlib.sha256(json.dumps(dumped, sort_keys=True).encode()).hexdigest()
        self._digest = self._digest[:16]

    def open(self, header: LogHeader) -> EventLog | None:
        """The request's log, its ``header`` written with this pipeline's settings digest,
        this process and the time; ``None`` with logs off. Touches the disk: call it off the
        event loop."""
        if not self.settings.event_logs:
            return None
        now = datetime.now(UTC)
        log = EventLog(
            self.settings.logs_dir / log_file_name(header.request_id, now),
            dataclasses.replace(
                header,
                settings_digest=self._digest,
                # Which process answered: one of `serve --workers N` shares the folder.
                process=os.getpid(),
                created_at=now.isoformat(timespec="milliseconds"),
            ),
        )
        # After opening, so the new log counts as the newest and is never the one pruned; a
        # folder that cannot be written has already been reported once.
        if log.writing:
            self._prune_now_and_then()
        return log

    def _prune_now_and_then(self) -> None:
        now = time.monotonic()
        if self._pruned_at is not None and now - self._pruned_at < _PRUNE_EVERY_S:
            return
        self._pruned_at = now
        try:
            prune_configured_logs(self.settings)
        except Exception as error:  # housekeeping must never fail an answer
            warn_not_done("old event logs not pruned", error)
