"""The LangChain side of reactome-answers: settings, errors and the citation finalizer."""

from pipelines.citations.finalize import (
    cited_numbers,
    finalize_citations,
    strip_out_of_range_markers,
)
from pipelines.core.errors import (
    ConfigurationError,
    DownloadError,
    ErrorCode,
    EventHandlerError,
    EventLogError,
    InputError,
    ModelError,
    NotIngestedError,
    PersonalAdviceError,
    ReactomeAnswersError,
    StoreUnavailableError,
)
from pipelines.core.settings import Settings, load_settings

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
    "Settings",
    "StoreUnavailableError",
    "cited_numbers",
    "finalize_citations",
    "load_settings",
    "strip_out_of_range_markers",
]
