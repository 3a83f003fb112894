"""The Model Context Protocol's stdio transport, which ``reactome-answers mcp`` serves the
tools of :mod:`app.http.protocols.mcp_server` over.

A line that is not JSON (a lone surrogate escape included) gets the protocol's parse error
(-32700), and JSON that is not a JSON-RPC message its invalid-request error (-32600), as
over HTTP: the SDK's stdio server drops such a line without a word, and a client that sent
a request on it would wait for its answer for ever.
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

__all__ = ["serve_stdio"]


async def serve_stdio(server: MCPServer) -> None:
    """Serve ``server`` over standard input and output, as ``server.run("stdio")`` does, but
    answering each line that is not a message with a JSON-RPC error."""
    # The SDK's low-level server, as its own run_stdio_async drives it (a private name:
    # tests/mcp/test_transports.py runs this path, so a change of it fails there).
    lowlevel = server._lowlevel_server
    async with stdio_server() as (read_stream, write_stream):
        send, receive = create_context_streams[SessionMessage | Exception](0)

        async def relay() -> None:
            async with send:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        reply = _unreadable(item)
                        if reply is not None:
                            await write_stream.send(SessionMessage(reply))
                    else:
                        await send.send(item)

        async with anyio.create_task_group() as group:
            group.start_soon(relay)
            await lowlevel.run(receive, write_stream, lowlevel.create_initialization_options())


def _unreadable(error: Exception) -> JSONRPCError | None:
    """The error answering a line the SDK could not read as a message (``error``); None for
    a blank line, which is no message at all."""
    problems = error.errors() if isinstance(error, ValidationError) else []
    unparsed = [problem.get("input") for problem in problems if problem["type"] == "json_invalid"]
    if unparsed and isinstance(unparsed[0], str) and not unparsed[0].strip():
        return None
    if not problems or unparsed:
        return JSONRPCError(
            jsonrpc="2.0",
            id=None,
            error=ErrorData(code=PARSE_ERROR, message="Parse error: the line is not JSON"),
        )
    # The message as parsed is the input of some problem (the union's, missing a member).
    parsed = [problem.get("input") for problem in problems]
    ids = [message.get("id") for message in parsed if isinstance(message, dict)]
    return JSONRPCError(
        jsonrpc="2.0",
        id=next((found for found in ids if _is_id(found)), None),
        error=ErrorData(
            code=INVALID_REQUEST, message="Invalid request: the line is not a JSON-RPC message"
        ),
    )


def _is_id(value: Any) -> bool:
    # JSON-RPC ids are strings or numbers; true and false are not numbers here.
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
