"""What the HTTP layer must know of MCP messages at ``/mcp`` without the SDK: which ones run
an answer (for the answer cap and refuse mode), which ones count against the rate limit, the
id a refusal answers, and the shapes a refusal takes there.

Every MCP message is a ``POST /mcp``: a discovery, a handshake, a listing, a notification, a
search or an answer. Only a ``tools/call`` of :data:`ANSWER_TOOL` runs an answer, and only the
body says so for sure: a client of the 2026 protocol also names its message in the
``Mcp-Method`` and ``Mcp-Name`` headers, but the SDK holds a legacy request to nothing it
says there, so the headers are never believed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fastapi.responses import JSONResponse

from pipelines.core.json_text import UnreadableJSONError, parse_json

__all__ = [
    "ANSWER_TOOL",
    "COUNTED_METHODS",
    "MCP_PATH",
    "Posted",
    "calls_the_answer_tool",
    "mcp_refusal",
    "read_posted",
    "tool_error_result",
]

MCP_PATH = "/mcp"
ANSWER_TOOL = "ask_reactome"
# What the rate limit counts at /mcp: the messages that search or answer. A handshake, its
# notification, a listing or a ping costs next to nothing, and a client that opens a session
# per tool call (langchain-mcp-adapters) sends three of them before each call.
COUNTED_METHODS = frozenset({"tools/call", "resources/read"})
# JSON-RPC leaves -32000 to -32099 to the server; the SDK's client shows such an error's
# message as it is, so the caller reads our reason (and our code, in ``data``).
_REFUSED = -32000
# Where a 2026-era request carries its protocol version; its results carry a resultType.
_MODERN_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"

RequestId = str | int | None


@dataclass(frozen=True)
class Posted:
    """What the HTTP layer reads of one ``POST /mcp`` body."""

    counts: bool = False  # the rate limit counts it (:data:`COUNTED_METHODS`)
    calls_the_answer_tool: bool = False
    request_id: RequestId = None  # a lone request's id, for a refusal's body
    modern: bool = False  # a 2026-era request (its result needs a resultType)


def read_posted(body: bytes) -> Posted:
    """What ``body`` (a JSON-RPC message or batch) asks; a body that is not JSON-RPC asks
    nothing (the SDK answers it with its own parse or invalid-request error)."""
    try:
        message = parse_json(body)
    except UnreadableJSONError:
        return Posted()
    messages = message if isinstance(message, list) else [message]
    lone = message if isinstance(message, dict) else {}
    params = lone.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    request_id = lone.get("id")
    return Posted(
        counts=any(_method(item) in COUNTED_METHODS for item in messages),
        calls_the_answer_tool=any(_is_answer_call(item) for item in messages),
        request_id=request_id if _is_id(request_id) else None,
        modern=isinstance(meta, dict) and _MODERN_VERSION_KEY in meta,
    )


def calls_the_answer_tool(body: bytes) -> bool:
    """Whether the JSON-RPC message (or batch) in ``body`` calls :data:`ANSWER_TOOL`; a body
    that is not JSON-RPC calls nothing (the SDK refuses it)."""
    return read_posted(body).calls_the_answer_tool


def _method(message: Any) -> Any:
    return message.get("method") if isinstance(message, dict) else None


def _is_id(value: Any) -> bool:
    # JSON-RPC ids are strings or numbers; true and false are not numbers here.
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _is_answer_call(message: Any) -> bool:
    if _method(message) != "tools/call":
        return False
    params = message.get("params")
    return isinstance(params, dict) and params.get("name") == ANSWER_TOOL


def mcp_refusal(
    status: int,
    code: str,
    message: str,
    headers: Mapping[str, str] | None = None,
    request_id: RequestId = None,
) -> JSONResponse:
    """A refusal at ``/mcp`` (no key, the rate limit, a foreign origin...) as a JSON-RPC
    error, which an MCP client shows as the failed request's error, our message and all.
    ``request_id`` is the request's id when its body was read; null otherwise (a key is
    checked before the body is read, and a stranger's body never is)."""
    error = {"code": _REFUSED, "message": message, "data": {"code": code, "status": status}}
    return JSONResponse(
        {"jsonrpc": "2.0", "id": request_id, "error": error}, status_code=status, headers=headers
    )


def tool_error_result(posted: Posted, message: str) -> JSONResponse:
    """A call's result flagged ``isError`` whose text is ``message``, answering ``posted``'s
    request as the SDK would: every client shows a tool's error text to its user and to the
    model that called it, where an HTTP error reaches most as a bare status."""
    result: dict[str, Any] = {"content": [{"type": "text", "text": message}], "isError": True}
    if posted.modern:
        result["resultType"] = "complete"
    return JSONResponse({"jsonrpc": "2.0", "id": posted.request_id, "result": result})
