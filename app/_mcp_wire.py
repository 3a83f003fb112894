"""What the HTTP layer must know of MCP messages at ``/mcp`` without the SDK: which ones run
an answer (for the answer cap and refuse mode), and the shape a refusal takes there.

Every MCP message is a ``POST /mcp``: a discovery, a handshake, a listing, a notification, a
search or an answer. Only a ``tools/call`` of :data:`ANSWER_TOOL` runs an answer, and only the
body says so for sure: a client of the 2026 protocol also names its message in the
``Mcp-Method`` and ``Mcp-Name`` headers, but the SDK holds a legacy request to nothing it
says there, so the headers are never believed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fastapi.responses import JSONResponse

__all__ = [
    "ANSWER_TOOL",
    "MCP_PATH",
    "calls_the_answer_tool",
    "mcp_refusal",
]

MCP_PATH = "/mcp"
ANSWER_TOOL = "ask_reactome"
# JSON-RPC leaves -32000 to -32099 to the server; the SDK's client shows such an error's
# message as it is, so the caller reads our reason (and our code, in ``data``).
_REFUSED = -32000


def calls_the_answer_tool(body: bytes) -> bool:
    """Whether the JSON-RPC message (or batch) in ``body`` calls :data:`ANSWER_TOOL`; a body
    that is not JSON-RPC calls nothing (the SDK refuses it)."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than json can read
        return False
    messages = message if isinstance(message, list) else [message]
    return any(_is_answer_call(item) for item in messages)


def _is_answer_call(message: Any) -> bool:
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return False
    params = message.get("params")
    return isinstance(params, dict) and params.get("name") == ANSWER_TOOL


def mcp_refusal(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """A refusal at ``/mcp`` (no key, the rate limit, the answer cap...) as a JSON-RPC error,
    which an MCP client shows as the failed request's error, our message and all; ``id`` is
    null since the request may not have been read."""
    error = {"code": _REFUSED, "message": message, "data": {"code": code, "status": status}}
    return JSONResponse(
        {"jsonrpc": "2.0", "id": None, "error": error}, status_code=status, headers=headers
    )
