"""Who may ask, how often, and how many answers at once: checked before a request is read.

- API keys (``REACTOME_ANSWERS_API_KEYS``): every path but the web page (``/``, its assets
  under ``/static/``) and ``/healthz`` needs ``Authorization: Bearer KEY``; otherwise 401.
- A rate limit (``REACTOME_ANSWERS_RATE_LIMIT``, requests per minute) per key, or per client
  address when there are no keys: a token bucket that holds a minute's worth, so a client may
  spend its minute at once and then gets one request per 60/limit seconds; beyond it, 429
  with ``Retry-After``.
- A cap on answers in progress (``REACTOME_ANSWERS_MAX_CONCURRENT_ANSWERS``): a request to an
  answering endpoint over the cap gets 429 with ``Retry-After`` at once, while the answers
  already running go on. A streamed answer holds its place until its last byte is sent.

Refusals have the ``{"error": {code, message}}`` shape and close the connection, as in
:mod:`app._http`. A key is never logged or repeated in a message; buckets are kept by a
digest of the key.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

from app._errors import error_response

__all__ = ["ANSWER_PATHS", "AccessControl", "AnswerSlots", "RateLimiter"]

# The endpoints that run an answer (and so count against the cap).
ANSWER_PATHS = frozenset({"/v1/answer", "/v1/answer/stream", "/v1/chat/completions", "/api/chat"})
_OPEN_PATHS = frozenset({"/", "/healthz"})
_OPEN_PREFIX = "/static/"
_CLOSE = {"Connection": "close"}
# A rejected client should not come straight back; an answer takes seconds.
_BUSY_RETRY_S = 1
# Buckets of clients that have not asked for a while are full again: forgotten past this many.
_MAX_BUCKETS = 10_000


class RateLimiter:
    """Token buckets of ``per_minute`` requests, one per client."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self._rate = per_minute / 60.0
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # client -> (tokens, when)

    def check(self, client: str) -> float | None:
        """Take one request from ``client``'s bucket: None when allowed, else the seconds
        until it would be."""
        now = self._clock()
        tokens, then = self._buckets.get(client, (float(self.per_minute), now))
        tokens = min(float(self.per_minute), tokens + (now - then) * self._rate)
        if tokens < 1.0:
            self._buckets[client] = (tokens, now)
            return (1.0 - tokens) / self._rate
        if len(self._buckets) >= _MAX_BUCKETS and client not in self._buckets:
            self._forget_full(now)
        self._buckets[client] = (tokens - 1.0, now)
        return None

    def _forget_full(self, now: float) -> None:
        full = [
            client
            for client, (tokens, then) in self._buckets.items()
            if tokens + (now - then) * self._rate >= self.per_minute
        ]
        for client in full:
            del self._buckets[client]


class AnswerSlots:
    """At most ``limit`` answers in progress in this process."""

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


@dataclass
class AccessControl:
    """ASGI middleware applying keys, the rate limit and the answer cap (each optional);
    ``on_reject`` hears each refusal's reason (``unauthorized``, ``rate_limited``,
    ``too_many_answers``), for the metrics."""

    app: ASGIApp
    keys: Collection[str] = ()
    rate: RateLimiter | None = None
    slots: AnswerSlots | None = None
    on_reject: Callable[[str], None] | None = None

    def __post_init__(self) -> None:
        self._key_bytes = [key.encode() for key in self.keys]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path in _OPEN_PATHS or path.startswith(_OPEN_PREFIX):
            await self.app(scope, receive, send)
            return
        client = self._client(scope)
        if client is None:
            await self._refuse(scope, receive, send, *self._unauthorized(scope))
            return
        if self.rate is not None:
            wait_s = self.rate.check(client)
            if wait_s is not None:
                message = (
                    f"more than {self.rate.per_minute} requests in a minute; try again in "
                    f"{math.ceil(wait_s)} s (REACTOME_ANSWERS_RATE_LIMIT)"
                )
                headers = {"Retry-After": str(math.ceil(wait_s)), **_CLOSE}
                await self._refuse(scope, receive, send, 429, "rate_limited", message, headers)
                return
        answering = scope["method"] == "POST" and path in ANSWER_PATHS
        if not answering or self.slots is None:
            await self.app(scope, receive, send)
            return
        if not self.slots.try_take():
            message = (
                f"this server is writing as many answers as it takes at once "
                f"({self.slots.limit}); try again shortly (REACTOME_ANSWERS_MAX_CONCURRENT_ANSWERS)"
            )
            headers = {"Retry-After": str(_BUSY_RETRY_S), **_CLOSE}
            await self._refuse(scope, receive, send, 429, "too_many_answers", message, headers)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.slots.give_back()

    def _client(self, scope: Scope) -> str | None:
        """Who is asking: a digest of its key (None when keys are needed and it sent no
        right one), or its address when the server takes no keys."""
        if not self._key_bytes:
            peer = scope.get("client")
            return f"address:{peer[0] if peer else 'unknown'}"
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
    def _unauthorized(scope: Scope) -> tuple[int, str, str, dict[str, str]]:
        if _bearer(scope) is None:
            message = (
                "this server needs an API key: send 'Authorization: Bearer KEY' "
                "(its operator sets the keys in REACTOME_ANSWERS_API_KEYS)"
            )
        else:
            message = "the API key sent is not one this server accepts; check it and send again"
        return 401, "unauthorized", message, {"WWW-Authenticate": "Bearer", **_CLOSE}

    async def _refuse(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        status: int,
        code: str,
        message: str,
        headers: dict[str, str],
    ) -> None:
        if self.on_reject is not None:
            self.on_reject(code)
        await error_response(status, code, message, headers)(scope, receive, send)


def _bearer(scope: Scope) -> bytes | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = value.partition(b" ")
            token = bytes(token).strip()
            return token if scheme.lower() == b"bearer" and token else None
    return None
