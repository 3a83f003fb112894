"""What a server must refuse before a request reaches the application.

- :class:`BodyLimits`: a request body is read here, whatever its framing (``Content-Length``
  or ``Transfer-Encoding: chunked``), and refused with 413 as soon as it passes the byte
  limit, or with 408 when it takes longer than the body time limit; only a whole, small body
  reaches FastAPI. The header alone is not trusted: a chunked body has none.
- :class:`RequireJSON`: a body sent as anything but JSON is a 415 that names the content type.
- :func:`run`: uvicorn with an HTTP protocol that closes a connection whose request headers
  are not complete within the header time limit (an idle or half-sent request holds nothing
  for long) and turns away connections over the cap with a 503.

Every refusal here has the shape of the route's protocol, as the application's
(:func:`app.http.errors.refusal`), and closes the connection: the rest of an oversized or stalled
body is never read.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from app.http.errors import refusal
from app.http.settings import ServerSettings

__all__ = [
    "BodyLimits",
    "ReadBody",
    "RequireJSON",
    "configure_protocol",
    "read_body",
    "replaying",
    "run_server",
]

_CLOSE = {"Connection": "close"}


class BodyLimits:
    """Read each request body in full, within ``max_bytes`` and ``timeout_s``, before the app
    sees it; the app then receives it as one message."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, timeout_s: float) -> None:
        self.app, self.max_bytes, self.timeout_s = app, max_bytes, timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        length = headers.get(b"content-length", b"")
        if length.isdigit() and int(length) > self.max_bytes:
            await self._too_large(scope, receive, send)
            return
        if length in (b"", b"0") and b"transfer-encoding" not in headers:
            await self.app(scope, receive, send)  # no body at all
            return
        read: ReadBody | None = None
        with anyio.move_on_after(self.timeout_s):
            read = await read_body(receive, self.max_bytes)
        if read is None:
            message_text = (
                f"the request body did not arrive within {self.timeout_s:g} s; send it at once "
                "(REACTOME_ANSWERS_BODY_TIMEOUT_S)"
            )
            await refusal(scope, 408, "body_timeout", message_text, _CLOSE)(scope, receive, send)
            return
        if read.after:
            return  # the client left before sending its body: nobody to answer
        if read.over:
            await self._too_large(scope, receive, send)
            return
        await self.app(scope, replaying(read.body, receive), send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = (
            f"the request body is over {self.max_bytes:,} bytes; send less "
            "(REACTOME_ANSWERS_MAX_BODY_BYTES)"
        )
        await refusal(scope, 413, "too_large", message, _CLOSE)(scope, receive, send)


@dataclass(frozen=True)
class ReadBody:
    """A request body as far as it was read."""

    body: bytes
    # Messages taken while reading that were no part of the body (the client left).
    after: tuple[Message, ...] = ()
    over: bool = False  # it passed the byte limit: the rest was not read


async def read_body(receive: Receive, max_bytes: int | None = None) -> ReadBody:
    """Read a request body from ``receive``, whatever its framing, until it ends, the client
    leaves, or (with ``max_bytes``) it passes that many bytes. The one loop over a body:
    :class:`BodyLimits` reads with a limit, a route that must see its body before the app
    (the MCP route) reads the whole one it was given."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return ReadBody(b"".join(chunks), after=(message,))
        chunk = message.get("body", b"")
        size += len(chunk)
        if max_bytes is not None and size > max_bytes:
            return ReadBody(b"", over=True)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return ReadBody(b"".join(chunks))


def replaying(body: bytes, receive: Receive, *after: Message) -> Receive:
    """A ``receive`` that gives ``body`` as one message, then ``after`` (messages already
    taken from ``receive``), then whatever ``receive`` gives: only ``http.disconnect`` is
    left to come once a body has been read."""
    pending: list[Message] = [{"type": "http.request", "body": body}, *after]

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay


class RequireJSON:
    """Refuse a body whose ``Content-Type`` is not JSON (415), naming what was sent."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in ("POST", "PUT", "PATCH"):
            given = dict(scope["headers"]).get(b"content-type", b"").decode("latin-1")
            media_type = given.split(";", 1)[0].strip().lower()
            if media_type != "application/json" and not media_type.endswith("+json"):
                sent = f"Content-Type {given!r}" if given else "no Content-Type"
                message = (
                    f"the body must be JSON, but the request has {sent}; send it with "
                    "'Content-Type: application/json'"
                )
                await refusal(scope, 415, "bad_input", message)(scope, receive, send)
                return
        await self.app(scope, receive, send)


_SERVICE_UNAVAILABLE = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s"
)
_BUSY = (
    b'{"error":{"code":"too_many_connections","message":"the server has as many open '
    b'connections as it allows (REACTOME_ANSWERS_MAX_CONNECTIONS); try again shortly"}}'
)


class _LimitedHTTP(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
    """uvicorn's HTTP protocol with a deadline on request headers and a connection cap;
    its numbers are the settings' (:func:`configure_protocol`)."""

    header_timeout_s: float = 10.0
    max_connections: int = 1000

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            transport.write(_SERVICE_UNAVAILABLE % (len(_BUSY), _BUSY))
            transport.close()
            return
        self._arm_header_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_header_deadline()  # the next request on this connection gets its own

    def _arm_header_deadline(self) -> None:
        previous = getattr(self, "_header_deadline", None)
        if previous is not None:
            previous.cancel()
        self._header_deadline = self.loop.call_later(self.header_timeout_s, self._headers_late)

    def _headers_late(self) -> None:
        # No request in progress: the headers of the next one are not all here yet (or none
        # came). A request being answered is the application's and its time limits' business.
        if (self.cycle is None or self.cycle.response_complete) and not self.transport.is_closing():
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        deadline = getattr(self, "_header_deadline", None)
        if deadline is not None:
            deadline.cancel()
        super().connection_lost(exc)


def configure_protocol(settings: ServerSettings) -> type[asyncio.Protocol]:
    """The protocol class with the settings' numbers. It is the module's own class, set up
    in each process, so that uvicorn's worker processes can be handed it by name."""
    _LimitedHTTP.header_timeout_s = settings.header_timeout_s
    _LimitedHTTP.max_connections = settings.max_connections
    return _LimitedHTTP


# How long a worker of `serve --workers N` may take to answer its supervisor's ping.
WORKER_HEALTHCHECK_S = 60


def run_server(
    app: Any, settings: ServerSettings, *, host: str, port: int, workers: int = 1
) -> None:
    """Serve ``app`` with uvicorn under the settings' connection limits until stopped.

    With several ``workers``, ``app`` must be an import string of an application factory:
    each worker process builds its own application (and loads its own models) from the
    environment, and uvicorn shares the listening socket among them."""
    import uvicorn

    # uvicorn believes X-Forwarded-For from 127.0.0.1 unless told otherwise: then any local
    # client (or one behind a proxy that passes the header on) picks its own rate-limit
    # bucket. Only the proxies the operator names are believed.
    proxies = [ip.strip() for ip in settings.forwarded_allow_ips.split(",") if ip.strip()]
    uvicorn.run(
        app,
        host=host,
        port=port,
        http=configure_protocol(settings),
        proxy_headers=bool(proxies),
        forwarded_allow_ips=proxies or None,
        timeout_keep_alive=settings.keep_alive_s,
        log_level="info",
        workers=workers if workers > 1 else None,
        factory=workers > 1,
        # uvicorn kills a worker that misses one 5 s ping; one still loading its models on a
        # busy machine misses it (a thread of its own answers, but needs the interpreter),
        # and its replacement the same, in a loop: give a worker time, a hung one is rare.
        timeout_worker_healthcheck=WORKER_HEALTHCHECK_S,
    )
