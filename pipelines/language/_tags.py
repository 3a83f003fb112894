"""The languages answered in, by their BCP 47 primary tags, and a request's tag read as one."""

from __future__ import annotations

import re

__all__ = ["DEFAULT_LANGUAGE", "SUPPORTED_LANGUAGES", "normalize_language"]

# English first: it is the fallback everywhere (an unsure detection, a text not translated).
SUPPORTED_LANGUAGES = ("en", "es", "pt", "fr", "de", "it", "zh", "ja")
DEFAULT_LANGUAGE = "en"

# A language tag as clients send it: a primary subtag of 2 or 3 letters, then subtags of up to
# 8 letters or digits (script, region, variant), joined by hyphens, or by underscores as POSIX
# locales write them ("pt_BR"). Anything else (an Accept-Language list, a language's name) is
# no tag, so the caller can say so instead of guessing.
_TAG_RE = re.compile(r"([A-Za-z]{2,3})(?:[-_][A-Za-z0-9]{1,8})*")


def normalize_language(tag: str) -> str | None:
    """The supported primary tag ``tag`` asks for ("es-MX" -> "es", "ZH-Hans" -> "zh"), or
    None when it is no language tag or its language is not in :data:`SUPPORTED_LANGUAGES`.

    Only the primary subtag decides: regional variants share one set of texts, and so do
    both Chinese scripts (the texts are written in Simplified characters)."""
    matched = _TAG_RE.fullmatch(tag.strip())
    if matched is None:
        return None
    primary = matched.group(1).lower()
    return primary if primary in SUPPORTED_LANGUAGES else None
