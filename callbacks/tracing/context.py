"""Which trace an answer belongs to: the caller's W3C ``traceparent``, or a new trace.

An answer's ids are fixed when it starts, before any span exists: its log header and its
``done`` event name the trace, and the spans are drawn from the records when it has ended
(:mod:`callbacks.tracing.spans`). A span's id is derived from the root span's id and what the
span stands for, so the same log always gives the same ids, live or exported.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass

__all__ = ["TraceContext", "TraceParent", "child_span_id", "parse_traceparent"]

# version-traceid-parentid-flags (W3C Trace Context, level 1): lower-case hex, the version
# never ff; a later version may append fields after a dash.
_TRACEPARENT = re.compile(
    r"(?P<version>[0-9a-f]{2})-(?P<trace_id>[0-9a-f]{32})-(?P<span_id>[0-9a-f]{16})"
    r"-(?P<flags>[0-9a-f]{2})(?P<rest>-.*)?"
)
_SAMPLED = 0x01


@dataclass(frozen=True)
class TraceContext:
    """One answer's place in a trace: ``trace_id`` (32 hex digits), its root span's
    ``span_id`` and, when it continues a caller's trace, the caller's span
    (``parent_span_id``, 16 hex digits each) and ``trace_state`` (W3C ``tracestate``)."""

    trace_id: str
    span_id: str
    parent_span_id: str | None = None
    trace_state: str | None = None

    @classmethod
    def new(
        cls, parent: tuple[str, str] | None = None, trace_state: str | None = None
    ) -> TraceContext:
        """A context with a fresh root span: under ``parent`` (its trace id and span id) when
        given, else in a new trace."""
        span_id = _nonzero_hex(8)
        if parent is None:
            return cls(trace_id=_nonzero_hex(16), span_id=span_id)
        return cls(parent[0], span_id, parent_span_id=parent[1], trace_state=trace_state)


@dataclass(frozen=True)
class TraceParent:
    """A ``traceparent`` header as read: the caller's trace, span and whether it samples."""

    trace_id: str
    span_id: str
    sampled: bool


def parse_traceparent(value: str | None) -> TraceParent | None:
    """The caller's span in a W3C ``traceparent`` header; None when there is none or it is
    malformed (the specification says to start a new trace then, not to refuse)."""
    if not value:
        return None
    match = _TRACEPARENT.fullmatch(value.strip())
    if match is None or match["version"] == "ff":
        return None
    if match["version"] == "00" and match["rest"]:
        return None  # version 00 has exactly four fields
    trace_id, span_id = match["trace_id"], match["span_id"]
    if trace_id == "0" * 32 or span_id == "0" * 16:
        return None
    return TraceParent(trace_id, span_id, bool(int(match["flags"], 16) & _SAMPLED))


def child_span_id(root_span_id: str, key: str) -> str:
    """The id of the span that ``key`` names under the root span ``root_span_id``: the
    same for the same answer every time it is drawn, different for every key."""
    digest = hashlib.blake2b(f"{root_span_id}/{key}".encode(), digest_size=8).hexdigest()
    return digest if digest != "0" * 16 else "0" * 15 + "1"


def _nonzero_hex(size: int) -> str:
    while True:
        value = secrets.token_hex(size)
        if value.strip("0"):
            return value
