"""The LangChain side of reactome-answers: settings, errors and the citation finalizer."""

from pipelines.citations import cited_numbers, finalize_citations, strip_out_of_range_markers
from pipelines.errors import (
    AnswerTimeoutError,
    ConfigurationError,
    DownloadError,
    EventHandlerError,
    EventLogError,
    InputError,
    ModelError,
    NotIngestedError,
    PersonalAdviceError,
    ReactomeAnswersError,
    StoreUnavailableError,
)
from pipelines.settings import Settings, load_settings

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
    "Settings",
    "StoreUnavailableError",
    "cited_numbers",
    "finalize_citations",
    "load_settings",
    "strip_out_of_range_markers",
]
