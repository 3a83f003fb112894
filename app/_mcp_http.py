"""The MCP tools (:mod:`app._mcp_server`) over the Streamable HTTP transport, at ``/mcp`` in
``serve``, behind the same middlewares as every route: keys, the rate limit (each MCP message
is a request), body limits, and the answer cap for a call of ``ask_reactome``
(:mod:`app._mcp_wire`).

Stateless, streaming each call's progress and result as Server-Sent Events (decision 0031):
then a client that leaves closes the call's stream and so cancels its answer, in both
protocol eras, and nothing is kept between requests, so any worker or instance can take any
of them.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from fastapi import FastAPI
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Receive, Scope, Send

from app._mcp_server import mcp_server
from app._mcp_wire import MCP_PATH, mcp_refusal
from pipelines.catalog.catalog import Catalog
from pipelines.pipeline import AnswerPipeline

__all__ = ["MCPTransport", "add_mcp"]


class MCPTransport:
    """The ASGI endpoint at :data:`MCP_PATH`, served by the session manager of the app's
    lifespan now running (:meth:`running`)."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.manager: StreamableHTTPSessionManager | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        # A manager runs once, and an app may be started more than once (a test client
        # entered twice): each lifespan gets a manager of its own.
        self.server.streamable_http_app(
            stateless_http=True,
            json_response=False,
            # The SDK would accept only a Host of 127.0.0.1 or localhost, which a proxy in
            # front does not send; the API keys guard /mcp as they guard every other route.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        manager = self.server.session_manager
        async with manager.run():
            self.manager = manager
            try:
                yield
            finally:
                if self.manager is manager:  # not one a later, overlapping start put there
                    self.manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.manager is None:  # an app served without its lifespan (mounted in another)
            message = "MCP is served only while the application's lifespan runs"
            await mcp_refusal(503, "not_ready", message)(scope, receive, send)
            return
        await self.manager.handle_request(scope, receive, send)


def add_mcp(app: FastAPI, pipeline: AnswerPipeline, catalog: Catalog) -> MCPTransport:
    """Serve the tools over ``pipeline`` at :data:`MCP_PATH`; the app's lifespan must run the
    returned transport (``async with transport.running()``)."""
    transport = MCPTransport(mcp_server(pipeline, catalog))
    # The exact path, every method, no redirect to /mcp/ (which would cross the
    # middlewares, and count against the rate limit, twice). Starlette serves an endpoint
    # that is not a function as an ASGI app, which its annotation does not say.
    app.add_route(MCP_PATH, transport, include_in_schema=False)  # type: ignore[arg-type]
    return transport
