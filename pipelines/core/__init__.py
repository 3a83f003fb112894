"""The basics every subsystem stands on: errors, settings, redaction, identifiers, the
question normalizer, token counting, the run tags and the OpenAI-compatible key; and the small
rules each kept in one home: lone surrogates (``text``), JSON from outside (``json_text``),
a validation error in one line (``validation``).

Nothing here imports another subsystem but `pipelines.language` (a request's language is
checked where its options are).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
from pipelines.core.identifiers import (
    HTTP_URL_PATTERN,
    SITE_PATH_PATTERN,
    ST_ID_PATTERN,
    st_id_problem,
    url_problem,
)
from pipelines.core.json_text import UnreadableJSONError, parse_json
from pipelines.core.lazy import lazy_attributes
from pipelines.core.normalize import normalize_question
from pipelines.core.openai_key import KEYLESS, openai_api_key
from pipelines.core.redaction import one_line, redact_also, redact_secrets, warn_not_done
from pipelines.core.settings import ENV_PREFIX, Settings, default_home, env_var_for, load_settings
from pipelines.core.tags import (
    ANSWER_TAG,
    EXPANDER_TAG,
    EXPANSION_RECORD,
    REFUSAL_EVENT,
    RETRIEVAL_RECORD,
    RETRIEVAL_TAG,
)
from pipelines.core.text import without_surrogates
from pipelines.core.tokens import ENCODING_NAME, count_tokens
from pipelines.core.validation import validation_line, validation_problems

if TYPE_CHECKING:
    from pipelines.core.composed_chat import ComposedChatModel

__all__ = [
    "ANSWER_TAG",
    "ENCODING_NAME",
    "ENV_PREFIX",
    "EXPANDER_TAG",
    "EXPANSION_RECORD",
    "HTTP_URL_PATTERN",
    "KEYLESS",
    "REFUSAL_EVENT",
    "RETRIEVAL_RECORD",
    "RETRIEVAL_TAG",
    "SITE_PATH_PATTERN",
    "ST_ID_PATTERN",
    "ComposedChatModel",
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
    "UnreadableJSONError",
    "count_tokens",
    "default_home",
    "env_var_for",
    "load_settings",
    "normalize_question",
    "one_line",
    "openai_api_key",
    "parse_json",
    "redact_also",
    "redact_secrets",
    "st_id_problem",
    "url_problem",
    "validation_line",
    "validation_problems",
    "warn_not_done",
    "without_surrogates",
]


# The chat-model base imports LangChain's language models (about 0.1 s): only the models need
# it, so the command line does not pay for it at start.
__getattr__ = lazy_attributes(__name__, {"ComposedChatModel": "pipelines.core.composed_chat"})
