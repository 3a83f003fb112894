"""Credentials kept out of everything a user, an event or a log can see."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable

__all__ = [
    "SecretRedactor",
    "one_line",
    "redact_also",
    "redact_secrets",
    "secret_redactor",
    "warn_not_done",
]

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
_SHAPE_NEEDS = ("sk-", "bearer ", "basic ", "://", "=")
_SHAPE_NEEDS_RE = re.compile("|".join(map(re.escape, _SHAPE_NEEDS)), re.IGNORECASE)
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
    return SecretRedactor()(text)


class SecretRedactor:
    """The redaction :func:`redact_secrets` applies, with the secrets the environment and
    :func:`redact_also` hold when it is made looked up once: one serves many texts (a batch
    of traces' attributes)."""

    def __init__(self) -> None:
        # The names first, then each value: another thread may unset one meanwhile, which
        # os.environ.items() would meet as a KeyError (the span shipper's thread, say).
        values = [os.environ.get(name) for name in _secret_names()]
        from_environment = [
            value for value in values if value is not None and len(value) >= _MIN_SECRET_CHARS
        ]
        self._secrets = (*from_environment, *_configured)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, _REDACTED)
        if not _may_hold_shape(text):
            return text
        return _SECRET_SHAPE_RE.sub(_REDACTED, text)

    def touches(self, text: str) -> bool:
        """Whether redacting ``text`` could change it; False means no part of it holds a
        credential either, so texts joined are checked at once."""
        return _may_hold_shape(text) or any(secret in text for secret in self._secrets)


# The environment's names when last looked at, and which of them name credentials: matching
# each name is most of making a redactor, and an answer makes a few.
_names_seen: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())


def _secret_names() -> tuple[str, ...]:
    """The names of the environment's variables that hold credentials, by their names."""
    global _names_seen
    names = tuple(os.environ)
    seen, secret = _names_seen
    if names != seen:
        secret = tuple(name for name in names if _SECRET_NAME_RE.search(name))
        _names_seen = (names, secret)
    return secret


def _may_hold_shape(text: str) -> bool:
    """Whether ``text`` holds what every credential shape needs (:data:`_SHAPE_NEEDS`,
    in any case). Plain text is lowered and searched for each, several times quicker than
    the expression over a trace's few kilobytes; other text goes through the expression,
    whose idea of case (the Kelvin sign is a k) lowering does not share."""
    if text.isascii():
        folded = text.lower()
        return any(needle in folded for needle in _SHAPE_NEEDS)
    return _SHAPE_NEEDS_RE.search(text) is not None


def secret_redactor() -> SecretRedactor:
    """A :class:`SecretRedactor` for the secrets known now."""
    return SecretRedactor()


def one_line(error: BaseException, limit: int = 300) -> str:
    """``Type: message`` of an error we did not raise ourselves, on one line, redacted."""
    # Redacted before the whitespace is collapsed: a secret may span lines.
    text = " ".join(redact_secrets(f"{type(error).__name__}: {error}").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def warn_not_done(what: str, error: BaseException) -> None:
    """One stderr line for housekeeping that failed (``what``: what was not done), which
    must never fail the answer or the server it ran for."""
    print(f"reactome-answers: warning: {what} ({one_line(error)})", file=sys.stderr)
