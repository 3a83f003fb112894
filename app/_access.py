"""Who may ask and how often (checked before a request is read), and how many answers at
once (checked once its body has arrived).

- API keys (``REACTOME_ANSWERS_API_KEYS``): every path but the web page (``/``, its assets
  under ``/static/``), the log page (``/logs/{request_id}``, which holds no data: its script
  fetches ``/v1/logs/{request_id}`` with the key), ``/healthz`` and ``/v1/limits`` needs
  ``Authorization: Bearer KEY``; otherwise 401.
  A client address that sends more than ``REACTOME_ANSWERS_AUTH_FAILURES_PER_MINUTE`` wrong
  or missing keys in a minute gets 429 until its minute refills, whatever key it sends then:
  guessing keys is slowed to that pace.
- A rate limit (``REACTOME_ANSWERS_RATE_LIMIT``, requests per minute) per key, or per client
  address when there are no keys: a token bucket that holds a minute's worth, so a client may
  spend its minute at once and then gets one request per 60/limit seconds; beyond it, 429
  with ``Retry-After``. The client address is the connection's peer unless the operator
  names proxies to believe (``REACTOME_ANSWERS_FORWARDED_ALLOW_IPS``, applied by uvicorn).
- A cap on answers in progress (``REACTOME_ANSWERS_MAX_CONCURRENT_ANSWERS``,
  :class:`AnswerCap`): a request to an answering route (an :class:`AnswerRoute`, what an
  answering router makes; :func:`answer_paths` finds them; at ``/mcp``, an MCP message that
  calls the answer tool, :mod:`app._mcp_wire`) over the cap gets 429 with
  ``Retry-After`` at once, while the answers already running go on. The slot is taken only
  once the whole body has arrived (the cap sits inside :class:`app._http.BodyLimits`), so a
  client that sends headers and stalls holds none; a streamed answer holds its place until
  its last byte is sent, any answer until its client leaves.

Counted in the process by default; with ``REACTOME_ANSWERS_REDIS_URL`` the cap, the rate
limit and failed keys are counted across every worker and instance sharing that Redis
(:mod:`app._shared_limits`, through the :class:`RequestLimit` and :class:`SlotLimit` shapes
here). When it cannot be reached and the operator chose to refuse rather than count per
process, a request gets 503 (``limits_unavailable``).

Refusals have the shape of the route's protocol (:func:`app._errors.refusal`) and close the
connection. A key is never logged or repeated in a message; buckets are kept by a digest of
the key, and at most :data:`MAX_BUCKETS` of them (the least recently used go first).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

import anyio
from fastapi.routing import APIRoute, iter_route_contexts
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app._errors import refusal
from app._http import replaying
from app._mcp_wire import MCP_PATH, calls_the_answer_tool

__all__ = [
    "MAX_BUCKETS",
    "AccessControl",
    "AnswerCap",
    "AnswerRoute",
    "AnswerSlots",
    "LimitsUnavailableError",
    "RateLimiter",
    "RequestLimit",
    "SlotLimit",
    "answer_paths",
]

# A refusal: status, reason (for the metrics), message, headers.
_Refusal = tuple[int, str, str, dict[str, str]]

# What anyone may read: the page, whether the server is up, and the limits the page checks a
# question against before sending it.
_OPEN_PATHS = frozenset({"/", "/healthz", "/v1/limits"})
_OPEN_PREFIX = "/static/"
# The log page (app/_log_page.py): one file for every id, so a browser, which sends no key
# when it follows a link, can load it; the log itself is at /v1/logs/{id}, behind the keys.
_LOG_PAGE_PREFIX = "/logs/"
_CLOSE = {"Connection": "close"}
# A rejected client should not come straight back; an answer takes seconds.
_BUSY_RETRY_S = 1
# The limits' Redis is probed every second; a client sent away meanwhile waits a little more.
_UNAVAILABLE_RETRY_S = 2
# Clients remembered per limiter. A client forgotten early only gets a fresh minute, and it
# takes this many other clients asking in between; without a bound, clients that each ask
# once (or a spoofed address each time) would grow the table for ever.
MAX_BUCKETS = 10_000


class AnswerRoute(APIRoute):
    """A route that runs an answer, and so takes a slot of the cap. Each surface puts its
    answering routes on a router of these (``APIRouter(route_class=AnswerRoute)``), so that
    a route added there is capped without a list to keep."""


def answer_paths(routes: Sequence[BaseRoute]) -> frozenset[str]:
    """The paths of the :class:`AnswerRoute` among ``routes`` (an application's, with those of
    the routers it includes), for :class:`AnswerCap`."""
    return frozenset(
        str(context.path)
        for context in iter_route_contexts(routes)
        if isinstance(context.original_route, AnswerRoute)
    )


class LimitsUnavailableError(Exception):
    """The limits cannot be counted (their shared store is down and the operator chose to
    refuse then); the message says why."""


class RequestLimit(Protocol):
    """Requests per minute per client, as :class:`AccessControl` asks: ``take`` one (None if
    allowed, else the seconds until one would be), or ``wait`` without taking. ``take`` for a
    request that would run an answer (``answering``) may raise
    :class:`LimitsUnavailableError`."""

    per_minute: int

    async def take(self, client: str, *, answering: bool = False) -> float | None: ...

    async def wait(self, client: str) -> float | None: ...


class SlotLimit(Protocol):
    """``limit`` answers at once, as :class:`AnswerCap` asks: ``acquire`` gives a lease, or
    None when all are taken (or raises :class:`LimitsUnavailableError`); ``release`` gives it
    back and never raises."""

    limit: int

    async def acquire(self) -> object | None: ...

    async def release(self, lease: object, /) -> None: ...


class RateLimiter:
    """Token buckets of ``per_minute`` requests, one per client, at most ``max_clients``, in
    this process (a :class:`RequestLimit`)."""

    def __init__(
        self,
        per_minute: int,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = MAX_BUCKETS,
    ) -> None:
        self.per_minute = per_minute
        self.max_clients = max_clients
        self._rate = per_minute / 60.0
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # (tokens, when)

    def __len__(self) -> int:
        return len(self._buckets)

    def wait_s(self, client: str) -> float | None:
        """None when ``client`` has a request left, else the seconds until it will; takes
        nothing."""
        tokens = self._tokens(client, self._clock())
        return None if tokens >= 1.0 else (1.0 - tokens) / self._rate

    def check(self, client: str) -> float | None:
        """Take one request from ``client``'s bucket: None when allowed, else the seconds
        until it would be."""
        now = self._clock()
        tokens = self._tokens(client, now)
        allowed = tokens >= 1.0
        self._keep(client, (tokens - 1.0 if allowed else tokens), now)
        return None if allowed else (1.0 - tokens) / self._rate

    async def take(self, client: str, *, answering: bool = False) -> float | None:
        return self.check(client)

    async def wait(self, client: str) -> float | None:
        return self.wait_s(client)

    def _tokens(self, client: str, now: float) -> float:
        tokens, then = self._buckets.get(client, (float(self.per_minute), now))
        return min(float(self.per_minute), tokens + (now - then) * self._rate)

    def _keep(self, client: str, tokens: float, now: float) -> None:
        self._buckets[client] = (tokens, now)
        self._buckets.move_to_end(client)
        while len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)


class AnswerSlots:
    """At most ``limit`` answers in progress in this process (a :class:`SlotLimit`)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_use = 0

    def try_take(self) -> bool:
        if self.in_use >= self.limit:
            return False
        self.in_use += 1  # on the event loop: no other coroutine runs between check and add
        return True

    def give_back(self) -> None:
        self.in_use -= 1

    async def acquire(self) -> object | None:
        return self if self.try_take() else None

    async def release(self, lease: object, /) -> None:
        self.give_back()


@dataclass
class AccessControl:
    """ASGI middleware applying keys and the rate limit (each optional), before the request
    is read; ``on_reject`` hears each refusal's reason (``unauthorized``, ``rate_limited``,
    ``auth_failures``), for the metrics. ``auth_failures`` limits wrong keys per address."""

    app: ASGIApp
    keys: Collection[str] = ()
    rate: RequestLimit | None = None
    auth_failures: RequestLimit | None = None
    on_reject: Callable[[str], None] | None = None
    answering: Collection[str] = ()  # the answering routes' paths (:func:`answer_paths`)

    def __post_init__(self) -> None:
        self._key_bytes = [key.encode() for key in self.keys]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            refused = await self._refusal_for(scope)
        except LimitsUnavailableError as error:
            refused = _unavailable(error)
        if refused is None:
            await self.app(scope, receive, send)
        else:
            await _refuse(self.on_reject, scope, receive, send, *refused)

    async def _refusal_for(self, scope: Scope) -> _Refusal | None:
        """Why this request is refused (status, reason, message, headers), or None."""
        path = scope.get("path", "")
        if scope["type"] != "http" or _open(path):
            return None
        if self._key_bytes and _log_page(path):
            # With keys the page needs none: it holds no data and never reads the logs
            # folder. Without keys it does look the id up, so it is rate limited below.
            return None
        if self._key_bytes and self.auth_failures is not None:
            wait_s = await self.auth_failures.wait(_address(scope))
            if wait_s is not None:
                message = (
                    f"more than {self.auth_failures.per_minute} requests without a valid API "
                    f"key from this address in a minute; try again in {math.ceil(wait_s)} s "
                    "with a valid key (REACTOME_ANSWERS_AUTH_FAILURES_PER_MINUTE)"
                )
                return 429, "auth_failures", message, _retry_after(wait_s)
        client = self._client(scope)
        if client is None:
            if self.auth_failures is not None:
                await self.auth_failures.take(_address(scope))
            return self._unauthorized(scope)
        if self.rate is not None:
            answering = _runs_an_answer(scope, self.answering)
            wait_s = await self.rate.take(client, answering=answering)
            if wait_s is not None:
                message = (
                    f"more than {self.rate.per_minute} requests in a minute; try again in "
                    f"{math.ceil(wait_s)} s (REACTOME_ANSWERS_RATE_LIMIT)"
                )
                return 429, "rate_limited", message, _retry_after(wait_s)
        return None

    def _client(self, scope: Scope) -> str | None:
        """Who is asking: a digest of its key (None when keys are needed and it sent no
        right one), or its address when the server takes no keys."""
        if not self._key_bytes:
            return _address(scope)
        given = _bearer(scope)
        if given is None:
            return None
        # Compared with every key in constant time: how long it takes tells nothing.
        matched = False
        for key in self._key_bytes:
            matched |= hmac.compare_digest(given, key)
        if not matched:
            return None
        return "key:" + hashlib.sha256(given).hexdigest()[:32]

    @staticmethod
    def _unauthorized(scope: Scope) -> _Refusal:
        if _bearer(scope) is None:
            message = (
                "this server needs an API key: send 'Authorization: Bearer KEY' "
                "(its operator sets the keys in REACTOME_ANSWERS_API_KEYS)"
            )
        else:
            message = "the API key sent is not one this server accepts; check it and send again"
        return 401, "unauthorized", message, {"WWW-Authenticate": "Bearer", **_CLOSE}


@dataclass
class AnswerCap:
    """ASGI middleware holding POST requests to ``paths`` (:func:`answer_paths`) to ``slots``;
    it must sit inside :class:`app._http.BodyLimits`, so that only a request whose body has
    arrived takes one. ``on_reject`` hears ``too_many_answers``."""

    app: ASGIApp
    slots: SlotLimit
    paths: Collection[str]
    on_reject: Callable[[str], None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _runs_an_answer(scope, self.paths):
            await self.app(scope, receive, send)
            return
        if scope.get("path") == MCP_PATH:  # the body says whether it calls the answer tool
            body, receive = await _read_whole(receive)
            if not calls_the_answer_tool(body):
                await self.app(scope, receive, send)
                return
        try:
            lease = await self.slots.acquire()
        except LimitsUnavailableError as error:
            await _refuse(self.on_reject, scope, receive, send, *_unavailable(error))
            return
        if lease is None:
            message = (
                f"this server is writing as many answers as it takes at once "
                f"({self.slots.limit}); try again shortly (REACTOME_ANSWERS_MAX_CONCURRENT_ANSWERS)"
            )
            refused = (429, "too_many_answers", message, _retry_after(_BUSY_RETRY_S))
            await _refuse(self.on_reject, scope, receive, send, *refused)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            # A client that left cancels the scope around us; the slot is given back anyway.
            with anyio.CancelScope(shield=True):
                await self.slots.release(lease)


async def _refuse(
    on_reject: Callable[[str], None] | None,
    scope: Scope,
    receive: Receive,
    send: Send,
    status: int,
    code: str,
    message: str,
    headers: dict[str, str],
) -> None:
    if on_reject is not None:
        on_reject(code)
    await refusal(scope, status, code, message, headers)(scope, receive, send)


def _unavailable(error: LimitsUnavailableError) -> _Refusal:
    return 503, "limits_unavailable", str(error), _retry_after(_UNAVAILABLE_RETRY_S)


def _retry_after(seconds: float) -> dict[str, str]:
    return {"Retry-After": str(math.ceil(seconds)), **_CLOSE}


def _runs_an_answer(scope: Scope, paths: Collection[str]) -> bool:
    """Whether ``scope`` may be a request that runs an answer, before its body is read: a POST
    to one of ``paths`` (:func:`answer_paths`, and ``/mcp`` when it is served, whose body the
    cap reads to be sure). What the cap holds and refuse mode refuses."""
    return scope["type"] == "http" and scope["method"] == "POST" and scope.get("path") in paths


async def _read_whole(receive: Receive) -> tuple[bytes, Receive]:
    """The request body, and a ``receive`` that gives it to the app again."""
    chunks: list[bytes] = []
    after: list[Message] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client left: the app hears it next
            after.append(message)
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    return body, replaying(body, receive, *after)


def _open(path: str) -> bool:
    return path in _OPEN_PATHS or path.startswith(_OPEN_PREFIX)


def _log_page(path: str) -> bool:
    request_id = path.removeprefix(_LOG_PAGE_PREFIX)
    return request_id != path and bool(request_id) and "/" not in request_id


def _address(scope: Scope) -> str:
    peer = scope.get("client")
    return f"address:{peer[0] if peer else 'unknown'}"


def _bearer(scope: Scope) -> bytes | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = value.partition(b" ")
            token = bytes(token).strip()
            return token if scheme.lower() == b"bearer" and token else None
    return None
