"""The pipeline's settings in one typed object, read from the environment and overridable by
callers.

Precedence, highest first: keyword overrides (what the CLI passes from its options), then
environment variables (``REACTOME_ANSWERS_*``, plus ``CHROMA_HOST``/``CHROMA_PORT`` as Chroma's
own tools spell them), then the defaults below, which run offline with no API key.

:class:`ReactomeSettings` is what every settings object of the program shares: the prefix,
how values are read, and :func:`load_config`, which refuses a ``REACTOME_ANSWERS_*`` variable
that no settings class defined in the process reads (the HTTP server's own, limits and keys,
are ``app.http.settings.ServerSettings``: the pipeline carries only what it uses).
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import AliasChoices, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipelines.core.errors import ConfigurationError
from pipelines.core.validation import validation_problems

__all__ = [
    "ENV_PREFIX",
    "ReactomeSettings",
    "Settings",
    "default_home",
    "env_var_for",
    "load_config",
    "load_settings",
]

ENV_PREFIX = "REACTOME_ANSWERS_"

_LLM_FORMS = "'extractive', 'llamacpp' or 'llamacpp:PATH.gguf', or 'openai:MODEL'"
_LLM_RE = re.compile(r"extractive|llamacpp(?::.+)?|openai:[^\s:][^\s]*")
_EMBEDDINGS_FORMS = (
    "'all-MiniLM-L6-v2-q8' (offline, int8), 'all-MiniLM-L6-v2' (offline) or 'openai:MODEL'"
)
_JUDGE_FORMS = "'offline' (embeddings and rare words) or 'openai:MODEL' (a model grades each pair)"
_JUDGE_RE = re.compile(r"offline|openai:[^\s:][^\s]*")
_EMBEDDINGS_RE = re.compile(r"all-MiniLM-L6-v2(-q8)?|openai:[^\s:][^\s]*")


def _one_of(value: str, forms: re.Pattern[str], what: str, described: str) -> str:
    """``value`` stripped, when it is one of ``forms``; otherwise an error naming them."""
    value = value.strip()
    if not forms.fullmatch(value):
        raise ValueError(f"{value!r} is not {what}; use {described}")
    return value


def default_home() -> Path:
    """``$XDG_DATA_HOME/reactome-answers``, falling back to ``~/.local/share/reactome-answers``."""
    data_home = Path(os.environ.get("XDG_DATA_HOME") or "")
    if not data_home.is_absolute():  # the XDG spec says to ignore a relative value
        data_home = Path.home() / ".local" / "share"
    return data_home / "reactome-answers"


class ReactomeSettings(BaseSettings):
    """What every settings class of the program shares; a subclass's variables are known to
    :func:`load_config` from the moment it is defined."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        # An empty variable means "not set", never "the current folder" or "no host".
        env_ignore_empty=True,
        allow_inf_nan=False,
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        validate_default=True,
    )


class Settings(ReactomeSettings):
    """The settings of one pipeline; construct through :func:`load_settings` for clear errors."""

    home: Path = Field(
        default_factory=default_home,
        description="folder holding the Chroma store, the keyword index and the event logs",
    )
    llm: str = Field(default="extractive", description=f"answer and expander model: {_LLM_FORMS}")
    embeddings: str = Field(
        default="all-MiniLM-L6-v2-q8", description=f"embedding model: {_EMBEDDINGS_FORMS}"
    )
    multilingual: bool = Field(
        default=True,
        description="with the English-only offline embeddings, also embed each chunk with "
        "multilingual-e5-small so a question in another language finds its sources "
        "(decision 0037); off: such questions are searched as English ones",
    )
    translation: bool = Field(
        default=True,
        description="with multilingual on, also search a Spanish, French, Italian or "
        "Portuguese question by Apertium's English where Debian's pairs are installed "
        "(decision 0037; their programs hold about 320 MB per serving process once all four "
        "languages are asked); off: by multilingual-e5-small alone",
    )
    model_cache: Path | None = Field(
        default=None,
        description="folder for the model derived at first use; unset means <home>/models",
    )
    cite_urls: bool = Field(
        default=False, description="cite user-guide pages by url (off: they are uncited context)"
    )
    collections_path: str = Field(
        default="",
        description="more collections: folders (separated by ':') holding "
        "<name>/collection.toml, beside the bundled ones",
    )
    chroma_host: str | None = Field(
        default=None,
        validation_alias=AliasChoices("chroma_host", "CHROMA_HOST", f"{ENV_PREFIX}CHROMA_HOST"),
        description="Chroma server host; unset means an embedded store under the home folder",
    )
    chroma_port: int = Field(
        default=8000,
        ge=1,
        le=65535,
        validation_alias=AliasChoices("chroma_port", "CHROMA_PORT", f"{ENV_PREFIX}CHROMA_PORT"),
    )
    max_question_chars: int = Field(default=2000, ge=1, description="longer questions are refused")
    event_logs: bool = Field(default=True, description="write one JSONL event log per request")
    logs_path: Path | None = Field(
        default=None,
        validation_alias=AliasChoices("logs_path", f"{ENV_PREFIX}LOGS_DIR"),
        description="folder of the event logs and their feedback, which several instances "
        "may share; unset means <home>/logs",
    )
    log_retention_days: float = Field(
        default=30.0,
        ge=0,
        le=36_500,
        description="event logs older than this are deleted (0: kept)",
    )
    log_retention_count: int = Field(
        default=1000, ge=0, description="at most this many event logs are kept (0: no cap)"
    )
    max_sources: int = Field(default=10, ge=1, le=100, description="cap on numbered sources")
    evidence: Literal["flag", "drop", "off"] = Field(
        default="flag",
        description="an unsupported citation is 'flag'ged (kept, marked supported: false), its "
        "marker 'drop'ped before the finalizer, or not checked at all ('off')",
    )
    evidence_judge: str = Field(
        default="offline",
        description=f"who judges the evidence: {_JUDGE_FORMS}",
    )
    evidence_threshold: float = Field(
        default=0.58,
        ge=0,
        le=1,
        description="the offline judge's score at which a quote supports its sentence",
    )
    trace_content: bool = Field(
        default=False,
        description="with tracing on (OTEL_EXPORTER_OTLP_ENDPOINT), also put the model's "
        "messages, the answer and the retrieved passages' text in the spans; off: ids, scores, "
        "names and counts only, as the conventions advise",
    )
    trace_url: str | None = Field(
        default=None,
        description="a trace's page in your tracing backend, with {trace_id} where its id "
        "goes (http://phoenix:6006/redirects/traces/{trace_id}): the log page and 'logs show' "
        "link to it",
    )
    model_timeout_s: float = Field(default=60.0, gt=0, description="limit on one model call")
    request_timeout_s: float = Field(default=120.0, gt=0, description="limit on one whole answer")

    @field_validator("llm")
    @classmethod
    def _check_llm(cls, value: str) -> str:
        return _one_of(value, _LLM_RE, "a model choice", _LLM_FORMS)

    @field_validator("evidence_judge")
    @classmethod
    def _check_judge(cls, value: str) -> str:
        return _one_of(value, _JUDGE_RE, "a judge", _JUDGE_FORMS)

    @field_validator("trace_url")
    @classmethod
    def _check_trace_url(cls, value: str | None) -> str | None:
        if value is not None and "{trace_id}" not in value:
            raise ValueError(
                f"{value[:80]!r} has no {{trace_id}}; put it where the trace's id goes"
            )
        return value

    @field_validator("embeddings")
    @classmethod
    def _check_embeddings(cls, value: str) -> str:
        return _one_of(value, _EMBEDDINGS_RE, "an embedding model", _EMBEDDINGS_FORMS)

    @field_validator("home", "model_cache", "logs_path", mode="before")
    @classmethod
    def _expand_home(cls, value: object) -> object:
        if isinstance(value, str | Path) and not str(value).strip():
            raise ValueError("is empty; give a folder")
        try:
            return Path(value).expanduser() if isinstance(value, str | Path) else value
        except RuntimeError as error:  # "~someone" for a user that does not exist
            raise ValueError(f"{value!s} cannot be expanded ({error})") from None

    @property
    def chroma_path(self) -> Path:
        return self.home / "chroma"

    @property
    def model_cache_path(self) -> Path:
        return self.model_cache or self.home / "models"

    @property
    def logs_dir(self) -> Path:
        return self.logs_path or self.home / "logs"

    @property
    def uses_chroma_server(self) -> bool:
        return self.chroma_host is not None


_Config = TypeVar("_Config", bound=ReactomeSettings)


def env_var_for(field: str, kind: type[ReactomeSettings] = Settings) -> str:
    """The environment variable a setting of ``kind`` is read from (the first one, when
    several are)."""
    alias = kind.model_fields[field].validation_alias
    if isinstance(alias, AliasChoices):
        for choice in alias.choices:
            if isinstance(choice, str) and choice.isupper():
                return choice
    return f"{ENV_PREFIX}{field.upper()}"


def _settings_classes() -> list[type[ReactomeSettings]]:
    """Every settings class defined so far, :class:`Settings` first."""
    found: list[type[ReactomeSettings]] = []
    waiting: list[type[ReactomeSettings]] = [Settings, *ReactomeSettings.__subclasses__()]
    while waiting:
        kind = waiting.pop(0)
        if kind not in found:
            found.append(kind)
            waiting.extend(kind.__subclasses__())
    return found


def _known_variables() -> set[str]:
    names = set()
    fields = [item for kind in _settings_classes() for item in kind.model_fields.items()]
    for field, info in fields:
        names.add(f"{ENV_PREFIX}{field.upper()}")
        if isinstance(info.validation_alias, AliasChoices):
            names.update(
                c for c in info.validation_alias.choices if isinstance(c, str) and c.isupper()
            )
    return names


def _variable_set_for(field: str, kind: type[ReactomeSettings]) -> str:
    """The variable that actually supplied ``field``, for messages."""
    alias = kind.model_fields[field].validation_alias
    choices = (
        [c for c in alias.choices if isinstance(c, str)] if isinstance(alias, AliasChoices) else []
    )
    candidates = [name for name in choices if name.isupper()] + [f"{ENV_PREFIX}{field.upper()}"]
    return next((name for name in candidates if os.environ.get(name)), env_var_for(field, kind))


def load_settings(**overrides: Any) -> Settings:
    """Build the pipeline's settings; ``None`` overrides are ignored so unset CLI options
    fall through.

    Raises :class:`ConfigurationError` naming the variable or option and how to fix it,
    including for a ``REACTOME_ANSWERS_*`` variable we do not know (a typo would otherwise
    be ignored in silence).
    """
    return load_config(Settings, **overrides)


def load_config(kind: type[_Config], **overrides: Any) -> _Config:
    """:func:`load_settings` for any settings class: ``kind`` from the environment and
    ``overrides``, with the same checks and messages."""
    given = {name: value for name, value in overrides.items() if value is not None}
    unknown = sorted(set(given) - set(kind.model_fields))
    if unknown:
        raise ConfigurationError(
            f"unknown setting(s) {', '.join(unknown)}",
            fix=f"known settings are {', '.join(kind.model_fields)}",
        )
    known = _known_variables()
    stray = sorted(name for name in os.environ if name.startswith(ENV_PREFIX) and name not in known)
    if stray:
        problem = ConfigurationError(
            f"unknown environment variable(s) {', '.join(stray)}",
            fix=f"unset them; known variables are {', '.join(sorted(known))}",
        )
        if len(_settings_classes()) == 1:
            # A program that uses the pipeline alone cannot tell a typo from a variable
            # meant for the server (whose settings are app's): it is told, not stopped. The
            # commands and the server know every settings class, and refuse.
            warnings.warn(str(problem), stacklevel=3)
        else:
            raise problem
    try:
        return kind(**given)
    except ValidationError as error:
        location, reason = validation_problems(error)[0]
        field = location[0] if location else ""
        field = next(
            (name for name in kind.model_fields if env_var_for(name, kind) == field), field
        )
        source = "option" if field in given else "environment variable"
        where = f"--{field.replace('_', '-')}" if field in given else _variable_set_for(field, kind)
        raise ConfigurationError(
            f"{source} {where} has an unusable value: {reason}",
            fix=f"set {where} to a valid value or unset it to use the default",
        ) from None
