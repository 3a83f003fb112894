"""The errors reactome-answers raises on purpose, and every code an ``error`` event carries.

Each error says what was wrong and what to do about it, in one line, because the CLI prints
``str(error)`` as its whole message, the HTTP layer returns it as JSON, and the event stream
sends it as an ``error`` event. ``code`` is the stable, machine-readable part (the HTTP layer
maps it to a status: ``app/http/errors.py``).

    ReactomeAnswersError          internal        anything we raise deliberately
    ├── ConfigurationError        bad_config      a setting or option we cannot use
    ├── InputError                bad_input       the request itself is unusable
    ├── NotIngestedError          not_ingested    a needed collection is not ingested
    ├── StoreUnavailableError     store_unavailable  Chroma cannot be reached or read
    ├── ModelError                model_failed    the answer or expander model failed
    ├── DownloadError             download_failed a release file could not be fetched
    ├── EventHandlerError         handler_failed  a bug in the callback handler
    ├── EventLogError             event_log       a log cannot be written or read
    └── PersonalAdviceError       personal_advice a request for personal medical advice
                                                  (becomes a refusal, never an error event)

Two codes belong to no exception: ``timeout`` (the request ran past its time limit) and
``cancelled`` (the caller left, or the request was cancelled); :class:`ErrorCode` lists all.
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar

__all__ = [
    "ConfigurationError",
    "DownloadError",
    "ErrorCode",
    "EventHandlerError",
    "EventLogError",
    "InputError",
    "ModelError",
    "NotIngestedError",
    "PersonalAdviceError",
    "ReactomeAnswersError",
    "StoreUnavailableError",
]


class ErrorCode(StrEnum):
    """Every ``code`` an ``error`` event or an error body can carry."""

    INTERNAL = "internal"
    BAD_CONFIG = "bad_config"
    BAD_INPUT = "bad_input"
    NOT_INGESTED = "not_ingested"
    STORE_UNAVAILABLE = "store_unavailable"
    MODEL_FAILED = "model_failed"
    DOWNLOAD_FAILED = "download_failed"
    HANDLER_FAILED = "handler_failed"
    EVENT_LOG = "event_log"
    PERSONAL_ADVICE = "personal_advice"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"


class ReactomeAnswersError(Exception):
    """Base of every error we raise deliberately; anything else is a bug."""

    code: ClassVar[ErrorCode] = ErrorCode.INTERNAL

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        self.message = message
        self.fix = fix
        super().__init__(message if fix is None else f"{message}; {fix}")


class ConfigurationError(ReactomeAnswersError):
    """A setting, environment variable or command-line option has a value we cannot use."""

    code = ErrorCode.BAD_CONFIG


class InputError(ReactomeAnswersError):
    """The request itself is unusable: empty question, too long, unknown collection."""

    code = ErrorCode.BAD_INPUT


class NotIngestedError(ReactomeAnswersError):
    """A collection the question needs has not been ingested into this home folder."""

    code = ErrorCode.NOT_INGESTED


class StoreUnavailableError(ReactomeAnswersError):
    """The vector store (a Chroma folder or server) cannot be reached or read."""

    code = ErrorCode.STORE_UNAVAILABLE


class ModelError(ReactomeAnswersError):
    """The answer or expander model failed or is not available."""

    code = ErrorCode.MODEL_FAILED


class DownloadError(ReactomeAnswersError):
    """A release file or user-guide page could not be fetched."""

    code = ErrorCode.DOWNLOAD_FAILED


class EventHandlerError(ReactomeAnswersError):
    """The callback handler itself failed (a bug in it); the answer ends as failed."""

    code = ErrorCode.HANDLER_FAILED


class EventLogError(ReactomeAnswersError):
    """An event log cannot be written, or a file given as a log is not one."""

    code = ErrorCode.EVENT_LOG


class PersonalAdviceError(ReactomeAnswersError):
    """The query expander or the advice gate judged the question a request for personal
    medical advice.

    Raised by the retriever after expansion (or once the question is embedded), before any
    search; the pipeline turns it into a ``refused`` answer (no ``error`` event), so a caller
    of the pipeline never sees it. ``detail`` is what the event log records."""

    code = ErrorCode.PERSONAL_ADVICE

    def __init__(
        self, message: str, *, detail: dict[str, object] | None = None, reason: str = "expander"
    ) -> None:
        super().__init__(message)
        self.detail = dict(detail or {})
        # Who judged it: "expander", or "similar_examples" (the advice gate, which the
        # retriever consults once the question is embedded).
        self.reason = reason
