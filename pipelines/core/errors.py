"""The errors reactome-answers raises on purpose.

Each error says what was wrong and what to do about it, in one line, because the CLI prints
``str(error)`` as its whole message, the HTTP layer returns it as JSON, and the event stream
sends it as an ``error`` event. ``code`` is the stable, machine-readable part; ``http_status``
is what the HTTP layer answers with.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "AnswerTimeoutError",
    "ConfigurationError",
    "DownloadError",
    "EventHandlerError",
    "EventLogError",
    "InputError",
    "ModelError",
    "NotIngestedError",
    "PersonalAdviceError",
    "ReactomeAnswersError",
    "StoreUnavailableError",
]


class ReactomeAnswersError(Exception):
    """Base of every error we raise deliberately; anything else is a bug."""

    code: ClassVar[str] = "internal"
    http_status: ClassVar[int] = 500

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        self.message = message
        self.fix = fix
        super().__init__(message if fix is None else f"{message}; {fix}")

    @staticmethod
    def http_status_for(code: str) -> int:
        """The HTTP status for an error event's ``code``: ours, ``cancelled`` or ``internal``."""
        kinds: list[type[ReactomeAnswersError]] = [ReactomeAnswersError]
        for kind in kinds:  # every subclass, at any depth
            kinds.extend(kind.__subclasses__())
        statuses = {kind.code: kind.http_status for kind in kinds}
        return statuses.get(code, 499 if code == "cancelled" else 500)


class ConfigurationError(ReactomeAnswersError):
    """A setting, environment variable or command-line option has a value we cannot use."""

    code = "bad_config"
    http_status = 500


class InputError(ReactomeAnswersError):
    """The request itself is unusable: empty question, too long, unknown collection."""

    code = "bad_input"
    http_status = 422


class NotIngestedError(ReactomeAnswersError):
    """A collection the question needs has not been ingested into this home folder."""

    code = "not_ingested"
    http_status = 503


class StoreUnavailableError(ReactomeAnswersError):
    """The vector store (a Chroma folder or server) cannot be reached or read."""

    code = "store_unavailable"
    http_status = 503


class ModelError(ReactomeAnswersError):
    """The answer or expander model failed or is not available."""

    code = "model_failed"
    http_status = 502


class AnswerTimeoutError(ReactomeAnswersError):
    """The request ran past its time limit."""

    code = "timeout"
    http_status = 504


class DownloadError(ReactomeAnswersError):
    """A release file or user-guide page could not be fetched."""

    code = "download_failed"
    http_status = 502


class EventHandlerError(ReactomeAnswersError):
    """The callback handler itself failed (a bug in it); the answer ends as failed."""

    code = "handler_failed"
    http_status = 500


class EventLogError(ReactomeAnswersError):
    """An event log cannot be written, or a file given as a log is not one."""

    code = "event_log"
    http_status = 500


class PersonalAdviceError(ReactomeAnswersError):
    """The query expander or the advice gate judged the question a request for personal
    medical advice.

    Raised by the retriever after expansion (or once the question is embedded), before any
    search; the pipeline turns it into a ``refused`` answer (no ``error`` event), so a caller
    of the pipeline never sees it. ``detail`` is what the event log records."""

    code = "personal_advice"
    http_status = 422

    def __init__(
        self, message: str, *, detail: dict[str, object] | None = None, reason: str = "expander"
    ) -> None:
        super().__init__(message)
        self.detail = dict(detail or {})
        # Who judged it: "expander", or "similar_examples" (the advice gate, which the
        # retriever consults once the question is embedded).
        self.reason = reason
