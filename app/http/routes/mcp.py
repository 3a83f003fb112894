"""The MCP tools (:mod:`app.http.protocols.mcp_server`) over the Streamable HTTP transport, at
``/mcp`` in ``serve``, behind the same middlewares as every route (keys, body limits), and held
here, once the body has been read, to what only the body tells (decision 0031):

- ``GET`` and ``DELETE`` are 405: in stateless mode nothing is ever sent on a GET stream and
  there is no session to delete, so an idle stream would only hold a connection.
- A browser's ``Origin`` must be one of ``REACTOME_ANSWERS_CORS_ORIGINS`` (a request without
  one, as every client but a web page sends, passes), and on a loopback address the ``Host``
  must be a loopback name or an address: a page on another site cannot use the tools, even
  after rebinding its own name to this server (:class:`OriginAndHost`).
- The rate limit counts tool calls and resource reads only, and a call of ``ask_reactome``
  takes a slot of the answer cap, which refuses it as a tool result flagged ``isError``
  carrying the reason, the form every client shows (:class:`app.http.middleware.access.McpLimits`).

Every refusal but the cap's is a JSON-RPC error carrying the request's id (null when the
body was not read, as for a missing key) with the HTTP status (:mod:`app.http.protocols.mcp_wire`).

Stateless, streaming each call's progress and result as Server-Sent Events: then a client
that leaves closes the call's stream and so cancels its answer, in both protocol eras, and
nothing is kept between requests, so any worker or instance can take any of them.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass
from urllib.parse import urlsplit

from fastapi import FastAPI
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Receive, Scope, Send

from app.http.middleware.access import mcp_limits
from app.http.middleware.transport import read_body, replaying
from app.http.protocols.mcp_server import mcp_server
from app.http.protocols.mcp_wire import MCP_PATH, mcp_refusal, read_posted, tool_error_result
from pipelines.catalog.catalog import Catalog
from pipelines.pipeline import AnswerPipeline

__all__ = ["MCPTransport", "OriginAndHost", "add_mcp"]

_STATELESS = (
    "MCP at /mcp is stateless: POST each message; nothing is ever sent on a GET stream and "
    "there is no session to DELETE"
)


@dataclass(frozen=True)
class OriginAndHost:
    """Which browsers' pages may call ``/mcp`` (``origins``, as in
    ``REACTOME_ANSWERS_CORS_ORIGINS``; ``*`` for any), and whether a proxy in front passes its
    own host name on (``behind_proxy``: the operator named proxies in
    ``REACTOME_ANSWERS_FORWARDED_ALLOW_IPS``)."""

    origins: Collection[str] = ()
    behind_proxy: bool = False

    def refusal(self, scope: Scope) -> tuple[int, str, str] | None:
        """Why the request's ``Origin`` or ``Host`` is refused (status, code, message)."""
        headers = dict(scope.get("headers", ()))
        origin = headers.get(b"origin", b"").decode("latin-1").strip()
        if origin and not self._origin_allowed(origin):
            message = (
                f"a web page at {origin} may not use this server's MCP tools: that origin is "
                "not in REACTOME_ANSWERS_CORS_ORIGINS (its operator can add it there)"
            )
            return 403, "origin_not_allowed", message
        host = headers.get(b"host", b"").decode("latin-1").strip()
        if not self._host_allowed(host, scope):
            message = (
                f"this server does not answer MCP under the name {host!r}: reached on a "
                "loopback address, it answers to localhost, 127.0.0.1, [::1] or another "
                "address only (a page on another site could rebind its own name to this "
                "server); behind a proxy that passes the public host name on, name the proxy "
                "in REACTOME_ANSWERS_FORWARDED_ALLOW_IPS"
            )
            return 421, "host_not_allowed", message
        return None

    def _origin_allowed(self, origin: str) -> bool:
        allowed = {entry.lower().rstrip("/") for entry in self.origins}
        return "*" in allowed or origin.lower().rstrip("/") in allowed

    def _host_allowed(self, host: str, scope: Scope) -> bool:
        try:
            name = urlsplit(f"//{host}").hostname
        except ValueError:  # not a host at all (a stray bracket)
            return False
        if not name:
            return False
        if _is_address(name) or name == "localhost" or name.endswith(".localhost"):
            return True  # an address cannot be rebound, and *.localhost is always this machine
        # A host name: rebinding one to this machine is what a page on another site would do
        # to reach a server that listens on loopback only. Reached on another address, the
        # name is one the operator published, and the Origin check covers browsers.
        server = scope.get("server")
        reached = str(server[0]) if server else ""
        return self.behind_proxy or not (_is_address(reached) and _is_loopback(reached))


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _is_loopback(address: str) -> bool:
    return ipaddress.ip_address(address).is_loopback


class MCPTransport:
    """The ASGI endpoint at :data:`MCP_PATH`, served by the session manager of the app's
    lifespan now running (:meth:`running`)."""

    def __init__(
        self,
        server: MCPServer,
        guard: OriginAndHost | None = None,
        on_reject: Callable[[str], None] | None = None,
    ) -> None:
        self.server = server
        self.guard = guard or OriginAndHost()
        self.on_reject = on_reject  # hears why a request was refused here, for the metrics
        self.manager: StreamableHTTPSessionManager | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        # A manager runs once, and an app may be started more than once (a test client
        # entered twice): each lifespan gets a manager of its own.
        self.server.streamable_http_app(
            stateless_http=True,
            json_response=False,
            # The SDK's own check accepts only a Host of 127.0.0.1 or localhost, which a proxy
            # in front may not send, and answers in plain text; OriginAndHost checks here.
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
        # BodyLimits has read the body whole (or there is none): reading it again is free.
        body, receive = await _read_whole(receive)
        posted = read_posted(body)
        refused = self.guard.refusal(scope)
        if refused is None and scope.get("method") != "POST":
            refused = 405, "method_not_allowed", _STATELESS
        if refused is not None:
            status, code, message = refused
            if self.on_reject is not None:
                self.on_reject(code)
            # Closed, as every refusal before the app is: nothing is left open to idle.
            headers = {"Connection": "close"} | ({"Allow": "POST"} if status == 405 else {})
            response = mcp_refusal(status, code, message, headers, posted.request_id)
            await response(scope, receive, send)
            return
        limits = mcp_limits(scope)
        over_rate = await limits.rate_refusal(posted)
        if over_rate is not None:
            status, code, message, headers = over_rate
            response = mcp_refusal(status, code, message, headers, posted.request_id)
            await response(scope, receive, send)
            return
        async with limits.answer_slot(posted) as no_slot:
            if no_slot is not None and no_slot[1] == "too_many_answers":
                # A result the caller's model reads, rather than an HTTP error most clients
                # show as a bare status: it can say the server is busy, or try again.
                await tool_error_result(posted, no_slot[2])(scope, receive, send)
                return
            if no_slot is not None:  # the limits cannot be counted: the server's trouble
                status, code, message, headers = no_slot
                response = mcp_refusal(status, code, message, headers, posted.request_id)
                await response(scope, receive, send)
                return
            await self.manager.handle_request(scope, receive, send)


async def _read_whole(receive: Receive) -> tuple[bytes, Receive]:
    """The request body, and a ``receive`` that gives it to the app again (a disconnect met
    while reading included: the app hears it next)."""
    read = await read_body(receive)
    return read.body, replaying(read.body, receive, *read.after)


def add_mcp(app: FastAPI, pipeline: AnswerPipeline, catalog: Catalog) -> MCPTransport:
    """Serve the tools over ``pipeline`` at :data:`MCP_PATH`; the app's lifespan must run the
    returned transport (``async with transport.running()``). The origins allowed and the
    proxies named come from the server settings ``app`` shares, when it shares them."""
    settings = getattr(app.state, "server_settings", None)
    metrics = getattr(app.state, "metrics", None)
    guard = OriginAndHost()
    if settings is not None:
        origins = [origin.strip() for origin in settings.cors_origins.split(",")]
        proxies = [ip.strip() for ip in settings.forwarded_allow_ips.split(",")]
        guard = OriginAndHost([o for o in origins if o], behind_proxy=any(proxies))
    transport = MCPTransport(
        mcp_server(pipeline, catalog),
        guard,
        on_reject=None if metrics is None else metrics.rejected,
    )
    # The exact path, every method, no redirect to /mcp/ (which would cross the
    # middlewares, and count against the rate limit, twice). Starlette serves an endpoint
    # that is not a function as an ASGI app, which its annotation does not say.
    app.add_route(MCP_PATH, transport, include_in_schema=False)  # type: ignore[arg-type]
    return transport
