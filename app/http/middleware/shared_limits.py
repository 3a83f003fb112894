"""The answer cap, the rate limit and failed keys counted across a fleet, in a Redis (or
Valkey) that every worker and instance shares (``REACTOME_ANSWERS_REDIS_URL``).

Each check is one round trip: a Lua script that reads Redis's own clock (so the instances'
clocks need not agree), decides, and writes, atomically.

- A rate limit is the same token bucket as :class:`app.http.middleware.access.RateLimiter`,
  one hash per client (``PREFIX:rate:CLIENT``, ``PREFIX:auth:CLIENT``) that expires once it
  would be full again.
- Answer slots are leases: members of one sorted set (``PREFIX:answers``) scored by when they
  expire. A worker renews the leases it holds every third of ``REACTOME_ANSWERS_ANSWER_LEASE_S``;
  the leases of a worker that died (``kill -9``) are not renewed, and the next admission after
  they expire drops them, so its slots come back within one lease of its last renewal. A
  lease names the host and process holding it, for an operator reading the set.

When Redis cannot be reached, :class:`SharedLimits` goes *down*: every check then counts in
the process (``REACTOME_ANSWERS_WHEN_REDIS_DOWN=per-process``, the default) or refuses with
:class:`LimitsUnavailableError` (``refuse``), without waiting on Redis again. A probe pings it
every :data:`PROBE_EVERY_S`; once it answers, the leases held meanwhile are written to the set
and the shared limits resume.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import secrets
import socket
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

import anyio
from redis import asyncio as redis_asyncio
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from app.http.middleware.access import AnswerSlots, LimitsUnavailableError, RateLimiter
from pipelines.core.redaction import one_line, warn_not_done

__all__ = [
    "PROBE_EVERY_S",
    "REDIS_TIMEOUT_S",
    "Lease",
    "SharedBuckets",
    "SharedLimits",
    "SharedSlots",
    "redis_location",
]

# While Redis is down, how often each worker asks whether it is back: the shared limits
# resume within this (plus one connection attempt) of Redis answering again.
PROBE_EVERY_S = 1.0
# One command's limit, connecting included. A check runs before every request: a Redis that
# hangs must not hold requests longer than this before they are counted without it.
REDIS_TIMEOUT_S = 1.0

WhenDown = Literal["per-process", "refuse"]

# KEYS[1]: the client's bucket. ARGV: capacity (requests a minute), 1 to take one or 0 to
# look. Returns -1 when a request is left, else the milliseconds until one will be.
_BUCKET = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local capacity = tonumber(ARGV[1])
local per_ms = capacity / 60000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or capacity
local at = tonumber(state[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - at) * per_ms)
if tokens < 1 then
  return math.ceil((1 - tokens) / per_ms)
end
if ARGV[2] == '1' then
  tokens = tokens - 1
  redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
  redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - tokens) / per_ms) + 1000)
end
return -1
"""

# The set lives as long as its last lease, whatever lease length the instance that wrote
# last was given: an instance with a shorter one must not end the others' leases early.
_KEEP_SET_UNTIL_LAST_LEASE = """
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if last[2] then
  redis.call('PEXPIREAT', KEYS[1], math.floor(tonumber(last[2])))
end
"""
# KEYS[1]: the leases. ARGV: the cap, the lease in ms, the new lease's name. Drops the
# expired leases, then adds this one if fewer than the cap remain. Returns 1 if taken.
_TAKE_SLOT = (
    """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
"""
    + _KEEP_SET_UNTIL_LAST_LEASE
    + """
return 1
"""
)

# KEYS[1]: the leases. ARGV: the lease in ms, how many names to renew, those names (the
# leases this worker holds: each expires a lease from now, one taken while Redis was down is
# added), then the names to drop (given back while Redis was down).
_RENEW_SLOTS = (
    """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local until_ms = now + tonumber(ARGV[1])
local renewing = tonumber(ARGV[2])
for i = 3, 2 + renewing do
  redis.call('ZADD', KEYS[1], until_ms, ARGV[i])
end
for i = 3 + renewing, #ARGV do
  redis.call('ZREM', KEYS[1], ARGV[i])
end
"""
    + _KEEP_SET_UNTIL_LAST_LEASE
    + """
return renewing
"""
)


# Any Redis error, a refused write (a replica after a failover, out of memory) as much as a
# lost connection: the probe makes the same kind of write, so it only resumes once they work.
_UNREACHABLE = (RedisError, OSError, asyncio.TimeoutError)
# The probe's bucket: a write like every check's, never near its capacity.
_PROBE_CAPACITY = 10**9
# What a refused client is told; /healthz and the server's log say where and why.
_REFUSAL = (
    "this server cannot count its limits right now (the store they are shared in cannot be "
    "reached), so it answers nothing; try again shortly"
)


class _RedisDownError(Exception):
    """Redis cannot be reached; count in the process instead."""


def redis_location(url: str) -> str:
    """``url`` without its user name and password, as it may be shown and logged."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"unix://{parts.path}"
    host = parts.hostname or "localhost"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path or ''}"


class SharedLimits:
    """The Redis the limits share, and whether it answers. For the metrics,
    ``on_without_redis`` hears ``per_process`` or ``refused`` for each check made without it,
    and ``on_change`` whether the limits are shared, each time that is found out."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "reactome-answers",
        when_down: WhenDown = "per-process",
        lease_s: float = 15.0,
        on_without_redis: Callable[[str], None] | None = None,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        self.location = redis_location(url)
        self.prefix = prefix
        self.when_down = when_down
        self.lease_s = lease_s
        self.down_why: str | None = None
        self._on_without_redis = on_without_redis
        self._on_change = on_change
        # One retry, on a lost connection only: a pooled connection that Redis closed (a
        # restart) fails once, and the retry opens a fresh one. Not on a timeout: the script
        # may have run, and running it twice would take two requests or two slots.
        self._redis = redis_asyncio.Redis.from_url(
            url,
            socket_connect_timeout=REDIS_TIMEOUT_S,
            socket_timeout=REDIS_TIMEOUT_S,
            retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
        )
        self._bucket = self._redis.register_script(_BUCKET)
        self._take_slot = self._redis.register_script(_TAKE_SLOT)
        self._renew = self._redis.register_script(_RENEW_SLOTS)
        self._answers = self._key("answers")
        self._probe = self._key("probe")
        self._lease_ms = round(lease_s * 1000)
        self._slots: list[SharedSlots] = []
        # Host, process and a token: a restarted worker may get a dead one's process id.
        self._holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self._numbers = itertools.count(1)

    # --- what the middlewares ask -------------------------------------------------------

    def buckets(self, name: str, per_minute: int) -> SharedBuckets:
        """Rate-limit buckets named ``name`` (``rate``, ``auth``), ``per_minute`` each."""
        return SharedBuckets(self, name, per_minute)

    def slots(self, limit: int) -> SharedSlots:
        """``limit`` answer slots for the whole fleet."""
        slots = SharedSlots(self, limit)
        self._slots.append(slots)
        return slots

    def describe(self) -> dict[str, str]:
        """How the limits are counted now, for ``/healthz``."""
        if self.down_why is None:
            return {"counted": "shared", "redis": self.location}
        counted = "refusing" if self.when_down == "refuse" else "per-process"
        return {"counted": counted, "redis": self.location, "degraded": self.down_why}

    async def probe(self) -> bool:
        """Ask Redis now (``/healthz``, :meth:`keep_up`), with a write like the checks';
        True when it works. It working again resumes the shared limits; it failing takes
        them down."""
        try:
            await self._bucket(keys=[self._probe], args=[_PROBE_CAPACITY, 1])
        except _UNREACHABLE as error:
            self._went_down(error)
            return False
        if self.down_why is not None:
            self.down_why = None
            await self.renew()  # the leases taken meanwhile count again at once
            print(
                f"reactome-answers: Redis at {self.location} answers again: the limits are "
                "counted across the fleet again",
                file=sys.stderr,
            )
        if self._on_change is not None:
            self._on_change(self.down_why is None)
        return True

    async def renew(self) -> bool:
        """Renew the leases held here and drop those given back while Redis was down; False
        when there were none."""
        sent = [await slots.renew() for slots in self._slots]
        return any(sent)

    async def keep_up(self) -> None:
        """Renew the leases every third of a lease (probing instead when there are none, so
        an idle worker notices an outage too) and, while Redis is down, probe it every
        :data:`PROBE_EVERY_S`; runs until cancelled."""
        renew_every = self.lease_s / 3
        renew_at = anyio.current_time() + renew_every
        await self.probe()  # whether the limits are shared is known before a request asks
        while True:
            await anyio.sleep(PROBE_EVERY_S)
            try:
                if self.down_why is not None:
                    await self.probe()
                elif anyio.current_time() >= renew_at:
                    if not await self.renew():
                        await self.probe()
                    renew_at = anyio.current_time() + renew_every
            except Exception as error:  # a bug must not end the renewals: leases would lapse
                warn_not_done("the limits' leases not renewed", error)

    async def aclose(self) -> None:
        await self._redis.aclose()

    # --- the round trips ----------------------------------------------------------------

    async def bucket(
        self, name: str, client: str, per_minute: int, *, take: bool, answering: bool = False
    ) -> int:
        """Milliseconds until ``client`` may ask again, or -1 if it may now (taking one
        request from its bucket when ``take``); ``answering``: for a request that would run
        an answer."""
        keys, args = [self._key(name, client)], [per_minute, int(take)]
        return await self._call(lambda: self._bucket(keys=keys, args=args), answering=answering)

    async def take_slot(self, limit: int, lease: str) -> bool:
        """Whether ``lease`` was added to the answers in progress (fewer than ``limit``)."""
        args: list[int | str] = [limit, self._lease_ms, lease]
        command = lambda: self._take_slot(keys=[self._answers], args=args)  # noqa: E731
        return bool(await self._call(command, answering=True))

    async def renew_slots(self, leases: list[str], drop: list[str]) -> bool:
        """``leases`` expire a lease from now (those missing, taken while Redis was down,
        are added) and ``drop`` are given back, in one round trip; False when that could not
        be done. Never raises: Redis failing takes the limits down."""
        if self.down_why is not None:
            return False
        args: list[int | str] = [self._lease_ms, len(leases), *leases, *drop]
        try:
            await self._renew(keys=[self._answers], args=args)
        except _UNREACHABLE as error:
            self._went_down(error)
            return False
        return True

    def lease_name(self) -> str:
        return f"{self._holder}:{next(self._numbers)}"

    async def _call(self, command: Callable[[], Awaitable[int]], *, answering: bool) -> int:
        """``command``'s reply; :class:`_RedisDownError` when Redis is down (known, or found
        now), or :class:`LimitsUnavailableError` for a request that would run an answer when
        the operator chose to refuse those then (the rest, ``/metrics`` and the logs among
        them, are counted in the process)."""
        if self.down_why is None:
            try:
                return await command()
            except _UNREACHABLE as error:
                self._went_down(error)
        if self.when_down == "refuse" and answering:
            self._note("refused")
            raise LimitsUnavailableError(_REFUSAL)
        self._note("per_process")
        raise _RedisDownError

    def _key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    def _went_down(self, error: BaseException) -> None:
        counting = "refusing answers" if self.when_down == "refuse" else "counting per process"
        news = self.down_why is None
        self.down_why = (
            f"Redis at {self.location} cannot be reached ({one_line(error, 160)}); "
            f"{counting} until it answers"
        )
        if news:  # one line when it goes, not one per request while it is gone
            print(f"reactome-answers: warning: {self.down_why}", file=sys.stderr)
        if self._on_change is not None:
            self._on_change(False)

    def _note(self, outcome: str) -> None:
        if self._on_without_redis is not None:
            self._on_without_redis(outcome)


class SharedBuckets:
    """Token buckets of ``per_minute`` requests per client, in Redis, falling back to
    :class:`app.http.middleware.access.RateLimiter` in the process while it is down."""

    def __init__(self, shared: SharedLimits, name: str, per_minute: int) -> None:
        self.per_minute = per_minute
        self._shared = shared
        self._name = name
        self._local = RateLimiter(per_minute)

    async def take(self, client: str, *, answering: bool = False) -> float | None:
        try:
            return _wait(
                await self._shared.bucket(
                    self._name, client, self.per_minute, take=True, answering=answering
                )
            )
        except _RedisDownError:
            return self._local.check(client)

    async def wait(self, client: str) -> float | None:
        try:
            return _wait(await self._shared.bucket(self._name, client, self.per_minute, take=False))
        except _RedisDownError:
            return self._local.wait_s(client)


def _wait(reply: int) -> float | None:
    return None if reply < 0 else reply / 1000


@dataclass(frozen=True)
class Lease:
    name: str
    local: bool  # taken while Redis was down, from the process's own slots


class SharedSlots:
    """``limit`` answer slots across the fleet, as leases in Redis; the process's own
    :class:`app.http.middleware.access.AnswerSlots` while it is down."""

    def __init__(self, shared: SharedLimits, limit: int) -> None:
        self.limit = limit
        self._shared = shared
        self._local = AnswerSlots(limit)
        self._held: dict[str, Lease] = {}
        self._given_back: set[str] = set()  # while Redis was down: dropped once it is back
        # Renewing and giving back take turns: a renewal sent after a release would bring
        # the released lease back until it expires.
        self._turns = asyncio.Lock()

    @property
    def fleet(self) -> bool:
        """Whether the slots are counted in Redis now; while it is down, in this process."""
        return self._shared.down_why is None

    async def acquire(self) -> Lease | None:
        name = self._shared.lease_name()
        try:
            taken = await self._shared.take_slot(self.limit, name)
        except _RedisDownError:
            taken = self._local.try_take()
            local = True
        else:
            local = False
        if not taken:
            return None
        lease = self._held[name] = Lease(name, local)
        return lease

    async def release(self, lease: object, /) -> None:
        assert isinstance(lease, Lease), lease
        self._held.pop(lease.name, None)
        if lease.local:
            self._local.give_back()
        async with self._turns:
            if not await self._shared.renew_slots([], drop=[lease.name]):
                # Left in Redis it would hold a slot of the fleet's until it expired.
                self._given_back.add(lease.name)

    async def renew(self) -> bool:
        """Renew the leases held here (dropping those given back meanwhile); False when
        there is nothing to send."""
        async with self._turns:
            if not self._held and not self._given_back:
                return False
            dropping = list(self._given_back)
            if await self._shared.renew_slots(list(self._held), drop=dropping):
                self._given_back.difference_update(dropping)
            return True
