"""Credentials kept out of everything a user, an event or a log can see."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable

__all__ = ["one_line", "redact_also", "redact_secrets", "secret_redactor", "warn_not_done"]

# Names of environment variables whose values are credentials (OPENAI_API_KEY, HF_TOKEN...).
_SECRET_NAME_RE = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)
# Credentials in a message even when they are not in our environment: an OpenAI-style key,
# an Authorization header's value.
_SECRET_SHAPE_RE = re.compile(
    r"\bsk-[A-Za-z0-9_\-]{6,}"  # an OpenAI-style key
    r"|(?<=Bearer )[^\s'\",]+|(?<=Basic )[A-Za-z0-9+/=]{8,}"  # Authorization values
    r"|(?<=://)[^/\s:@]*:[^/\s@]+(?=@)"  # [user]:password@ in a URL (redis://:pw@host)
    r"|(?<=[?&])(?:api[_-]?key|access_token|token|key|password)=[^&\s]+",  # in a query string
    re.IGNORECASE,
)
# What every shape above needs somewhere in the text: a quick scan for these spares the
# lookbehinds on texts that hold none (most of a trace's attributes).
_SHAPE_NEEDS_RE = re.compile(r"sk-|bearer |basic |://|=", re.IGNORECASE)
_REDACTED = "[redacted]"
# Shorter values are not redacted: they would blank out ordinary words.
_MIN_SECRET_CHARS = 6
# Secrets this process was given that neither a variable's name nor a shape reveals: the
# server's own API keys, one of a comma-separated list or a line of a key file. Longest
# first, so that a key inside another is not left half redacted.
_configured: tuple[str, ...] = ()


def redact_also(secrets: Iterable[str]) -> None:
    """Redact ``secrets`` too, from now on, wherever :func:`redact_secrets` runs in this
    process (values shorter than six characters excepted)."""
    global _configured
    known = set(_configured) | {secret for secret in secrets if len(secret) >= _MIN_SECRET_CHARS}
    _configured = tuple(sorted(known, key=len, reverse=True))


def redact_secrets(text: str) -> str:
    """``text`` with every credential replaced: the values of environment variables named
    like keys or tokens, and anything shaped like an API key or a bearer token. Applied to
    every message that can reach a user, an event or a log; and those given to
    :func:`redact_also`."""
    for name, value in os.environ.items():
        if len(value) >= _MIN_SECRET_CHARS and _SECRET_NAME_RE.search(name) and value in text:
            text = text.replace(value, _REDACTED)
    for secret in _configured:
        if secret in text:
            text = text.replace(secret, _REDACTED)
    return _SECRET_SHAPE_RE.sub(_REDACTED, text)


def secret_redactor() -> Callable[[str], str]:
    """:func:`redact_secrets` for many texts at once (a trace's attributes): the secrets the
    environment and :func:`redact_also` hold now, looked up once rather than per text."""
    from_environment = [
        value
        for name, value in os.environ.items()
        if len(value) >= _MIN_SECRET_CHARS and _SECRET_NAME_RE.search(name)
    ]
    secrets = (*from_environment, *_configured)

    def redact(text: str) -> str:
        for secret in secrets:
            if secret in text:
                text = text.replace(secret, _REDACTED)
        if _SHAPE_NEEDS_RE.search(text) is None:
            return text
        return _SECRET_SHAPE_RE.sub(_REDACTED, text)

    return redact


def one_line(error: BaseException, limit: int = 300) -> str:
    """``Type: message`` of an error we did not raise ourselves, on one line, redacted."""
    # Redacted before the whitespace is collapsed: a secret may span lines.
    text = " ".join(redact_secrets(f"{type(error).__name__}: {error}").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def warn_not_done(what: str, error: BaseException) -> None:
    """One stderr line for housekeeping that failed (``what``: what was not done), which
    must never fail the answer or the server it ran for."""
    print(f"reactome-answers: warning: {what} ({one_line(error)})", file=sys.stderr)
