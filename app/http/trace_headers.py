"""The W3C Trace Context headers of a request, as the options an answer continues them by.

A chat backend that traces its own request sends ``traceparent`` (and ``tracestate``); the
answer's spans then hang from its span (decision 0042). Every answering route and the MCP
route read them here, and name their surface, so a trace's root span says where the question
came from.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from pipelines.core.options import RequestOptions

__all__ = ["traced_options"]

# Longer than any well-formed header (55 characters; tracestate at most 32 members of 256):
# a header past it is not Trace Context, and is not worth reading.
_MAX_TRACEPARENT = 256
_MAX_TRACESTATE = 8192


def traced_options(
    options: RequestOptions, headers: Mapping[str, str] | None, surface: str
) -> RequestOptions:
    """``options`` with the request's ``surface`` and its trace headers, if any."""
    found = headers or {}
    parent = found.get("traceparent")
    state = found.get("tracestate")
    return dataclasses.replace(
        options,
        surface=surface,
        traceparent=parent if parent and len(parent) <= _MAX_TRACEPARENT else None,
        tracestate=state if state and len(state) <= _MAX_TRACESTATE else None,
    )
