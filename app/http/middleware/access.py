"""Who may ask and how often (checked before a request is read), and how many answers at
once (checked once its body has arrived).

- API keys (``REACTOME_ANSWERS_API_KEYS``): every path but the web page (``/``, its assets
  under ``/static/``), the log page (``/logs/{request_id}``, which holds no data: its script
  fetches ``/v1/logs/{request_id}`` with the key), ``/healthz`` and ``/v1/limits`` needs
  ``Authorization: Bearer KEY``; otherwise 401.
  The key is checked first: a valid key is served whatever else came from its address.
  Requests without one are counted per client address; past
  ``REACTOME_ANSWERS_AUTH_FAILURES_PER_MINUTE`` in a minute they get 429 instead of 401
  until the minute refills (decision 0020 says why a valid key is not held back too).
- A rate limit (``REACTOME_ANSWERS_RATE_LIMIT``, requests per minute) per key, or per client
  address when there are no keys: a token bucket that holds a minute's worth, so a client may
  spend its minute at once and then gets one request per 60/limit seconds; beyond it, 429
  with ``Retry-After``. The client address is the connection's peer unless the operator
  names proxies to believe (``REACTOME_ANSWERS_FORWARDED_ALLOW_IPS``, applied by uvicorn).
  At ``/mcp`` only tool calls and resource reads count (:class:`McpLimits`).
- A cap on answers in progress (``REACTOME_ANSWERS_MAX_CONCURRENT_ANSWERS``,
  :class:`AnswerCap`): a request to an answering route (an :class:`AnswerRoute`, what an
  answering router makes; :func:`answer_paths` finds them; at ``/mcp``, an MCP message that
  calls the answer tool, :class:`McpLimits`) over the cap gets 429 with ``Retry-After`` at
  once (at ``/mcp``, a tool result flagged as an error that says why), while the answers
  already running go on. The slot is taken only once the whole body has arrived (the cap
  sits inside :class:`app.http.middleware.transport.BodyLimits`), so a client that sends
  headers and stalls holds none; a streamed answer holds its place until its last byte is
  sent, any answer until its client leaves.

Counted in the process by default; with ``REACTOME_ANSWERS_REDIS_URL`` the cap, the rate limit and
failed keys are counted across every worker and instance sharing that Redis
(:mod:`app.http.middleware.shared_limits`, through the :class:`RequestLimit` and :class:`SlotLimit`
shapes here). When it cannot be reached and the operator chose to refuse rather than count per
process, a request gets 503 (``limits_unavailable``).

Refusals have the shape of the route's protocol (:func:`app.http.errors.refusal`) and close the
connection. A key is never logged or repeated in a message; buckets are kept by a digest of
the key, and at most :data:`MAX_BUCKETS` of them (the least recently used go first).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import math
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

import anyio
from fastapi.routing import APIRoute, iter_route_contexts
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from app.http.errors import refusal
from app.http.protocols.mcp_wire import MCP_PATH, Posted

__all__ = [
    "KEY_ACCEPTED",
    "MAX_BUCKETS",
    "AccessControl",
    "AnswerCap",
    "AnswerRoute",
    "AnswerSlots",
    "LimitsUnavailableError",
    "McpLimits",
    "RateLimiter",
    "RequestLimit",
    "SlotLimit",
    "answer_paths",
    "cap_full_message",
    "mcp_limits",
]

# Set on the scope of every request to a server that takes keys: whether it sent a valid
# one. What only key holders may read on an open path (/healthz's details) asks it.
KEY_ACCEPTED = "reactome_answers.key_accepted"
# A refusal: status, reason (for the metrics), message, headers.
_Refusal = tuple[int, str, str, dict[str, str]]

# What anyone may read: the page, whether the server is up, and the limits the page checks a
# question against before sending it.
_OPEN_PATHS = frozenset({"/", "/healthz", "/v1/limits"})
_OPEN_PREFIX = "/static/"
# The log page (app/http/routes/log_page.py): one file for every id, so a browser, which sends
# no key when it follows a link, can load it; the log itself is at /v1/logs/{id}, behind the keys.
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
    back and never raises. ``fleet``: whether the count is the fleet's (shared in Redis)
    right now, rather than this process's, for the refusal to say whose cap is full."""

    limit: int

    @property
    def fleet(self) -> bool: ...

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

    fleet = False

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
        if scope["type"] != "http":
            return None
        # The key first, in the process: a valid key is served whatever others sent from its
        # address (decision 0020), and only requests without one spend the address's minute.
        client = self._client(scope)
        if self._key_bytes:
            scope[KEY_ACCEPTED] = client is not None  # /healthz shows its details only then
        if _open(path):
            return None
        if self._key_bytes and _log_page(path):
            # With keys the page needs none: it holds no data and never reads the logs
            # folder. Without keys it does look the id up, so it is rate limited below.
            return None
        if client is None:
            return await self._without_a_valid_key(scope)
        if self.rate is not None and path == MCP_PATH:
            # Only the body says whether an MCP message counts: the endpoint decides, once
            # the body limits have read it (McpLimits).
            limits = mcp_limits(scope)
            limits.rate, limits.client, limits.on_rate_reject = self.rate, client, self.on_reject
        elif self.rate is not None:
            answering = _runs_an_answer(scope, self.answering)
            wait_s = await self.rate.take(client, answering=answering)
            if wait_s is not None:
                return _rate_limited(self.rate, wait_s)
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

    async def _without_a_valid_key(self, scope: Scope) -> _Refusal:
        """401, or 429 once the address has sent more than its minute's worth of missing
        or wrong keys."""
        if self.auth_failures is not None:
            wait_s = await self.auth_failures.take(_address(scope))
            if wait_s is not None:
                message = (
                    f"more than {self.auth_failures.per_minute} requests without a valid API "
                    f"key from this address in a minute; send a valid key, or try again in "
                    f"{math.ceil(wait_s)} s (REACTOME_ANSWERS_AUTH_FAILURES_PER_MINUTE)"
                )
                return 429, "auth_failures", message, _retry_after(wait_s)
        return self._unauthorized(scope)

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
    it must sit inside :class:`app.http.middleware.transport.BodyLimits`, so that only a request
    whose body has arrived takes one. ``on_reject`` hears ``too_many_answers``."""

    app: ASGIApp
    slots: SlotLimit
    paths: Collection[str]
    on_reject: Callable[[str], None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _runs_an_answer(scope, self.paths):
            await self.app(scope, receive, send)
            return
        if scope.get("path") == MCP_PATH:
            # Only the body says whether an MCP message runs an answer: the endpoint holds
            # it to the slots once it has read the body (McpLimits), and refuses in MCP's way.
            limits = mcp_limits(scope)
            limits.slots, limits.on_cap_reject = self.slots, self.on_reject
            await self.app(scope, receive, send)
            return
        try:
            lease = await self.slots.acquire()
        except LimitsUnavailableError as error:
            await _refuse(self.on_reject, scope, receive, send, *_unavailable(error))
            return
        if lease is None:
            await _refuse(self.on_reject, scope, receive, send, *_too_many_answers(self.slots))
            return
        try:
            await self.app(scope, receive, send)
        finally:
            # A client that left cancels the scope around us; the slot is given back anyway.
            with anyio.CancelScope(shield=True):
                await self.slots.release(lease)


# Where AccessControl and AnswerCap leave a POST /mcp's limits for its endpoint.
_MCP_LIMITS = "reactome_answers.mcp_limits"


@dataclass
class McpLimits:
    """The limits a ``POST /mcp`` is held to once its body has been read, by the endpoint
    (:class:`app.http.routes.mcp.MCPTransport`), since only the body says whether an MCP message
    counts against the rate limit (a tool call or a resource read: a handshake, a listing or a
    ping does not) and whether it runs an answer (a call of the answer tool). The middlewares
    leave what they would apply here: :class:`AccessControl` the rate limit and the client it
    found by the key it checked, :class:`AnswerCap` its slots."""

    rate: RequestLimit | None = None
    client: str = ""
    on_rate_reject: Callable[[str], None] | None = None
    slots: SlotLimit | None = None
    on_cap_reject: Callable[[str], None] | None = None

    async def rate_refusal(self, posted: Posted) -> _Refusal | None:
        """Take one request from the client's minute if ``posted`` counts; why not, or None."""
        if self.rate is None or not posted.counts:
            return None
        try:
            wait_s = await self.rate.take(self.client, answering=posted.calls_the_answer_tool)
            refused = None if wait_s is None else _rate_limited(self.rate, wait_s)
        except LimitsUnavailableError as error:
            refused = _unavailable(error)
        if refused is not None and self.on_rate_reject is not None:
            self.on_rate_reject(refused[1])
        return refused

    @contextlib.asynccontextmanager
    async def answer_slot(self, posted: Posted) -> AsyncIterator[_Refusal | None]:
        """Hold a slot of the cap for the block if ``posted`` runs an answer, giving it back
        however the block ends; or yield why there is none (then the block must refuse)."""
        if self.slots is None or not posted.calls_the_answer_tool:
            yield None
            return
        try:
            lease = await self.slots.acquire()
        except LimitsUnavailableError as error:
            refused: _Refusal | None = _unavailable(error)
        else:
            refused = None if lease is not None else _too_many_answers(self.slots)
        if refused is not None:
            if self.on_cap_reject is not None:
                self.on_cap_reject(refused[1])
            yield refused
            return
        try:
            yield None
        finally:
            # A client that left cancels the scope around us; the slot is given back anyway.
            with anyio.CancelScope(shield=True):
                await self.slots.release(lease)


def mcp_limits(scope: Scope) -> McpLimits:
    """The limits left for this ``POST /mcp`` (none when no middleware left any)."""
    limits = scope.get(_MCP_LIMITS)
    if not isinstance(limits, McpLimits):
        limits = scope[_MCP_LIMITS] = McpLimits()
    return limits


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


def cap_full_message(slots: SlotLimit) -> str:
    """Why an answer over the cap is refused, naming whose cap is full: the fleet's (counted
    in Redis) or this server process's (no Redis, or Redis down and counted per process).
    An operator reading it knows whether more workers or more instances would help."""
    setting = "REACTOME_ANSWERS_MAX_CONCURRENT_ANSWERS"
    if slots.fleet:
        return (
            f"the servers sharing this one's limits are writing as many answers as they take "
            f"at once between them ({slots.limit}); try again shortly ({setting}, counted "
            "across the fleet)"
        )
    return (
        f"this server process is writing as many answers as it takes at once "
        f"({slots.limit}); try again shortly ({setting}, counted per server process)"
    )


def _rate_limited(rate: RequestLimit, wait_s: float) -> _Refusal:
    message = (
        f"more than {rate.per_minute} requests in a minute; try again in "
        f"{math.ceil(wait_s)} s (REACTOME_ANSWERS_RATE_LIMIT)"
    )
    return 429, "rate_limited", message, _retry_after(wait_s)


def _too_many_answers(slots: SlotLimit) -> _Refusal:
    return 429, "too_many_answers", cap_full_message(slots), _retry_after(_BUSY_RETRY_S)


def _unavailable(error: LimitsUnavailableError) -> _Refusal:
    return 503, "limits_unavailable", str(error), _retry_after(_UNAVAILABLE_RETRY_S)


def _retry_after(seconds: float) -> dict[str, str]:
    return {"Retry-After": str(math.ceil(seconds)), **_CLOSE}


def _runs_an_answer(scope: Scope, paths: Collection[str]) -> bool:
    """Whether ``scope`` may be a request that runs an answer, before its body is read: a POST
    to one of ``paths`` (:func:`answer_paths`, and ``/mcp`` when it is served, whose body the
    cap reads to be sure). What the cap holds and refuse mode refuses."""
    return scope["type"] == "http" and scope["method"] == "POST" and scope.get("path") in paths


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
