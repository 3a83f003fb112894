"""The rate limit: a minute's worth of requests per key or client address, whose address counts
(a forwarded one only from a proxy the operator names), and the table of buckets: refilled at
the rate, bounded, forgetting the least recently seen first."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from app.http.middleware.access import RateLimiter
from tests.support.keys import KEYS, bearer
from tests.support.servers import serve_command

pytestmark = pytest.mark.slow  # `serve` subprocesses


def test_the_rate_limit_refuses_beyond_a_minutes_worth(sample_home: Path) -> None:
    env = {"REACTOME_ANSWERS_RATE_LIMIT": "3", "REACTOME_ANSWERS_API_KEYS": ",".join(KEYS)}
    with serve_command(sample_home, env=env) as served:
        statuses = []
        for _ in range(4):
            response = httpx.get(
                f"{served.base}/v1/collections", headers=bearer(KEYS[0]), timeout=30
            )
            statuses.append(response.status_code)
        assert statuses == [200, 200, 200, 429]
        assert response.json()["error"]["code"] == "rate_limited"
        assert 1 <= int(response.headers["retry-after"]) <= 20  # one request per 20 s
        # Per key: the other key has its own minute.
        other = httpx.get(f"{served.base}/v1/collections", headers=bearer(KEYS[1]), timeout=30)
        assert other.status_code == 200
        # And health checks are never limited.
        assert httpx.get(f"{served.base}/healthz", timeout=30).status_code == 200


# --- X-Forwarded-For is believed only from proxies the operator names ------------------------


def _statuses_from_many_addresses(base: str) -> list[int]:
    return [
        httpx.get(
            f"{base}/v1/collections", headers={"X-Forwarded-For": f"203.0.113.{n}"}, timeout=30
        ).status_code
        for n in range(8)
    ]


def test_a_forwarded_address_does_not_pick_the_rate_limit_bucket(sample_home: Path) -> None:
    env = {"REACTOME_ANSWERS_RATE_LIMIT": "5"}
    with serve_command(sample_home, env=env) as served:
        assert _statuses_from_many_addresses(served.base) == [200] * 5 + [429] * 3


def test_a_named_proxy_is_believed(sample_home: Path) -> None:
    env = {"REACTOME_ANSWERS_RATE_LIMIT": "5", "REACTOME_ANSWERS_FORWARDED_ALLOW_IPS": "127.0.0.1"}
    with serve_command(sample_home, env=env) as served:
        # Eight clients behind the proxy, each with its own minute.
        assert _statuses_from_many_addresses(served.base) == [200] * 8


# --- the buckets -----------------------------------------------------------------------------


def test_the_bucket_refills_at_the_rate() -> None:
    now = [0.0]
    limiter = RateLimiter(60, clock=lambda: now[0])
    assert all(limiter.check("a") is None for _ in range(60))
    wait = limiter.check("a")
    assert wait is not None
    assert wait == pytest.approx(1.0)
    now[0] = 1.0
    assert limiter.check("a") is None
    assert limiter.check("b") is None  # another client's own bucket


def test_the_bucket_table_is_bounded_and_forgets_the_least_recent() -> None:
    now = [0.0]
    limiter = RateLimiter(2, clock=lambda: now[0], max_clients=100)
    assert limiter.check("spent") is None
    assert limiter.check("spent") is None
    assert limiter.check("spent") is not None
    for n in range(1_000):  # each once, as spoofed or passing clients would
        limiter.check(f"client-{n}")
        if n % 50 == 0:
            assert limiter.check("spent") is not None  # recently seen: still remembered
        assert len(limiter) <= 100
    assert len(limiter) == 100
