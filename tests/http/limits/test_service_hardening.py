"""The second outside attack on `serve` (issue 24, sections 2, 3, 5, 6 and 7), replayed
against the real command on 127.0.0.1: stalled bodies, clients that leave a JSON answer,
forwarded addresses, unreadable bodies, failed keys and unhandled errors."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import openai
import pytest
from langchain_core.language_models import FakeListChatModel
from langchain_core.runnables import RunnableLambda

from app.http.factory import create_app
from app.http.middleware.access import RateLimiter
from callbacks.events import ErrorEvent
from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline
from tests.support.fake_openai import FakeChat, fake_chat, serving_env
from tests.support.logs import logs_asking
from tests.support.servers import Served, serve, serve_command

pytestmark = pytest.mark.slow  # a `serve` subprocess, slow and stalled clients

QUESTION = "What causes Tangier disease?"
KEY = "only-key-5c81e0"


def _wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout_s:g} s"
        time.sleep(0.05)


def _raw_request(base: str, path: str, body: bytes, *, send_body: bool = True) -> socket.socket:
    """A POST sent over a socket of its own, so that a test can stall its body or leave."""
    host, port = base.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=60)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    sock.sendall(head + (body if send_body else b""))
    return sock


@contextmanager
def _model_server(behaviour: str = "ok") -> Iterator[tuple[FakeChat, dict[str, str]]]:
    with fake_chat() as fake:
        fake.behaviour = behaviour  # type: ignore[assignment]
        env = serving_env(fake)
        yield fake, env


def _answer_requests(fake: FakeChat) -> int:
    """How many answer (not expander) requests the fake model has received."""
    return sum("prepare searches" not in json.dumps(r["messages"][0]) for r in fake.requests)


# --- 2. a slot is taken only once the body has arrived ------------------------------------


def test_stalled_bodies_hold_no_answer_slot(sample_home: Path) -> None:
    env = {"REACTOME_ANSWERS_MAX_CONCURRENT_ANSWERS": "2", "REACTOME_ANSWERS_EVENT_LOGS": "false"}
    body = json.dumps({"question": QUESTION}).encode()
    with serve_command(sample_home, env=env) as served, ExitStack() as stack:
        # Two clients send their headers and never their bodies: as many as the cap.
        for _ in range(2):
            stack.enter_context(_raw_request(served.base, "/v1/answer", body, send_body=False))
        # Both answering requests that do send a body are served, one after the other and
        # both at once.
        answer = httpx.post(f"{served.base}/v1/answer", json={"question": QUESTION}, timeout=120)
        assert answer.status_code == 200, answer.text
        with ThreadPoolExecutor(2) as pool:
            replies = list(
                pool.map(
                    lambda _: httpx.post(
                        f"{served.base}/v1/answer", json={"question": QUESTION}, timeout=120
                    ),
                    range(2),
                )
            )
        assert [reply.json()["state"] for reply in replies] == ["answered", "answered"]


def test_the_cap_still_counts_answers_whose_body_has_arrived(sample_home: Path) -> None:
    with _model_server("hang") as (fake, env):
        env["REACTOME_ANSWERS_MAX_CONCURRENT_ANSWERS"] = "1"
        env["REACTOME_ANSWERS_EVENT_LOGS"] = "false"
        with serve_command(sample_home, env=env) as served:
            body = json.dumps({"question": QUESTION}).encode()
            with _raw_request(served.base, "/v1/answer", body):
                _wait_for(
                    lambda: _answer_requests(fake) == 1, "the first answer reaching the model"
                )
                refused = httpx.post(
                    f"{served.base}/v1/answer", json={"question": QUESTION}, timeout=60
                )
            assert refused.status_code == 429
            assert refused.json()["error"]["code"] == "too_many_answers"


# --- 3. a JSON answer whose client leaves is cancelled -------------------------------------


@pytest.mark.parametrize(
    ("path", "body_for"),
    [
        ("/v1/answer", lambda question: {"question": question}),
        (
            "/v1/chat/completions",
            lambda question: {"messages": [{"role": "user", "content": question}]},
        ),
    ],
)
def test_a_json_answer_is_cancelled_when_its_client_leaves(
    sample_home: Path, path: str, body_for: Callable[[str], dict[str, object]]
) -> None:
    question = f"What causes Tangier disease? (left {path})"
    with _model_server("hang") as (fake, env):
        env["REACTOME_ANSWERS_MAX_CONCURRENT_ANSWERS"] = "1"
        with serve_command(sample_home, env=env) as served:
            body = json.dumps(body_for(question)).encode()
            with _raw_request(served.base, path, body):
                _wait_for(lambda: _answer_requests(fake) == 1, "the answer reaching the model")
            # The client has gone: the answer ends as cancelled, and its log says so.
            _wait_for(
                lambda: any(log.events and log.events[-1].type == "done"
                            for log in logs_asking(sample_home, question)),
                "the cancelled answer's done",
            )  # fmt: skip
            (log,) = logs_asking(sample_home, question)
            assert [e.data.code for e in log.events if isinstance(e, ErrorEvent)] == ["cancelled"]
            assert log.events[-1].data.state == "failed"  # type: ignore[union-attr]
            # Its slot is free again at once, not when the model would have timed out.
            fake.behaviour = "ok"
            again = httpx.post(f"{served.base}/v1/answer", json={"question": QUESTION}, timeout=60)
            assert again.status_code == 200, again.text
            metrics = httpx.get(f"{served.base}/metrics", timeout=30).text
            assert f'endpoint="{path}",state="failed",status="499"' in metrics


# --- 5. X-Forwarded-For is believed only from proxies the operator names -------------------


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


# --- 6. bodies that cannot be read are a 400 in each protocol's shape ----------------------


NESTED = b"[" * 5_000 + b"]" * 5_000
LONG_NUMBER = b'{"messages": ' + b"1" * 5_000 + b"}"


@pytest.fixture(scope="module")
def keyed(sample_home: Path) -> Iterator[Served]:
    env = {"REACTOME_ANSWERS_API_KEYS": KEY, "REACTOME_ANSWERS_AUTH_FAILURES_PER_MINUTE": "1000"}
    with serve_command(sample_home, env=env) as served:
        yield served
    assert "Traceback" not in served.stderr
    assert "RecursionError" not in served.stderr


def _post(base: str, path: str, body: bytes, key: str | None = KEY) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.post(f"{base}{path}", content=body, headers=headers, timeout=30)


def _is_openai_error(response: httpx.Response) -> dict[str, object]:
    error: dict[str, object] = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    return error


def _is_our_error(response: httpx.Response) -> dict[str, object]:
    error: dict[str, object] = response.json()["error"]
    assert set(error) == {"code", "message"}, error
    return error


@pytest.mark.parametrize("body", [NESTED, LONG_NUMBER], ids=["nested", "long-number"])
def test_an_unreadable_body_is_a_400_in_each_protocols_shape(keyed: Served, body: bytes) -> None:
    openai_reply = _post(keyed.base, "/v1/chat/completions", body)
    assert openai_reply.status_code == 400
    assert _is_openai_error(openai_reply)["type"] == "invalid_request_error"
    for path in ("/api/chat", "/v1/answer", "/v1/answer/stream"):
        reply = _post(keyed.base, path, body)
        assert reply.status_code in (400, 422), (path, reply.text)
        assert _is_our_error(reply)["code"] == "bad_input"


def test_the_openai_routes_refuse_in_openais_shape(keyed: Served) -> None:
    question = json.dumps({"messages": [{"role": "user", "content": QUESTION}]}).encode()
    for refused in (
        _post(keyed.base, "/v1/chat/completions", question, key=None),
        _post(keyed.base, "/v1/chat/completions", question, key="wrong"),
        httpx.get(f"{keyed.base}/v1/models", timeout=30),
    ):
        assert refused.status_code == 401
        assert _is_openai_error(refused)["code"] == "unauthorized"
    too_large = _post(keyed.base, "/v1/chat/completions", b" " * 70_000)
    assert too_large.status_code == 413
    assert _is_openai_error(too_large)["code"] == "too_large"
    not_json = httpx.post(
        f"{keyed.base}/v1/chat/completions",
        content=question,
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "text/plain"},
        timeout=30,
    )
    assert not_json.status_code == 415
    assert _is_openai_error(not_json)["code"] == "bad_input"
    # The openai package reads it as what it is.
    client = openai.OpenAI(base_url=f"{keyed.base}/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as refused_by_sdk:
        client.models.list()
    assert refused_by_sdk.value.code == "unauthorized"
    # Our own routes keep our shape.
    assert _is_our_error(_post(keyed.base, "/v1/answer", question, key=None))


# --- 7. failed keys are slowed down, per client address (issue 37: never a valid key) -------


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


# --- 7. an unhandled error is a 500 in our shape, and counted as one ------------------------


def test_an_unhandled_error_is_a_json_500_and_counted_as_500(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken() -> object:
        raise RuntimeError("a bug")

    pipeline = AnswerPipeline(
        load_settings(event_logs=False),
        answer_model=FakeListChatModel(responses=["unused"]),
        expander_model=FakeListChatModel(responses=["{}"]),
        retriever=RunnableLambda(lambda _question: []),
    )
    monkeypatch.setattr(pipeline.operator, "store_client", broken)
    for base in serve(create_app(pipeline.settings, pipeline=pipeline)):
        reply = httpx.get(f"{base}/v1/collections", timeout=30)
        assert reply.status_code == 500
        assert _is_our_error(reply)["code"] == "internal"
        assert "a bug" not in reply.text
        metrics = httpx.get(f"{base}/metrics", timeout=30).text
        assert 'endpoint="/v1/collections",state="",status="500"} 1.0' in metrics
        assert 'status="0"' not in metrics


# --- 7. usage: the OpenAI endpoint reports what done reports ------------------------------


def test_prompt_tokens_are_counted_and_the_openai_usage_repeats_them(keyed: Served) -> None:
    headers = {"Authorization": f"Bearer {KEY}"}
    ours = httpx.post(
        f"{keyed.base}/v1/answer", json={"question": QUESTION}, headers=headers, timeout=120
    ).json()
    prompt_tokens = ours["usage"]["prompt_tokens"]
    assert isinstance(prompt_tokens, int)
    assert prompt_tokens > 50  # the numbered sources and the question, at least
    client = openai.OpenAI(base_url=f"{keyed.base}/v1", api_key=KEY, max_retries=0)
    reply = client.chat.completions.create(
        model="reactome-answers", messages=[{"role": "user", "content": QUESTION}]
    )
    assert reply.usage is not None
    assert reply.usage.prompt_tokens == prompt_tokens  # the same sources, the same prompt
    assert reply.usage.completion_tokens == ours["usage"]["answer_tokens"]
