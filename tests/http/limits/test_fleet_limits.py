"""The answer cap and the rate limit held across a fleet: a real `redis-server`, two `serve
--workers 2` instances sharing it, and a fake OpenAI-compatible model that holds each answer
until the test lets it go (so "at once" is a count, not a race), all on 127.0.0.1."""

from __future__ import annotations

import itertools
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from tests.support.fake_openai import FakeChat, fake_chat, serving_env
from tests.support.servers import RedisServer, Served, redis_server, serve_command

pytestmark = pytest.mark.slow  # four worker processes and a Redis, answering for real

CAP = 4
RATE = 6
# Every keyed request spends its key's minute (RATE): requests whose rate does not matter
# to a test, polls included, take turns over many keys, so no key comes near its limit.
KEYS = [f"fleet-key-{n:03d}-8c1e" for n in range(300)]
RATE_TEST_KEY = KEYS[0]
_any_key = itertools.cycle(KEYS[1:])
PREFIX = "fleet-test"
QUESTION = "What causes Tangier disease?"
LEASE_S = 15.0  # the default REACTOME_ANSWERS_ANSWER_LEASE_S


@dataclass
class Fleet:
    redis: RedisServer
    fake: FakeChat
    instances: list[Served]


def _env(fake: FakeChat, redis_url: str, **more: str) -> dict[str, str]:
    return {
        **serving_env(fake),
        "REACTOME_ANSWERS_REDIS_URL": redis_url,
        "REACTOME_ANSWERS_REDIS_PREFIX": PREFIX,
        "REACTOME_ANSWERS_MAX_CONCURRENT_ANSWERS": str(CAP),
        "REACTOME_ANSWERS_RATE_LIMIT": str(RATE),
        "REACTOME_ANSWERS_API_KEYS": ",".join(KEYS),
        "REACTOME_ANSWERS_EVENT_LOGS": "false",
        **more,
    }


def _serve(home: Path, env: dict[str, str]) -> AbstractContextManager[Served]:
    return serve_command(home, command=("serve", "--workers", "2", "--port"), env=env)


@pytest.fixture(scope="module")
def fleet(sample_home: Path) -> Iterator[Fleet]:
    with ExitStack() as stack:
        own_redis = stack.enter_context(redis_server())
        fake = stack.enter_context(fake_chat())
        env = _env(fake, own_redis.url)
        instances = [stack.enter_context(_serve(sample_home, env)) for _ in range(2)]
        yield Fleet(own_redis, fake, instances)


def _bearer(key: str | None = None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key or next(_any_key)}"}


def _wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s:.0f} s"
        time.sleep(0.05)


@dataclass
class Reply:
    status: int
    retry_after: str | None
    body: str


def _stream(base: str, let_go: threading.Event, heard: list[int]) -> Reply:
    """One streamed answer: its status is noted in ``heard`` as soon as it arrives; an
    admitted one is read whole once ``let_go`` is set."""
    url = f"{base}/v1/answer/stream"
    body = {"question": QUESTION}
    with httpx.stream("POST", url, json=body, headers=_bearer(), timeout=180) as response:
        heard.append(response.status_code)
        if response.status_code == 200:
            let_go.wait(180)
        text = response.read().decode()
        return Reply(response.status_code, response.headers.get("retry-after"), text)


def _ask(base: str, key: str | None = None) -> httpx.Response:
    """One JSON answer, with ``key`` (else one of the many)."""
    body = {"question": QUESTION}
    return httpx.post(f"{base}/v1/answer", json=body, headers=_bearer(key), timeout=120)


def _leases(fleet: Fleet) -> dict[str, float]:
    with redis.Redis.from_url(fleet.redis.url, decode_responses=True) as client:
        pairs = client.zrange(f"{PREFIX}:answers", 0, -1, withscores=True)
        return {str(pair[0]): float(pair[1]) for pair in pairs}


def _redis_now_ms(fleet: Fleet) -> int:
    with redis.Redis.from_url(fleet.redis.url) as client:
        seconds, micros = client.time()
        return int(seconds) * 1000 + int(micros) // 1000


def _holder_pid(lease: str) -> int:
    return int(lease.split(":")[-3])  # host:pid:token:n


def _answered_whole(reply: Reply) -> bool:
    return '"state":"answered"' in reply.body and "event: done" in reply.body


# --- the cap ------------------------------------------------------------------------------


def _burst(fleet: Fleet, bases: list[str], streams: int) -> list[Reply]:
    """``streams`` streamed answers at once, spread over ``bases``: once every status is in
    and the admitted answers are all held at the model (so none has ended and freed its
    slot), the model lets them go and the replies are read whole."""
    fleet.fake.behaviour = "held"
    fleet.fake.release.clear()
    let_go = threading.Event()
    heard: list[int] = []
    try:
        with ThreadPoolExecutor(max_workers=streams) as pool:
            futures = [
                pool.submit(_stream, bases[n % len(bases)], let_go, heard) for n in range(streams)
            ]
            _wait_for(
                lambda: len(heard) == streams and fleet.fake.holding == heard.count(200),
                f"{streams} statuses",
            )
            assert len(_leases(fleet)) == heard.count(200)
            let_go.set()
            fleet.fake.release.set()
            return [future.result() for future in futures]
    finally:
        let_go.set()
        fleet.fake.release.set()


def test_the_cap_admits_exactly_four_of_twenty_streams_over_both_instances(fleet: Fleet) -> None:
    replies = _burst(fleet, [instance.base for instance in fleet.instances], 20)
    admitted = [reply for reply in replies if reply.status == 200]
    refused = [reply for reply in replies if reply.status == 429]
    assert len(admitted) == CAP
    assert len(refused) == 20 - CAP
    assert all(_answered_whole(reply) for reply in admitted)
    assert all(reply.retry_after == "1" for reply in refused)
    assert all('"too_many_answers"' in reply.body for reply in refused)
    # The cap that is full is the fleet's, and the refusal says so (issue 37).
    assert all("the servers sharing this one's limits" in reply.body for reply in refused)
    _wait_for(lambda: not _leases(fleet), "the slots given back")


def test_a_client_that_leaves_gives_its_slot_back_at_once(fleet: Fleet) -> None:
    fleet.fake.behaviour = "held"
    fleet.fake.release.clear()
    try:
        url = f"{fleet.instances[1].base}/v1/answer/stream"
        body = {"question": QUESTION}
        with httpx.stream("POST", url, json=body, headers=_bearer(), timeout=180) as response:
            assert response.status_code == 200
            _wait_for(lambda: fleet.fake.holding == 1, "the answer at the model")
            assert len(_leases(fleet)) == 1
        # The client hung up mid-answer. Its worker lives on and would renew a slot it still
        # held, so the slot going is the worker giving it back, not the lease running out.
        _wait_for(lambda: not _leases(fleet), "the slot back", timeout_s=60)
    finally:
        fleet.fake.release.set()


# --- the rate limit -----------------------------------------------------------------------


def test_one_keys_minute_is_shared_by_both_instances(fleet: Fleet) -> None:
    fleet.fake.behaviour = "ok"
    key = RATE_TEST_KEY  # no other request spends this key's minute
    started = time.monotonic()
    statuses = []
    for n in range(RATE + 2):
        base = fleet.instances[n % 2].base
        response = _ask(base, key)
        statuses.append(response.status_code)
        if response.status_code == 200:
            assert response.json()["state"] == "answered"
        else:
            assert response.json()["error"]["code"] == "rate_limited"
            assert 1 <= int(response.headers["retry-after"]) <= 10
    # A request comes back every 60/RATE s: on a machine so slow that the eight took longer
    # than that, the bucket has honestly refilled by as many.
    refilled = math.floor((time.monotonic() - started) / (60 / RATE))
    assert statuses[:RATE] == [200] * RATE
    assert statuses[RATE:].count(200) <= refilled
    if refilled == 0:
        assert statuses[RATE:] == [429, 429]


# --- a worker killed while it holds slots -------------------------------------------------


def test_the_slots_of_a_killed_worker_come_back_within_a_lease(fleet: Fleet) -> None:
    fleet.fake.behaviour = "held"
    fleet.fake.release.clear()
    let_go = threading.Event()
    heard: list[int] = []
    futures: list[Future[Reply]] = []
    try:
        with ThreadPoolExecutor(max_workers=2 * CAP) as pool:
            # One stream at a time to one instance until one of its two workers holds two.
            victim = None
            for n in range(CAP):
                futures.append(pool.submit(_stream, fleet.instances[0].base, let_go, heard))
                _wait_for(lambda n=n: len(_leases(fleet)) == n + 1, "the new lease")  # type: ignore[misc]
                pids = [_holder_pid(lease) for lease in _leases(fleet)]
                victim = next((pid for pid in pids if pids.count(pid) == 2), None)
                if victim is not None:
                    break
            assert victim is not None
            held = _leases(fleet)
            victims = {name: expiry for name, expiry in held.items() if _holder_pid(name) == victim}
            os.kill(victim, signal.SIGKILL)
            killed_at = _redis_now_ms(fleet)
            # Nothing renews them now: they end at most a lease after the kill.
            assert all(expiry <= killed_at + LEASE_S * 1000 for expiry in victims.values())
            # The other answers finish and give theirs back; the victim's clients are cut.
            let_go.set()
            fleet.fake.release.set()
            for future in futures:
                future.exception(timeout=180)
            _wait_for(lambda: set(_leases(fleet)) <= set(victims), "the live answers' slots back")

            # Once their lease is over, the victim's slots are free: the fleet takes a full
            # cap of new answers, on either instance, without an operator.
            _wait_for(
                lambda: _redis_now_ms(fleet) > max(victims.values()),
                "the killed worker's leases to end",
                timeout_s=LEASE_S + 60,
            )
            fleet.fake.release.clear()
            let_go.clear()
            heard.clear()
            again = [
                pool.submit(_stream, fleet.instances[n % 2].base, let_go, heard) for n in range(CAP)
            ]
            _wait_for(lambda: len(heard) == CAP, "the new answers' statuses")
            assert heard == [200] * CAP
            assert not any(_holder_pid(name) == victim for name in _leases(fleet))
            let_go.set()
            fleet.fake.release.set()
            replies = [future.result(timeout=180) for future in again]
    finally:
        let_go.set()
        fleet.fake.release.set()
    assert all(_answered_whole(reply) for reply in replies)


# --- Redis down, and back -----------------------------------------------------------------


def _health(base: str) -> dict[str, object]:
    """``/healthz`` with a key: its details are only for a key holder."""
    reply = httpx.get(f"{base}/healthz", headers=_bearer(), timeout=30)
    return reply.json()  # type: ignore[no-any-return]


def _samples(base: str, name: str) -> list[tuple[dict[str, str], float]]:
    text = httpx.get(f"{base}/metrics", headers=_bearer(), timeout=30).text
    return [
        (sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    ]


def _shared_workers(base: str) -> list[float]:
    """``reactome_answers_limits_shared`` of each live worker of the instance at ``base``."""
    return [value for _, value in _samples(base, "reactome_answers_limits_shared")]


def _metric(base: str, name: str, label: str) -> float:
    return sum(value for labels, value in _samples(base, name) if label in labels.values())


def test_redis_down_answers_go_on_or_are_refused_and_the_cap_resumes(
    fleet: Fleet, sample_home: Path
) -> None:
    fleet.fake.behaviour = "ok"
    refuse_env = _env(fleet.fake, fleet.redis.url, REACTOME_ANSWERS_WHEN_REDIS_DOWN="refuse")
    with _serve(sample_home, refuse_env) as refusing:
        everyone = [*fleet.instances, refusing]
        _wait_for(lambda: all(_shared_workers(i.base) == [1.0, 1.0] for i in everyone), "shared")
        fleet.redis.stop()
        try:
            going_on = _ask(fleet.instances[0].base)
            assert going_on.status_code == 200
            assert going_on.json()["state"] == "answered"
            refused = _ask(refusing.base)
            assert refused.status_code == 503
            assert refused.json()["error"]["code"] == "limits_unavailable"
            assert "cannot be reached" in refused.json()["error"]["message"]
            assert refused.headers["retry-after"] == "2"
            health = _health(fleet.instances[1].base)
            assert health["status"] == "degraded"
            assert health["limits"]["counted"] == "per-process"  # type: ignore[index]
            assert _health(refusing.base)["limits"]["counted"] == "refusing"  # type: ignore[index]
            # The operator still reads what happened: /metrics is counted in the process.
            assert (
                _metric(refusing.base, "reactome_answers_rejections_total", "limits_unavailable")
                >= 1
            )
            assert (
                _metric(refusing.base, "reactome_answers_limits_without_redis_total", "refused")
                >= 1
            )
            _wait_for(
                lambda: all(_shared_workers(i.base) == [0.0, 0.0] for i in everyone),
                "every worker seeing Redis down",
            )
        finally:
            fleet.redis.start()
        # Each worker probes every second: the limits are shared again within about that.
        _wait_for(
            lambda: all(_shared_workers(i.base) == [1.0, 1.0] for i in everyone),
            "every worker counting in Redis again",
            timeout_s=60,
        )
        assert _health(refusing.base)["limits"]["counted"] == "shared"  # type: ignore[index]

        # The cap holds across all three instances again: four held, every other refused.
        replies = _burst(fleet, [instance.base for instance in everyone], 12)
        assert sorted(reply.status for reply in replies) == [200] * CAP + [429] * (12 - CAP)
    # Each worker said so once on its way down and once on its way back, in the server's log.
    assert "refusing answers until it answers" in refusing.stderr
    assert "answers again: the limits are counted across the fleet again" in refusing.stderr
