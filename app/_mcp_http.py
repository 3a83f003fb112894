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

from fastapi import FastAPI
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from app._mcp_server import mcp_server
from app._mcp_wire import MCP_PATH
from pipelines.catalog.catalog import Catalog
from pipelines.pipeline import AnswerPipeline

__all__ = ["add_mcp"]


def add_mcp(
    app: FastAPI, pipeline: AnswerPipeline, catalog: Catalog
) -> StreamableHTTPSessionManager:
    """Serve the tools over ``pipeline`` at :data:`MCP_PATH`; the caller runs the returned
    manager (``async with manager.run()``) for as long as the app serves, once."""
    server = mcp_server(pipeline, catalog)
    server.streamable_http_app(
        stateless_http=True,
        json_response=False,
        # The SDK would accept only a Host of 127.0.0.1 or localhost, which a proxy in front
        # does not send; the API keys guard /mcp as they guard every other route.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    manager = server.session_manager  # the one that call made: the next would replace it
    # The exact path, every method, no redirect to /mcp/ (which would cross the
    # middlewares, and count against the rate limit, twice). Starlette serves an endpoint
    # that is not a function as an ASGI app, which its annotation does not say.
    endpoint = StreamableHTTPASGIApp(manager)
    app.add_route(MCP_PATH, endpoint, include_in_schema=False)  # type: ignore[arg-type]
    return manager
