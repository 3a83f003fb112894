"""API keys: which routes need one, wrong keys slowed down per client address while a valid
key never is (in the process and through Redis), key files and key settings, and what
`/healthz` tells a stranger and a key holder; through a real server on 127.0.0.1 (the `serve`
command, or uvicorn in a thread)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import redis

from app.http.settings import load_server_settings
from pipelines.core.errors import ConfigurationError
from tests.support.cli import cli
from tests.support.keys import KEY, KEYS, bearer
from tests.support.scripted_server import metric_samples, served
from tests.support.servers import RedisServer, Served, free_port, redis_server, serve_command

QUESTION = "What causes Tangier disease?"
WRONG = "wrong-key-d00d55"
KEYED = {"Authorization": f"Bearer {KEY}"}


# --- which routes need a key -----------------------------------------------------------------


@pytest.fixture(scope="module")
def keyed(sample_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`serve` over the sample with two keys, from a key file."""
    key_file = tmp_path_factory.mktemp("keys") / "keys.txt"
    key_file.write_text(
        f"# who has which key is the operator's business\n{KEYS[0]}  # alice\n\n{KEYS[1]}\n"
    )
    env = {
        "REACTOME_ANSWERS_API_KEYS": f"@{key_file}",
        # These tests send many wrong keys on purpose; slowing them is tested on its own.
        "REACTOME_ANSWERS_AUTH_FAILURES_PER_MINUTE": "1000",
    }
    with serve_command(sample_home, env=env) as server:
        yield server
    for key in [*KEYS, WRONG]:  # not in the server's own output, nor any event log
        assert key not in server.stderr
        for log in (sample_home / "logs").glob("*.jsonl"):
            assert key not in log.read_text()


@pytest.mark.slow
def test_the_page_health_and_limits_need_no_key(keyed: Served) -> None:
    for path in ("/", "/healthz", "/v1/limits", "/static/client.js"):
        assert httpx.get(f"{keyed.base}{path}", timeout=30).status_code == 200, path


@pytest.mark.slow
@pytest.mark.parametrize(
    ("headers", "said"),
    [
        ({}, "needs an API key"),
        (bearer(WRONG), "not one this server accepts"),
        ({"Authorization": WRONG}, "needs an API key"),  # not the Bearer scheme
    ],
)
def test_every_other_endpoint_refuses_a_missing_or_wrong_key(
    keyed: Served, headers: dict[str, str], said: str
) -> None:
    requests = [
        ("POST", "/v1/answer", {"question": QUESTION}),
        ("POST", "/v1/answer/stream", {"question": QUESTION}),
        ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": QUESTION}]}),
        ("POST", "/api/chat", {"messages": []}),
        ("GET", "/v1/collections", None),
        ("GET", "/v1/models", None),
        ("GET", "/openapi.json", None),
    ]
    for method, path, body in requests:
        response = httpx.request(
            method, f"{keyed.base}{path}", json=body, headers=headers, timeout=30
        )
        assert response.status_code == 401, path
        assert response.headers["www-authenticate"] == "Bearer"
        error = response.json()["error"]
        assert error["code"] == "unauthorized"
        assert said in error["message"]
        assert WRONG not in error["message"]


@pytest.mark.slow
def test_either_right_key_is_served(keyed: Served) -> None:
    for key in KEYS:
        response = httpx.post(
            f"{keyed.base}/v1/answer", json={"question": QUESTION}, headers=bearer(key), timeout=60
        )
        assert response.status_code == 200
        assert response.json()["state"] == "answered"


@pytest.mark.slow
def test_the_openai_client_sends_its_key_as_ours(keyed: Served) -> None:
    right = openai.OpenAI(base_url=f"{keyed.base}/v1", api_key=KEYS[1], max_retries=0)
    reply = right.chat.completions.create(
        model="reactome-answers", messages=[{"role": "user", "content": QUESTION}]
    )
    assert "ABCA1" in (reply.choices[0].message.content or "")
    wrong = openai.OpenAI(base_url=f"{keyed.base}/v1", api_key=WRONG, max_retries=0)
    with pytest.raises(openai.AuthenticationError) as refused:
        wrong.models.list()
    assert refused.value.status_code == 401


# --- wrong keys are slowed down per address; a valid key never is ----------------------------


def _collections(base: str, key: str | None) -> int:
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    return httpx.get(f"{base}/v1/collections", headers=headers, timeout=30).status_code


@pytest.mark.slow
def test_wrong_keys_from_one_address_are_slowed_down_and_a_valid_key_is_not(
    sample_home: Path,
) -> None:
    env = {"REACTOME_ANSWERS_API_KEYS": KEY, "REACTOME_ANSWERS_AUTH_FAILURES_PER_MINUTE": "5"}
    with serve_command(sample_home, env=env) as served:
        url = f"{served.base}/v1/collections"
        wrong = [
            httpx.get(url, headers={"Authorization": f"Bearer guess-{n}"}, timeout=30)
            for n in range(8)
        ]
        assert [reply.status_code for reply in wrong] == [401] * 5 + [429] * 3
        last = wrong[-1]
        assert last.json()["error"]["code"] == "auth_failures"
        assert 1 <= int(last.headers["retry-after"]) <= 12  # one more try every 12 s
        # Whoever holds the key is served from the same address (decision 0020): behind a
        # proxy one person's guesses must not lock out everyone.
        right = httpx.get(url, headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
        assert right.status_code == 200
        metrics = httpx.get(
            f"{served.base}/metrics", headers={"Authorization": f"Bearer {KEY}"}, timeout=30
        )
        assert metrics.status_code == 200
        assert 'reactome_answers_rejections_total{reason="auth_failures"} 3.0' in metrics.text
        # /metrics is behind the keys too, and a guess at it still counts.
        guessed = httpx.get(f"{served.base}/metrics", timeout=30)
        assert guessed.status_code == 429


def test_a_valid_key_is_served_however_many_wrong_keys_came_from_its_address() -> None:
    with served(api_keys=KEY, auth_failures_per_minute=5) as base:
        wrong = [_collections(base, f"guess-{n}") for n in range(8)]
        assert wrong == [401] * 5 + [429] * 3
        # One person behind a shared address keeps guessing; everyone with the key is served.
        for n in range(10):
            assert _collections(base, KEY) == 200, n
            assert _collections(base, f"guess-again-{n}") == 429
        assert _collections(base, None) == 429  # no key at all is no valid key either
        refused = httpx.get(f"{base}/v1/collections", timeout=30)
        error = refused.json()["error"]
        assert error["code"] == "auth_failures"
        assert "send a valid key" in error["message"]
        assert 1 <= int(refused.headers["retry-after"]) <= 12  # a request every 12 s
        rejections = metric_samples(base, "reactome_answers_rejections_total", KEYED)
        assert rejections == {"unauthorized": 5.0, "auth_failures": 15.0}


@pytest.mark.slow  # a `redis-server`
def test_through_redis_a_valid_key_never_touches_the_addresses_wrong_key_count() -> None:
    with redis_server() as own:
        options: dict[str, Any] = {
            "api_keys": KEY,
            "auth_failures_per_minute": 3,
            "redis_url": own.url,
            "redis_prefix": "issue37-keys",
        }
        with served(**options) as one, served(**options) as other:
            assert [_collections(base, KEY) for base in (one, other) * 5] == [200] * 10
            assert _auth_buckets(own) == []  # checked in the process: no round trip for it
            assert [_collections(base, "guess") for base in (one, other, one)] == [401] * 3
            assert [_collections(base, "guess") for base in (other, one)] == [429] * 2
            assert _auth_buckets(own) == ["issue37-keys:auth:address:127.0.0.1"]
            assert [_collections(base, KEY) for base in (one, other)] == [200, 200]


def _auth_buckets(server: RedisServer) -> list[str]:
    with redis.Redis.from_url(server.url, decode_responses=True) as client:
        return sorted(str(key) for key in client.scan_iter("issue37-keys:auth:*"))


# --- key files and key settings --------------------------------------------------------------


@pytest.mark.slow
def test_unusable_key_settings_are_clear_and_never_show_a_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="no key"):
        load_server_settings(api_keys=" , ")
    with pytest.raises(ConfigurationError, match="cannot be read") as missing:
        load_server_settings(api_keys=f"@{tmp_path / 'absent.txt'}")
    assert "absent.txt" in str(missing.value)
    listed = tmp_path / "keys.txt"
    listed.write_text(f"{KEYS[0]}\t# alice\n# {WRONG}\n{KEYS[1]} and more\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match=f"line 3 of the key file {listed}") as spaced:
        load_server_settings(api_keys=f"@{listed}")
    assert KEYS[1] not in str(spaced.value)
    listed.write_text(f"{KEYS[0]}\t# alice\n# {WRONG}\n{KEYS[1]}#not-a-comment\n")
    assert load_server_settings(api_keys=f"@{listed}").api_key_set == {
        KEYS[0],
        f"{KEYS[1]}#not-a-comment",
    }
    with pytest.raises(ConfigurationError, match="key 2 of the list"):
        load_server_settings(api_keys=f"{KEYS[0]},{KEYS[1]} {KEYS[0]}")
    settings = load_server_settings(api_keys=f"{KEYS[0]},{KEYS[1]}")
    assert KEYS[0] not in repr(settings)
    assert KEYS[0] not in settings.model_dump_json()


@pytest.mark.slow  # `serve` subprocesses
def test_a_key_file_takes_comments_after_a_key_and_a_bad_line_is_named(
    sample_home: Path, tmp_path: Path
) -> None:
    keys = tmp_path / "keys"
    keys.write_text(
        f"# operators' keys\n{KEY}   # alice, since March\nsecond#half-4d1f\t# bob\n",
        encoding="utf-8",
    )
    with serve_command(sample_home, env={"REACTOME_ANSWERS_API_KEYS": f"@{keys}"}) as server:
        for key, status in ((KEY, 200), ("second#half-4d1f", 200), ("alice,", 401)):
            assert _collections(server.base, key) == status, key
    keys.write_text(f"{KEY}  # alice\nbob's key\n", encoding="utf-8")
    refused = cli(
        sample_home,
        "serve",
        "--port",
        str(free_port()),
        env={"REACTOME_ANSWERS_API_KEYS": f"@{keys}"},
        timeout_s=120,
    )
    assert refused.returncode == 1
    (line,) = refused.stderr.strip().splitlines()[-1:]
    assert f"line 2 of the key file {keys}" in line
    assert "'#' at the start of a line or after a space starts a comment" in line
    assert "bob" not in line  # never a key, nor what might be one
    assert KEY not in refused.stderr


# --- /healthz's details are for a key holder -------------------------------------------------


@pytest.mark.slow  # a `redis-server`
def test_healthz_tells_a_stranger_the_status_and_a_key_holder_the_details(
    sample_home: Path,
) -> None:
    with (
        redis_server() as own,
        served(sample_home, logged=False, api_keys=KEY, redis_url=own.url) as base,
    ):
        for headers in ({}, {"Authorization": "Bearer not-the-key"}):
            stranger = httpx.get(f"{base}/healthz", headers=headers, timeout=30)
            assert stranger.status_code == 200
            assert stranger.json() == {
                "status": "ok",
                "details": "send 'Authorization: Bearer KEY' for the details",
            }
        operator = httpx.get(f"{base}/healthz", headers=KEYED, timeout=30).json()
        assert operator["limits"] == {"counted": "shared", "redis": own.url}
        assert operator["status"] == "ok"

        own.stop()
        # Down: the operator reads where and why; a stranger only that it is degraded.
        stranger = httpx.get(f"{base}/healthz", timeout=30)
        assert stranger.json()["status"] == "degraded"
        assert set(stranger.json()) == {"status", "details"}
        assert str(own.port) not in stranger.text
        assert "redis" not in stranger.text.lower()
        operator = httpx.get(f"{base}/healthz", headers=KEYED, timeout=30).json()
        assert f"Redis at {own.url} cannot be reached" in operator["limits"]["degraded"]
        head = httpx.head(f"{base}/healthz", timeout=30)
        assert (head.status_code, head.content) == (200, b"")
    # Without keys there is nobody to hold details back from.
    with redis_server() as own, served(sample_home, logged=False, redis_url=own.url) as base:
        assert httpx.get(f"{base}/healthz", timeout=30).json()["limits"]["redis"] == own.url
