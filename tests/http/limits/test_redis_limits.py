"""The limits counted in a real Redis (`redis-server` on 127.0.0.1): buckets and answer
slots shared by separate :class:`SharedLimits` (as separate workers hold them), leases that
come back when nobody renews them, Redis down and back, and the settings' checks. The same
through `serve` processes is in tests/http/limits/test_fleet_limits.py."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import FakeListChatModel
from prometheus_client.parser import text_string_to_metric_families
from redis import asyncio as redis_asyncio

from app.http.factory import create_app
from app.http.middleware.access import LimitsUnavailableError
from app.http.middleware.shared_limits import Lease, SharedLimits
from app.http.settings import load_server_settings
from pipelines.core.errors import ConfigurationError
from pipelines.core.settings import Settings, load_settings
from pipelines.pipeline import AnswerPipeline
from tests.support.servers import RedisServer, free_port, redis_server, serve

pytestmark = pytest.mark.slow  # a real redis-server for almost every test


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


def _run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


_prefixes = iter(range(1_000_000))


@asynccontextmanager
async def _workers(url: str, count: int = 2, **options: Any) -> AsyncIterator[list[SharedLimits]]:
    """``count`` SharedLimits over one Redis and one prefix (new for each use), as that many
    workers would hold them."""
    options.setdefault("prefix", f"test-{next(_prefixes)}")
    workers = [SharedLimits(url, **options) for _ in range(count)]
    try:
        yield workers
    finally:
        for worker in workers:
            await worker.aclose()


async def _redis_now_ms(url: str) -> int:
    client = redis_asyncio.Redis.from_url(url)
    try:
        seconds, micros = await client.time()
        return seconds * 1000 + micros // 1000
    finally:
        await client.aclose()


async def _leases(url: str, prefix: str) -> dict[str, float]:
    client = redis_asyncio.Redis.from_url(url, decode_responses=True)
    try:
        pairs = await client.zrange(f"{prefix}:answers", 0, -1, withscores=True)
        return {str(pair[0]): float(pair[1]) for pair in pairs}
    finally:
        await client.aclose()


# --- the rate limit -----------------------------------------------------------------------


def test_a_minute_of_requests_is_shared_by_every_worker(redis: RedisServer) -> None:
    async def test() -> None:
        async with _workers(redis.url) as (one, other):
            buckets = [one.buckets("rate", 6), other.buckets("rate", 6)]
            # Looking takes nothing.
            assert [await buckets[0].wait("key:a") for _ in range(10)] == [None] * 10
            verdicts = [await buckets[n % 2].take("key:a") for n in range(8)]
            assert verdicts[:6] == [None] * 6
            # Refused on either worker, told to come back once a request has refilled
            # (one every 10 s at 6 a minute).
            for wait in verdicts[6:]:
                assert wait is not None
                assert 0 < wait <= 10
            assert await buckets[1].wait("key:a") is not None
            assert await buckets[0].take("key:b") is None  # another client's own minute
            # The same names on another limit (wrong keys) are another count.
            assert await one.buckets("auth", 6).take("key:a") is None

    _run(test)


# --- answer slots -------------------------------------------------------------------------


def test_answer_slots_are_one_count_for_every_worker(redis: RedisServer) -> None:
    async def test() -> None:
        async with _workers(redis.url) as (one, other):
            slots = [one.slots(2), other.slots(2)]
            first = await slots[0].acquire()
            second = await slots[1].acquire()
            assert first is not None
            assert second is not None
            assert await slots[0].acquire() is None
            assert await slots[1].acquire() is None
            await slots[0].release(first)
            third = await slots[1].acquire()
            assert third is not None
            assert await slots[0].acquire() is None
            leases = await _leases(redis.url, one.prefix)
            assert set(leases) == {second.name, third.name}
            # A lease names the process that holds it, for an operator reading the set.
            assert re.fullmatch(r".+:\d+:[0-9a-f]{6}:\d+", second.name)

    _run(test)


def test_the_leases_of_a_worker_that_stops_renewing_come_back_within_a_lease(
    redis: RedisServer,
) -> None:
    lease_s = 3.0

    async def test() -> None:
        async with _workers(redis.url, lease_s=lease_s) as (dead, alive):
            held = [await dead.slots(2).acquire() for _ in range(2)]
            assert all(lease is not None for lease in held)
            # The worker "dies": it never renews nor gives back. Its leases expire a lease
            # from when they were last written, by Redis's clock.
            now = await _redis_now_ms(redis.url)
            expiries = (await _leases(redis.url, dead.prefix)).values()
            assert all(expiry <= now + lease_s * 1000 for expiry in expiries)
            survivor = alive.slots(2)
            taken: list[object] = []
            async with asyncio.timeout(60):
                while len(taken) < 2:
                    lease = await survivor.acquire()
                    if lease is None:
                        await asyncio.sleep(0.1)
                    else:
                        taken.append(lease)
            assert await _redis_now_ms(redis.url) >= min(expiries)

    _run(test)


def test_a_renewed_lease_outlives_its_first_expiry(redis: RedisServer) -> None:
    async def test() -> None:
        async with _workers(redis.url, count=1, lease_s=3.0) as (worker,):
            slots = worker.slots(1)
            lease = await slots.acquire()
            assert isinstance(lease, Lease)
            first_expiry = (await _leases(redis.url, worker.prefix))[lease.name]
            renewing = asyncio.create_task(worker.keep_up())
            try:
                async with asyncio.timeout(60):
                    while await _redis_now_ms(redis.url) < first_expiry + 1000:
                        await asyncio.sleep(0.2)
                leases = await _leases(redis.url, worker.prefix)
                assert leases[lease.name] > first_expiry  # renewed, still held
                assert await slots.acquire() is None
            finally:
                renewing.cancel()
                await asyncio.gather(renewing, return_exceptions=True)
            await slots.release(lease)
            assert await _leases(redis.url, worker.prefix) == {}

    _run(test)


# --- Redis down, and back -----------------------------------------------------------------


def test_without_redis_the_limits_count_per_process_and_say_why() -> None:
    url = f"redis://:s3cret-pass-17@127.0.0.1:{free_port()}/0"  # nothing listens there
    heard: list[str] = []

    async def test() -> None:
        async with _workers(url, count=1, on_without_redis=heard.append) as (worker,):
            buckets = worker.buckets("rate", 2)
            verdicts = [await buckets.take("key:a") for _ in range(3)]
            assert verdicts[:2] == [None, None]
            assert verdicts[2] is not None
            slots = worker.slots(1)
            lease = await slots.acquire()
            assert isinstance(lease, Lease)
            assert lease.local
            assert await slots.acquire() is None
            await slots.release(lease)
            assert await slots.acquire() is not None
            described = worker.describe()
            assert described["counted"] == "per-process"
            assert f"127.0.0.1:{url.rsplit(':', 1)[1].split('/')[0]}" in described["degraded"]
            assert "s3cret" not in repr(described)

    _run(test)
    assert heard
    assert set(heard) == {"per_process"}


def test_refuse_mode_refuses_while_redis_is_down(redis: RedisServer) -> None:
    heard: list[str] = []

    async def test() -> None:
        async with _workers(
            redis.url, count=1, when_down="refuse", on_without_redis=heard.append
        ) as (worker,):
            with redis_server() as own:
                worker_own = SharedLimits(own.url, when_down="refuse")
                try:
                    slots = worker_own.slots(4)
                    assert await slots.acquire() is not None
                    own.stop()
                    with pytest.raises(LimitsUnavailableError, match="cannot be reached"):
                        await slots.acquire()
                    buckets = worker_own.buckets("rate", 5)
                    with pytest.raises(LimitsUnavailableError):
                        await buckets.take("key:a", answering=True)
                    # What runs no answer (/metrics, the logs) is counted in the process.
                    assert await buckets.take("key:a") is None
                    assert worker_own.describe()["counted"] == "refusing"
                    own.start()
                    assert await worker_own.probe()
                    assert await slots.acquire() is not None
                    assert worker_own.describe() == {"counted": "shared", "redis": own.url}
                finally:
                    await worker_own.aclose()
            assert worker.describe()["counted"] == "shared"

    _run(test)


def test_leases_taken_while_redis_was_down_count_once_it_is_back() -> None:
    async def test() -> None:
        with redis_server() as own:
            async with _workers(own.url, lease_s=30.0) as (one, other):
                slots = one.slots(2)
                shared_lease = await slots.acquire()
                own.stop()
                local_lease = await slots.acquire()
                assert isinstance(local_lease, Lease)
                assert local_lease.local
                own.start()  # an empty Redis: the outage lost what it held
                assert await one.probe()
                names = set(await _leases(own.url, one.prefix))
                assert names == {getattr(shared_lease, "name", None), local_lease.name}
                # Both count against the fleet's cap again at once.
                assert await other.slots(2).acquire() is None
                await slots.release(local_lease)
                assert await other.slots(2).acquire() is not None

    _run(test)


def test_a_restarted_redis_is_used_again_without_counting_per_process() -> None:
    heard: list[str] = []

    async def test() -> None:
        with redis_server() as own:
            async with _workers(own.url, count=1, on_without_redis=heard.append) as (worker,):
                buckets = worker.buckets("rate", 100)
                # Several requests at once: the client keeps that many connections open.
                assert (
                    await asyncio.gather(*(buckets.take("key:a") for _ in range(8))) == [None] * 8
                )
                own.stop()
                own.start()  # every pooled connection is now a closed one
                verdicts = await asyncio.gather(*(buckets.take("key:a") for _ in range(8)))
                assert verdicts == [None] * 8
                assert worker.describe()["counted"] == "shared"

    _run(test)
    assert heard == []  # each stale connection was retried once, on a fresh one


def test_a_slot_given_back_while_redis_was_down_is_dropped_once_it_is_back(
    redis: RedisServer,
) -> None:
    async def test() -> None:
        async with _workers(redis.url, lease_s=60.0) as (one, other):
            slots = one.slots(1)
            lease = await slots.acquire()
            assert isinstance(lease, Lease)
            async with _writes_refused(redis.url):  # Redis keeps its data, takes no writes
                await slots.release(lease)  # cannot be told now
                assert one.describe()["counted"] == "per-process"
            assert set(await _leases(redis.url, one.prefix)) == {lease.name}
            assert await one.probe()
            # Told as soon as it is back, not left to hold the fleet's slot for a lease.
            assert await _leases(redis.url, one.prefix) == {}
            assert await other.slots(1).acquire() is not None

    _run(test)


def test_a_redis_that_answers_but_refuses_writes_is_down(redis: RedisServer) -> None:
    async def test() -> None:
        async with _workers(redis.url, count=1) as (worker,):
            buckets = worker.buckets("rate", 5)
            assert await buckets.take("key:a") is None
            async with _writes_refused(redis.url):
                assert await buckets.take("key:a") is None  # counted in the process
                assert worker.describe()["counted"] == "per-process"
                assert not await worker.probe()  # a PING would have said it is fine
            assert await worker.probe()
            assert worker.describe()["counted"] == "shared"

    _run(test)


@asynccontextmanager
async def _writes_refused(url: str) -> AsyncIterator[None]:
    """Redis answers PING and reads but refuses every write (NOREPLICAS), as a replica or a
    full Redis would."""
    admin = redis_asyncio.Redis.from_url(url)
    try:
        await admin.config_set("min-replicas-to-write", 1)
        yield
    finally:
        await admin.config_set("min-replicas-to-write", 0)
        await admin.aclose()


def test_the_redis_password_is_never_shown(capsys: pytest.CaptureFixture[str]) -> None:
    password = "pw-5e1f9a7c3b"

    async def test() -> None:
        with redis_server(password=password) as own:
            wrong = own.url.replace(password, "wrong-pw-77aa31")
            async with _workers(wrong, count=1) as (refused,):
                assert not await refused.probe()
                described = refused.describe()
                assert "WRONGPASS" in described["degraded"] or "invalid" in described["degraded"]
                assert "wrong-pw" not in repr(described)
            async with _workers(own.url, count=1) as (allowed,):
                assert await allowed.probe()
                assert allowed.describe() == {
                    "counted": "shared",
                    "redis": f"redis://127.0.0.1:{own.port}/0",
                }

    _run(test)
    settings = load_server_settings(redis_url=f"redis://:{password}@cache:6379/0")
    assert password not in repr(settings) + str(settings.model_dump())
    assert password in settings.redis_passwords
    said = capsys.readouterr()
    assert "cannot be reached" in said.err  # the one line the worker writes when it goes
    assert password not in said.err + said.out
    assert "wrong-pw" not in said.err + said.out


# --- settings -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://:pw-9d1c7e@cache:6379", "redis://"),
        ("redis://:pw-9d1c7e@cache:port/0", "port"),
        ("redis://:pw-9d1c7e@/0", "no host"),
    ],
)
def test_an_unusable_redis_url_is_refused_without_repeating_it(url: str, said: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_server_settings(redis_url=url)
    message = str(caught.value)
    assert "--redis-url" in message
    assert said in message
    assert "pw-9d1c7e" not in message


def test_the_outage_setting_names_its_choices() -> None:
    with pytest.raises(ConfigurationError, match="per-process"):
        load_server_settings(when_redis_down="fail-open")


# --- through the HTTP server --------------------------------------------------------------


def _pipeline(settings: Settings, embeddings: Embeddings) -> AnswerPipeline:
    return AnswerPipeline(
        settings,
        embeddings=embeddings,
        answer_model=FakeListChatModel(responses=["ABCA1 exports cholesterol [1]."]),
        expander_model=FakeListChatModel(responses=["{}"]),
    )


def _wrong_key(base: str) -> int:
    headers = {"Authorization": "Bearer not-a-key-4821"}
    return httpx.get(f"{base}/v1/collections", headers=headers, timeout=30).status_code


RIGHT_KEY = {"Authorization": "Bearer right-key-5d0c2a"}


def _health(base: str) -> Any:
    """``/healthz`` as the operator reads it: its details are for a key holder."""
    return httpx.get(f"{base}/healthz", headers=RIGHT_KEY, timeout=30).json()


def _metric(base: str, name: str, **labels: str) -> float:
    text = httpx.get(f"{base}/metrics", headers=RIGHT_KEY, timeout=30).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return 0.0


def test_two_servers_share_wrong_keys_and_report_redis_on_healthz(
    sample_home: Path, minilm: Embeddings
) -> None:
    with redis_server() as own:
        server = load_server_settings(
            api_keys="right-key-5d0c2a",
            auth_failures_per_minute=3,
            redis_url=own.url,
            redis_prefix="healthz-test",
        )
        settings = load_settings(home=sample_home, event_logs=False)
        apps = [
            create_app(settings, pipeline=_pipeline(settings, minilm), server=server)
            for _ in range(2)
        ]
        with _both(apps) as (one, other):
            health = _health(one)
            assert health["limits"] == {"counted": "shared", "redis": own.url}
            assert health["status"] == "ok"
            # Three wrong keys between them, then the address is slowed on both; the right
            # key is still served on both.
            assert [_wrong_key(base) for base in (one, other, one)] == [401] * 3
            assert _wrong_key(other) == 429
            assert _wrong_key(one) == 429
            for base in (one, other):
                right = httpx.get(f"{base}/v1/collections", headers=RIGHT_KEY, timeout=30)
                assert right.status_code == 200

            own.stop()
            health = _health(other)
            assert health["status"] == "degraded"
            assert health["limits"]["counted"] == "per-process"
            assert f"Redis at {own.url} cannot be reached" in health["limits"]["degraded"]
            # Counted in each process meanwhile: this one has seen no wrong key yet.
            assert _wrong_key(other) == 401
            assert (
                _metric(other, "reactome_answers_limits_without_redis_total", outcome="per_process")
                >= 1
            )

            own.start()
            # The server's probe finds it within a second or so; nothing else has to ask.
            deadline = time.monotonic() + 60
            while (health := _health(other))["status"] != "ok":
                assert time.monotonic() < deadline, health
                time.sleep(0.1)
            assert health["limits"] == {"counted": "shared", "redis": own.url}


@contextmanager
def _both(apps: list[Any]) -> Iterator[list[str]]:
    with ExitStack() as stack:
        yield [stack.enter_context(contextmanager(serve)(app)) for app in apps]


def test_refuse_mode_at_mcp_refuses_only_answers_in_the_protocols_shape(
    sample_home: Path, minilm: Embeddings
) -> None:
    nowhere = f"redis://127.0.0.1:{free_port()}/0"  # no Redis there: down from the start
    settings = load_settings(home=sample_home, event_logs=False)
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    question = {"question": "What is ABCA1?"}
    answer = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "ask_reactome", "arguments": question}}  # fmt: skip
    accept = {"Accept": "application/json, text/event-stream"}

    def app(**limits: int) -> Any:
        server = load_server_settings(redis_url=nowhere, when_redis_down="refuse", **limits)
        return create_app(settings, pipeline=_pipeline(settings, minilm), server=server)

    with _both([app(rate_limit=60), app(max_concurrent_answers=2)]) as (rated, capped):
        for base in (rated, capped):
            # Only a call of the answer tool is refused: /mcp reads the body before counting.
            assert httpx.post(f"{base}/mcp", json=listing, headers=accept, timeout=30).is_success
            called = httpx.post(f"{base}/mcp", json=answer, headers=accept, timeout=30)
            assert called.status_code == 503
            assert called.headers["retry-after"] == "2"
            body = called.json()
            assert body["id"] == 2  # the request's, as its body was read
            assert body["error"]["data"] == {"code": "limits_unavailable", "status": 503}
            assert "cannot be reached" in body["error"]["message"]
