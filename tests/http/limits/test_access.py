"""API keys, the answer cap and the rate limit, through the real `serve` on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from fastapi import APIRouter, FastAPI
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient
from langchain_core.language_models import FakeListChatModel

from app.http.factory import create_app
from app.http.middleware.access import (
    AnswerCap,
    AnswerRoute,
    AnswerSlots,
    RateLimiter,
    answer_paths,
)
from app.http.settings import load_server_settings
from pipelines.core.errors import ConfigurationError
from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline
from tests.support.fake_openai import fake_chat, serving_env
from tests.support.invariants import check_stream
from tests.support.servers import Served, serve_command
from tests.support.sse import parse_sse

pytestmark = pytest.mark.slow  # a `serve` subprocess with keys, and the OpenAI client

QUESTION = "What causes Tangier disease?"
KEYS = ["first-key-7f3a9c", "second-key-41be02"]
WRONG = "wrong-key-d00d55"


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
    with serve_command(sample_home, env=env) as served:
        yield served
    for key in [*KEYS, WRONG]:  # not in the server's own output, nor any event log
        assert key not in served.stderr
        for log in (sample_home / "logs").glob("*.jsonl"):
            assert key not in log.read_text()


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_the_page_health_and_limits_need_no_key(keyed: Served) -> None:
    for path in ("/", "/healthz", "/v1/limits", "/static/client.js"):
        assert httpx.get(f"{keyed.base}{path}", timeout=30).status_code == 200, path


@pytest.mark.parametrize(
    ("headers", "said"),
    [
        ({}, "needs an API key"),
        (_bearer(WRONG), "not one this server accepts"),
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


def test_either_right_key_is_served(keyed: Served) -> None:
    for key in KEYS:
        response = httpx.post(
            f"{keyed.base}/v1/answer", json={"question": QUESTION}, headers=_bearer(key), timeout=60
        )
        assert response.status_code == 200
        assert response.json()["state"] == "answered"


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


# --- the cap on answers in progress ----------------------------------------------------------


async def _stream(client: httpx.AsyncClient, base: str, question: str) -> httpx.Response:
    response = await client.post(
        f"{base}/v1/answer/stream", json={"question": question}, timeout=120
    )
    await response.aread()
    return response


def test_answers_over_the_cap_get_429_at_once_and_the_rest_finish(sample_home: Path) -> None:
    # Answers from a model that takes about 2 s each, so that all 20 are asked while the
    # first ones are still being written.
    with fake_chat("ok") as fake:
        fake.slow_delay_s = 0.2
        env = {**serving_env(fake), "REACTOME_ANSWERS_MAX_CONCURRENT_ANSWERS": "4"}
        with serve_command(sample_home, env=env) as served:

            async def offer() -> list[tuple[httpx.Response, int]]:
                limits = httpx.Limits(max_connections=40)
                finished = 0  # how many responses had ended before each one did
                async with httpx.AsyncClient(limits=limits) as client:

                    async def ordered() -> tuple[httpx.Response, int]:
                        nonlocal finished
                        response = await _stream(client, served.base, f"Say slowly: {QUESTION}")
                        finished += 1
                        return response, finished

                    return await asyncio.gather(*(ordered() for _ in range(20)))

            results = asyncio.run(offer())
    refused = [(r, order) for r, order in results if r.status_code == 429]
    admitted = [r for r, _ in results if r.status_code == 200]
    statuses = [response.status_code for response, _ in results]
    assert len(admitted) == 4, statuses
    assert len(refused) == 16, statuses
    for response, order in refused:
        assert response.headers["retry-after"] == "1"
        assert response.json()["error"]["code"] == "too_many_answers"
        assert order <= 16  # at once: before any admitted answer had ended
    for response in admitted:
        done = check_stream(parse_sse(response.text))
        assert done.data.state == "answered"


def test_every_route_that_answers_takes_a_slot(tmp_path: Path) -> None:
    settings = load_settings(home=tmp_path, event_logs=False)
    pipeline = AnswerPipeline(settings, answer_model=FakeListChatModel(responses=["x"]),
                              expander_model=FakeListChatModel(responses=["{}"]))  # fmt: skip
    app = create_app(settings, pipeline=pipeline)
    posts = {
        context.path
        for context in iter_route_contexts(app.routes)
        if "POST" in (context.methods or ())
    }
    # Every POST route that answers a question is capped; nothing else is (feedback is no
    # answer: rating one must not wait for a slot).
    feedback = "/v1/answers/{request_id}/feedback"
    assert answer_paths(app.routes) == posts - {feedback}
    answering = {"/v1/answer", "/v1/answer/stream", "/v1/chat/completions", "/api/chat"}
    assert posts == answering | {feedback}


def test_a_route_added_to_an_answering_router_is_capped() -> None:
    answering = APIRouter(route_class=AnswerRoute)
    surface = APIRouter()

    @answering.post("/v1/answer/new")
    async def new_answer() -> dict[str, str]:
        return {"text": "answered"}

    @surface.post("/v1/feedback")
    async def feedback() -> dict[str, str]:
        return {"thanks": "noted"}

    surface.include_router(answering)
    app = FastAPI()
    app.include_router(surface)
    assert answer_paths(app.routes) == {"/v1/answer/new"}

    slots = AnswerSlots(1)
    assert slots.try_take()  # the one slot is busy with another answer
    app.add_middleware(AnswerCap, slots=slots, paths=answer_paths(app.routes))
    with TestClient(app) as client:
        refused = client.post("/v1/answer/new")
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "too_many_answers"
        assert client.post("/v1/feedback").status_code == 200


# --- the rate limit ----------------------------------------------------------------------------


def test_the_rate_limit_refuses_beyond_a_minutes_worth(sample_home: Path) -> None:
    env = {"REACTOME_ANSWERS_RATE_LIMIT": "3", "REACTOME_ANSWERS_API_KEYS": ",".join(KEYS)}
    with serve_command(sample_home, env=env) as served:
        statuses = []
        for _ in range(4):
            response = httpx.get(
                f"{served.base}/v1/collections", headers=_bearer(KEYS[0]), timeout=30
            )
            statuses.append(response.status_code)
        assert statuses == [200, 200, 200, 429]
        assert response.json()["error"]["code"] == "rate_limited"
        assert 1 <= int(response.headers["retry-after"]) <= 20  # one request per 20 s
        # Per key: the other key has its own minute.
        other = httpx.get(f"{served.base}/v1/collections", headers=_bearer(KEYS[1]), timeout=30)
        assert other.status_code == 200
        # And health checks are never limited.
        assert httpx.get(f"{served.base}/healthz", timeout=30).status_code == 200


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
