"""What counting the limits in Redis adds to a request (issue 28).

The server's own middlewares, :class:`app.http.middleware.access.AccessControl` (the rate limit)
around
:class:`app.http.middleware.access.AnswerCap` (the cap), over an app that does nothing, take the
same requests three ways: with no limits, counted in the process, and counted in a real
`redis-server` on 127.0.0.1. The ways take turns round after round, so load on the machine
falls on all alike. An answering request (``POST /v1/answer``) meets the rate limit and the
cap; any other (``GET /v1/collections``) the rate limit only. Round trips are counted by
Redis itself (``INFO commandstats``), not inferred.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import time
from collections.abc import Callable
from typing import Any

import redis
from redis import asyncio as redis_asyncio

from app.http.middleware.access import (
    AccessControl,
    AnswerCap,
    AnswerSlots,
    RateLimiter,
    RequestLimit,
    SlotLimit,
)
from app.http.middleware.shared_limits import SharedLimits
from tests.support.servers import redis_server

__all__ = ["bench_limits", "report"]

_PATHS = frozenset({"/v1/answer"})
_UNLIMITED = 10**9  # neither the minute nor the cap ever refuses here: the cost is the count


async def _nothing(_scope: Any, _receive: Any, _send: Any) -> None:
    return None


async def _receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


async def _send(_message: Any) -> None:
    return None


_KEY = "bench-key-3f9c1d"


def _scope(method: str, path: str, keyed: bool) -> dict[str, Any]:
    headers = [(b"authorization", f"Bearer {_KEY}".encode())] if keyed else []
    return {"type": "http", "method": method, "path": path, "headers": headers,
            "client": ("127.0.0.1", 50000)}  # fmt: skip


def _ways(shared: SharedLimits, keyed: bool) -> dict[str, Callable[..., Any]]:
    """The same middlewares with no limits, limits per process and limits in Redis; with
    API keys the wrong-key limit comes along, as ``serve`` adds it."""
    keys = [_KEY] if keyed else []

    def stack(per_minute: Callable[[str], RequestLimit] | None, slots: SlotLimit | None) -> Any:
        app: Any = _nothing
        if slots is not None:
            app = AnswerCap(app, slots=slots, paths=_PATHS)
        if per_minute is not None or keyed:
            rate = per_minute("rate") if per_minute else None
            failures = per_minute("auth") if per_minute and keyed else None
            app = AccessControl(app, keys, rate=rate, auth_failures=failures, answering=_PATHS)
        return app

    return {
        "none": stack(None, None),
        "per_process": stack(lambda _: RateLimiter(_UNLIMITED), AnswerSlots(_UNLIMITED)),
        "redis": stack(lambda name: shared.buckets(name, _UNLIMITED), shared.slots(_UNLIMITED)),
    }


# What the scripts call inside Redis: commandstats counts those too, but they are no round
# trip. Everything else (EVALSHA, ZREM, INFO...) came from a client.
_INSIDE_SCRIPTS = {"time", "hmget", "hset", "pexpire", "pexpireat", "zremrangebyscore",
                   "zcard", "zadd", "zrem", "zrange"}  # fmt: skip


def _commands(url: str) -> int:
    """Commands clients have sent this Redis, this call's INFO included."""
    with redis.Redis.from_url(url) as client:
        stats = client.info("commandstats")
    return sum(
        int(entry["calls"])
        for name, entry in stats.items()
        if name.removeprefix("cmdstat_") not in _INSIDE_SCRIPTS
    )


async def _time_per_request(app: Callable[..., Any], scope: dict[str, Any], requests: int) -> float:
    start = time.perf_counter()
    for _ in range(requests):
        await app(dict(scope), _receive, _send)
    return (time.perf_counter() - start) / requests * 1e6


_CASES = {
    "answer": ("POST", "/v1/answer", False),
    "other": ("GET", "/v1/collections", False),
    "answer_keyed": ("POST", "/v1/answer", True),
    "other_keyed": ("GET", "/v1/collections", True),
}


async def _measure(url: str, requests: int, rounds: int) -> dict[str, Any]:
    shared = SharedLimits(url, prefix="bench-limits")
    try:
        stacks = {keyed: _ways(shared, keyed) for keyed in (False, True)}
        scopes = {
            case: _scope(method, path, keyed) for case, (method, path, keyed) in _CASES.items()
        }
        ways = {case: stacks[keyed] for case, (_, _, keyed) in _CASES.items()}
        for case, scope in scopes.items():  # warm: scripts loaded, connections open
            for app in ways[case].values():
                await _time_per_request(app, scope, 50)
        us: dict[str, dict[str, list[float]]] = {c: {w: [] for w in stacks[False]} for c in _CASES}
        for _ in range(rounds):
            for case, scope in scopes.items():
                for way, app in ways[case].items():
                    us[case][way].append(await _time_per_request(app, scope, requests))
        ping_us = await _ping_us(url, requests)
        trips = {}
        for case, scope in scopes.items():
            before = _commands(url)
            await _time_per_request(ways[case]["redis"], scope, requests)
            trips[case] = (_commands(url) - before - 1) / requests  # less INFO itself
    finally:
        await shared.aclose()
    result: dict[str, Any] = {"requests": requests, "rounds": rounds, "ping_us": ping_us}
    for case, by_way in us.items():
        p50 = {way: statistics.median(values) for way, values in by_way.items()}
        result[case] = {
            **{f"{way}_us": p50[way] for way in p50},
            "redis_added_us": p50["redis"] - p50["per_process"],
            "ratio_to_per_process": p50["redis"] / p50["per_process"],
            "round_trips": trips[case],
        }
    return result


async def _ping_us(url: str, requests: int) -> float:
    """A bare PING's round trip from the same client library, for scale."""
    pinger = redis_asyncio.Redis.from_url(url)
    try:
        await pinger.ping()
        start = time.perf_counter()
        for _ in range(requests):
            await pinger.ping()
        return (time.perf_counter() - start) / requests * 1e6
    finally:
        await pinger.aclose()


def bench_limits(requests: int = 2000, rounds: int = 5) -> dict[str, Any]:
    """The per-request cost of each way, median over ``rounds`` of ``requests``."""
    if shutil.which("redis-server") is None:
        return {"skipped": "redis-server is not installed (make install-redis)"}
    with redis_server() as server:
        return asyncio.run(_measure(server.url, requests, rounds))


def report(result: dict[str, Any]) -> str:
    if "skipped" in result:
        return f"Limits in Redis: skipped, {result['skipped']}"
    lines = [
        f"Limits in Redis (redis-server on 127.0.0.1), µs per request, median of "
        f"{result['rounds']} rounds of {result['requests']:,}:"
    ]
    for case, what in (
        ("answer", "an answer (rate + cap)"),
        ("other", "any other (rate)"),
        ("answer_keyed", "an answer with API keys (wrong keys + rate + cap)"),
        ("other_keyed", "any other with API keys (wrong keys + rate)"),
    ):
        run = result[case]
        lines.append(
            f"  {what}: none {run['none_us']:.1f}, per process {run['per_process_us']:.1f}, "
            f"Redis {run['redis_us']:.1f}: Redis adds {run['redis_added_us']:.1f} µs "
            f"({run['ratio_to_per_process']:.1f}x per process), "
            f"{run['round_trips']:.2f} round trips"
        )
    lines.append(f"  (a bare PING from the same client library: {result['ping_us']:.1f} µs)")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(bench_limits()))
