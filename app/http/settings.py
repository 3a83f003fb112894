"""The HTTP server's settings: body and connection limits, timeouts, API keys, rate limits
and the Redis that may count them across a fleet, CORS, the proxies to believe, and what
the OpenAI protocol adds to an answer.

They are read like the pipeline's (:mod:`pipelines.core.settings`: ``REACTOME_ANSWERS_*``
variables, the same checks and messages) but kept apart, since the pipeline uses none of them.
Importing this module is what makes these variables known: every command imports it
(``app.cli``), so a misspelt one is refused there as any other.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from pydantic import Field, SecretStr, field_validator

from pipelines.core.settings import ReactomeSettings, load_config

__all__ = ["ServerSettings", "load_server_settings"]

# In a key file, '#' after a space or at the line's start: a key may hold '#' itself.
_INLINE_COMMENT = re.compile(r"(?:^|\s)#.*")


class ServerSettings(ReactomeSettings):
    """The settings of ``serve`` (and ``replay --serve``); construct through
    :func:`load_server_settings` for clear errors."""

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
        "or @FILE with one per line, '#' starting a comment); unset: no key needed",
    )
    max_concurrent_answers: int = Field(
        default=0,
        ge=0,
        description="answers in progress at once per server process, or per fleet with "
        "REACTOME_ANSWERS_REDIS_URL; one more gets 429 at once (0: no cap)",
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
    redis_url: SecretStr | None = Field(
        default=None,
        description="a Redis (or Valkey) every instance shares, redis://[:PASSWORD@]HOST:PORT/DB "
        "or rediss://... (TLS): the answer cap, the rate limit and wrong keys are then counted "
        "across every worker and instance using it; unset: counted in each process",
    )
    when_redis_down: Literal["per-process", "refuse"] = Field(
        default="per-process",
        description="when that Redis cannot be reached: count the limits in each process and "
        "answer ('per-process'), or refuse with 503 ('refuse')",
    )
    redis_prefix: str = Field(
        default="reactome-answers",
        pattern=r"^[A-Za-z0-9_.-]{1,64}$",
        description="what the limits' Redis keys start with: one prefix per fleet sharing a Redis",
    )
    answer_lease_s: float = Field(
        default=15.0,
        ge=3,
        le=600,
        description="with Redis: an answer's slot is a lease renewed every third of this, so "
        "the slots of a worker that died are free again within this long",
    )
    forwarded_allow_ips: str = Field(
        default="",
        description="comma-separated addresses of proxies whose X-Forwarded-For and "
        "X-Forwarded-Proto are believed (the client address then comes from them); empty: "
        "none, so no client can choose its own address",
    )
    openai_sources: bool = Field(
        default=True,
        description="OpenAI-compatible answers end with a Markdown list of their sources, for "
        "clients that show text only",
    )

    @field_validator("api_keys")
    @classmethod
    def _check_api_keys(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            _read_keys(value.get_secret_value())  # a file that cannot be read fails at start
        return value

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            parts = urlsplit(value.get_secret_value())
            # The message never repeats the url: it may hold a password.
            if parts.scheme not in ("redis", "rediss", "unix"):
                raise ValueError(
                    "give a url starting redis:// (or rediss:// for TLS, unix:// for a socket), "
                    "such as redis://redis.internal:6379/0"
                )
            try:
                parts.port  # noqa: B018 (a port that is not a number raises here)
            except ValueError:
                raise ValueError("the url's port is not a number from 0 to 65535") from None
            if parts.scheme != "unix" and not parts.hostname:
                raise ValueError("the url names no host, as in redis://HOST:6379/0")
        return value

    @property
    def redis_passwords(self) -> frozenset[str]:
        """The password in ``redis_url``, as written (percent-encoded) and as sent, to be
        redacted wherever it could appear."""
        password = (
            None if self.redis_url is None else urlsplit(self.redis_url.get_secret_value()).password
        )
        return frozenset() if password is None else frozenset({password, unquote(password)})

    @property
    def api_key_set(self) -> frozenset[str]:
        """The keys a client may send; empty when no key is needed."""
        if self.api_keys is None:
            return frozenset()
        return _read_keys(self.api_keys.get_secret_value())


def _read_keys(value: str) -> frozenset[str]:
    """The keys ``value`` gives: comma separated, or ``@FILE`` with one key per line, where
    ``#`` at the start of a line or after a space starts a comment (a ``#`` inside a key is
    part of it). The messages name the line or the place in the list, never a key."""
    if value.startswith("@"):
        path = Path(value[1:]).expanduser()
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as error:
            reason = error.strerror if isinstance(error, OSError) else "it is not UTF-8 text"
            raise ValueError(f"the key file {path} cannot be read ({reason})") from None
        entries = [
            (f"line {number} of the key file {path}", _INLINE_COMMENT.sub("", line).strip())
            for number, line in enumerate(lines, start=1)
        ]
        where = f"the key file {path}"
        form = "one key per line; '#' at the start of a line or after a space starts a comment"
    else:
        entries = [
            (f"key {number} of the list", key.strip())
            for number, key in enumerate(value.split(","), start=1)
        ]
        where = "the list"
        form = "keys separated by commas"
    found: set[str] = set()
    for place, key in entries:
        if not key or key.startswith("#"):
            continue
        if any(c.isspace() for c in key) or not key.isprintable():
            raise ValueError(
                f"{place} holds a key with a space or control character in it; give {form}"
            )
        found.add(key)
    if not found:
        raise ValueError(f"{where} holds no key; give at least one, or unset it")
    return frozenset(found)


def load_server_settings(**overrides: Any) -> ServerSettings:
    """The server's settings from the environment and ``overrides`` (``None`` ones ignored);
    a :class:`~pipelines.core.errors.ConfigurationError` names the variable and the fix."""
    return load_config(ServerSettings, **overrides)
