"""JSON from outside read in one place: a request body, an MCP message, a ``--history`` file,
a log's line, a feedback sidecar.

``json.loads`` fails four ways, and one of them is no ``ValueError``: text nested deeper than
the parser recurses (thousands of brackets in a few kilobytes) raises ``RecursionError``,
which a caller catching ``ValueError`` lets through as a crash. :func:`parse_json` turns all
four into :class:`UnreadableJSONError`, whose ``kind`` says which and ``reason`` says it in
words, so each caller only words its own message.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal

__all__ = ["UnreadableJSONError", "UnreadableKind", "finite_number", "parse_json"]

UnreadableKind = Literal["encoding", "syntax", "nesting", "number"]


class UnreadableJSONError(ValueError):
    """Text that is no JSON we can read: ``kind`` says why, ``reason`` in words."""

    def __init__(self, kind: UnreadableKind, reason: str) -> None:
        super().__init__(reason)
        self.kind, self.reason = kind, reason


def parse_json(text: str | bytes, decoder: json.JSONDecoder | None = None) -> Any:
    """``text`` parsed, by ``decoder`` if given; an
    :class:`UnreadableJSONError` for any text that is not JSON we can read."""
    try:
        if decoder is None:
            return json.loads(text)  # bytes: UTF-8, or UTF-16/32 as RFC 8259's detection says
        return decoder.decode(text.decode("utf-8") if isinstance(text, bytes) else text)
    except UnicodeDecodeError as error:
        raise UnreadableJSONError("encoding", f"not UTF-8 text (byte {error.start + 1})") from None
    except json.JSONDecodeError as error:
        where = f"line {error.lineno} column {error.colno}"
        raise UnreadableJSONError("syntax", f"{error.msg}: {where}") from None
    except RecursionError:
        raise UnreadableJSONError("nesting", "nested too deeply") from None
    except ValueError:  # the only other: an integer of over 4,300 digits
        raise UnreadableJSONError("number", "a number of over 4,300 digits") from None


def finite_number(value: object) -> float | None:
    """``value`` as a float if JSON read it as a finite number; None for anything else (text,
    a bool, NaN or infinity, or an integer too large for a float, which JSON reads whole)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None
