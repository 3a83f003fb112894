"""Every setting in one typed object, read from the environment and overridable by callers.

Precedence, highest first: keyword overrides (what the CLI passes from its options), then
environment variables (``REACTOME_ANSWERS_*``, plus ``CHROMA_HOST``/``CHROMA_PORT`` as Chroma's
own tools spell them), then the defaults below, which run offline with no API key.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipelines.core.errors import ConfigurationError

__all__ = ["ENV_PREFIX", "Settings", "default_home", "env_var_for", "load_settings"]

ENV_PREFIX = "REACTOME_ANSWERS_"

_LLM_FORMS = "'extractive', 'llamacpp' or 'llamacpp:PATH.gguf', or 'openai:MODEL'"
_LLM_RE = re.compile(r"extractive|llamacpp(?::.+)?|openai:[^\s:][^\s]*")
_EMBEDDINGS_FORMS = (
    "'all-MiniLM-L6-v2-q8' (offline, int8), 'all-MiniLM-L6-v2' (offline) or 'openai:MODEL'"
)
_EMBEDDINGS_RE = re.compile(r"all-MiniLM-L6-v2(-q8)?|openai:[^\s:][^\s]*")


def default_home() -> Path:
    """``$XDG_DATA_HOME/reactome-answers``, falling back to ``~/.local/share/reactome-answers``."""
    data_home = Path(os.environ.get("XDG_DATA_HOME") or "")
    if not data_home.is_absolute():  # the XDG spec says to ignore a relative value
        data_home = Path.home() / ".local" / "share"
    return data_home / "reactome-answers"


class Settings(BaseSettings):
    """The settings of one pipeline; construct through :func:`load_settings` for clear errors."""

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

    home: Path = Field(
        default_factory=default_home,
        description="folder holding the Chroma store, the keyword index and the event logs",
    )
    llm: str = Field(default="extractive", description=f"answer and expander model: {_LLM_FORMS}")
    embeddings: str = Field(
        default="all-MiniLM-L6-v2-q8", description=f"embedding model: {_EMBEDDINGS_FORMS}"
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
    max_body_bytes: int = Field(default=65_536, ge=1024, description="larger HTTP bodies get 413")
    header_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=3600,
        description="a connection whose request headers take longer to arrive is closed",
    )
    body_timeout_s: float = Field(
        default=30.0, gt=0, le=3600, description="a request body that takes longer gets 408"
    )
    keep_alive_s: int = Field(
        default=5, ge=1, le=3600, description="an idle kept-alive connection is closed after this"
    )
    max_connections: int = Field(
        default=1000, ge=1, description="connections over this many are refused with 503"
    )
    cors_origins: str = Field(default="", description="comma-separated origins allowed by CORS")
    api_keys: SecretStr | None = Field(
        default=None,
        description="keys a client must send as 'Authorization: Bearer KEY' (comma separated, "
        "or @FILE with one per line); unset: no key needed",
    )
    max_concurrent_answers: int = Field(
        default=0,
        ge=0,
        description="answers in progress at once per server; one more gets 429 at once (0: no cap)",
    )
    rate_limit: int = Field(
        default=0,
        ge=0,
        description="requests per minute per API key, or per client address without keys; "
        "beyond it 429 (0: no limit)",
    )
    auth_failures_per_minute: int = Field(
        default=30,
        ge=1,
        description="wrong or missing API keys per minute from one client address; beyond "
        "it 429 until the minute refills (only with API keys)",
    )
    forwarded_allow_ips: str = Field(
        default="",
        description="comma-separated addresses of proxies whose X-Forwarded-For and "
        "X-Forwarded-Proto are believed (the client address then comes from them); empty: "
        "none, so no client can choose its own address",
    )
    event_logs: bool = Field(default=True, description="write one JSONL event log per request")
    openai_sources: bool = Field(
        default=True,
        description="OpenAI-compatible answers end with a Markdown list of their sources, for "
        "clients that show text only",
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
    model_timeout_s: float = Field(default=60.0, gt=0, description="limit on one model call")
    request_timeout_s: float = Field(default=120.0, gt=0, description="limit on one whole answer")

    @field_validator("llm")
    @classmethod
    def _check_llm(cls, value: str) -> str:
        value = value.strip()
        if not _LLM_RE.fullmatch(value):
            raise ValueError(f"{value!r} is not a model choice; use {_LLM_FORMS}")
        return value

    @field_validator("embeddings")
    @classmethod
    def _check_embeddings(cls, value: str) -> str:
        value = value.strip()
        if not _EMBEDDINGS_RE.fullmatch(value):
            raise ValueError(f"{value!r} is not an embedding model; use {_EMBEDDINGS_FORMS}")
        return value

    @field_validator("api_keys")
    @classmethod
    def _check_api_keys(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            _read_keys(value.get_secret_value())  # a file that cannot be read fails at start
        return value

    @property
    def api_key_set(self) -> frozenset[str]:
        """The keys a client may send; empty when no key is needed."""
        if self.api_keys is None:
            return frozenset()
        return _read_keys(self.api_keys.get_secret_value())

    @field_validator("home", "model_cache", mode="before")
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
        return self.home / "logs"

    @property
    def uses_chroma_server(self) -> bool:
        return self.chroma_host is not None


def _read_keys(value: str) -> frozenset[str]:
    """The keys ``value`` gives: comma separated, or ``@FILE`` with one key per line. The
    messages never include a key."""
    if value.startswith("@"):
        path = Path(value[1:]).expanduser()
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as error:
            reason = error.strerror if isinstance(error, OSError) else "it is not UTF-8 text"
            raise ValueError(f"the key file {path} cannot be read ({reason})") from None
        keys = [line.strip() for line in lines]
        where = f"the key file {path}"
    else:
        keys = [key.strip() for key in value.split(",")]
        where = "the list"
    found = frozenset(key for key in keys if key and not key.startswith("#"))
    if not found:
        raise ValueError(f"{where} holds no key; give at least one, or unset it")
    if any(any(c.isspace() for c in key) or not key.isprintable() for key in found):
        raise ValueError(f"{where} holds a key with a space or control character in it")
    return found


def env_var_for(field: str) -> str:
    """The environment variable a setting is read from (the first one, when several are)."""
    alias = Settings.model_fields[field].validation_alias
    if isinstance(alias, AliasChoices):
        for choice in alias.choices:
            if isinstance(choice, str) and choice.isupper():
                return choice
    return f"{ENV_PREFIX}{field.upper()}"


def _known_variables() -> set[str]:
    names = set()
    for field, info in Settings.model_fields.items():
        names.add(f"{ENV_PREFIX}{field.upper()}")
        if isinstance(info.validation_alias, AliasChoices):
            names.update(
                c for c in info.validation_alias.choices if isinstance(c, str) and c.isupper()
            )
    return names


def _variable_set_for(field: str) -> str:
    """The variable that actually supplied ``field``, for messages."""
    alias = Settings.model_fields[field].validation_alias
    choices = (
        [c for c in alias.choices if isinstance(c, str)] if isinstance(alias, AliasChoices) else []
    )
    candidates = [name for name in choices if name.isupper()] + [f"{ENV_PREFIX}{field.upper()}"]
    return next((name for name in candidates if os.environ.get(name)), env_var_for(field))


def load_settings(**overrides: Any) -> Settings:
    """Build the settings; ``None`` overrides are ignored so unset CLI options fall through.

    Raises :class:`ConfigurationError` naming the variable or option and how to fix it,
    including for a ``REACTOME_ANSWERS_*`` variable we do not know (a typo would otherwise
    be ignored in silence).
    """
    given = {name: value for name, value in overrides.items() if value is not None}
    unknown = sorted(set(given) - set(Settings.model_fields))
    if unknown:
        raise ConfigurationError(
            f"unknown setting(s) {', '.join(unknown)}",
            fix=f"known settings are {', '.join(Settings.model_fields)}",
        )
    known = _known_variables()
    stray = sorted(name for name in os.environ if name.startswith(ENV_PREFIX) and name not in known)
    if stray:
        raise ConfigurationError(
            f"unknown environment variable(s) {', '.join(stray)}",
            fix=f"unset them; known variables are {', '.join(sorted(known))}",
        )
    try:
        return Settings(**given)
    except ValidationError as error:
        first = error.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        field = next((name for name in Settings.model_fields if env_var_for(name) == field), field)
        source = "option" if field in given else "environment variable"
        where = f"--{field.replace('_', '-')}" if field in given else _variable_set_for(field)
        reason = str(first["msg"]).removeprefix("Value error, ")
        raise ConfigurationError(
            f"{source} {where} has an unusable value: {reason}",
            fix=f"set {where} to a valid value or unset it to use the default",
        ) from None
