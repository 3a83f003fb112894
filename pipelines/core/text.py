"""Text every layer can print, encode and send: what a lone surrogate becomes.

A Python str can hold a lone surrogate (a question sent as the JSON escape ``\\ud800``, an
argument the terminal could not decode, a log written by an older version) that UTF-8 cannot
encode; every event, log line, feedback comment and sentence to embed replaces it with U+FFFD,
by this one function."""

from __future__ import annotations

import re

__all__ = ["without_surrogates"]

# A str never holds a surrogate pair, so any surrogate in one is a lone one.
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def without_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD, one character for one."""
    return _SURROGATE_RE.sub("\ufffd", text)
