"""The HTTP backend served by uvicorn on 127.0.0.1, read by a real SSE client (httpx-sse)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import FakeListChatModel
from langchain_core.runnables import RunnableLambda

from app.http.factory import create_app
from callbacks.events import ErrorEvent, Event, parse_event
from callbacks.log import read_log
from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline
from tests.support.cli import cli
from tests.support.fakes import ScriptedStream
from tests.support.invariants import check_stream
from tests.support.servers import serve, serve_command


@pytest.fixture(scope="module")
def base_url(sample_home: Path, minilm: Embeddings) -> Iterator[str]:
    settings = load_settings(home=sample_home)
    pipeline = AnswerPipeline(settings, embeddings=minilm, raise_handler_errors=True)
    yield from serve(create_app(settings, pipeline=pipeline))


def stream(base: str, body: dict[str, Any]) -> tuple[httpx.Response, list[Event]]:
    with (
        httpx.Client(timeout=60) as client,
        connect_sse(client, "POST", f"{base}/v1/answer/stream", json=body) as source,
    ):
        events = [parse_event(frame.data) for frame in source.iter_sse()]
        return source.response, events


def test_sse_stream_is_well_formed(base_url: str) -> None:
    response, events = stream(base_url, {"question": "What causes Tangier disease?"})
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-cache, no-transform"
    assert response.headers["x-accel-buffering"] == "no"
    done = check_stream(events)
    assert done.data.state == "answered"
    assert "R-HSA-5682113" in [r.st_id for r in done.data.references]


def test_json_and_sse_agree(base_url: str) -> None:
    body = {"question": "What is the role of CDK5 in Alzheimer's disease?"}
    result = httpx.post(f"{base_url}/v1/answer", json=body, timeout=60).json()
    _, events = stream(base_url, body)
    done = check_stream(events)
    assert result["text"] == done.data.text
    assert result["references"] == [r.model_dump(mode="json") for r in done.data.references]
    assert result["request_id"]
    assert result["request_id"] != done.request_id


def test_options_reach_the_pipeline(base_url: str) -> None:
    body = {"question": "How do I use the pathway browser?", "cite_urls": True,
            "history": [{"role": "user", "content": "Hi"}]}  # fmt: skip
    _, events = stream(base_url, body)
    done = check_stream(events)
    assert done.data.references
    assert all(r.url for r in done.data.references)
    _, events = stream(base_url, {"question": "What causes Tangier disease?",
                                  "collections": ["userguide"]})  # fmt: skip
    assert all(e.data.collection == "userguide" for e in events if e.type == "citation")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "question: Field required"),
        ({"question": ""}, "question: is empty or only white space; ask a question"),
        ({"question": "q", "colour": "red"}, "colour: Extra inputs are not permitted"),
        ({"question": "q", "collections": ["pathways"]}, "collections.0: Input should be"),
        ({"question": "q" * 2001}, "The question is 2,001 characters; the limit is 2,000."),
    ],
)
def test_bad_requests_are_422_with_a_message(
    base_url: str, body: dict[str, Any], message: str
) -> None:
    for path in ("/v1/answer", "/v1/answer/stream"):
        response = httpx.post(f"{base_url}{path}", json=body, timeout=30)
        assert response.status_code == 422
        error = response.json()["error"]
        assert error["code"] == "bad_input"
        assert message in error["message"]


def test_the_limits_a_client_reads_are_the_ones_kept(base_url: str) -> None:
    limits = httpx.get(f"{base_url}/v1/limits").json()
    assert limits == {"max_question_chars": 2000, "max_turns": 50, "max_turn_chars": 20_000,
                      "feedback": limits["feedback"], "logs": limits["logs"]}  # fmt: skip
    most, turns, longest = (limits[name] for name in ("max_question_chars", "max_turns",
                                                      "max_turn_chars"))  # fmt: skip

    def status(question_chars: int, turn_chars: list[int]) -> int:
        history = [{"role": "user", "content": "x" * chars} for chars in turn_chars]
        body = {"question": "q" * question_chars, "history": history}
        return httpx.post(f"{base_url}/v1/answer", json=body, timeout=120).status_code

    # Every limit reached at once (one turn at its longest, so that the body stays under its
    # own limit) is answered; one over any of them is refused.
    assert status(most, [longest] + [1] * (turns - 1)) == 200
    assert status(most + 1, []) == 422
    assert status(10, [1] * (turns + 1)) == 422
    assert status(10, [longest + 1]) == 422


def test_the_limits_follow_the_settings(tmp_path: Path) -> None:
    settings = load_settings(home=tmp_path / "empty", max_question_chars=300)
    pipeline = AnswerPipeline(settings, answer_model=FakeListChatModel(responses=["x"]),
                              expander_model=FakeListChatModel(responses=["x"]))  # fmt: skip
    for base in serve(create_app(settings, pipeline=pipeline)):
        assert httpx.get(f"{base}/v1/limits").json()["max_question_chars"] == 300


@pytest.mark.slow  # the installed command too
def test_a_too_long_question_is_refused_in_the_same_words_everywhere(
    base_url: str, sample_home: Path
) -> None:
    question = "Why? " * 401
    said = "The question is 2,005 characters; the limit is 2,000. Ask something shorter."
    messages = {
        "/v1/answer": {"question": question},
        "/v1/answer/stream": {"question": question},
        "/v1/chat/completions": {"messages": [{"role": "user", "content": question}]},
        "/api/chat": {
            "messages": [{"role": "user", "parts": [{"type": "text", "text": question}]}]
        },
    }
    heard = {
        path: httpx.post(f"{base_url}{path}", json=body, timeout=30).json()["error"]["message"]
        for path, body in messages.items()
    }
    asked = cli(sample_home, "--no-log", "ask", question)
    heard["ask"] = asked.stdout.strip()
    assert heard == dict.fromkeys(heard, said)


def test_oversized_body_is_413(base_url: str) -> None:
    response = httpx.post(f"{base_url}/v1/answer", content=b"x" * 70_000, timeout=30,
                          headers={"content-type": "application/json"})  # fmt: skip
    assert response.status_code == 413
    assert "bytes" in response.json()["error"]["message"]


def test_health_collections_and_docs(base_url: str) -> None:
    health = httpx.get(f"{base_url}/healthz").json()
    assert health["status"] == "ok"
    assert health["missing"] == []
    listed = httpx.get(f"{base_url}/v1/collections").json()
    assert [c["name"] for c in listed] == ["reactome", "disease_variants", "userguide"]
    assert httpx.get(f"{base_url}/docs").status_code == 200
    paths = httpx.get(f"{base_url}/openapi.json").json()["paths"]
    assert {"/v1/answer", "/v1/answer/stream", "/healthz", "/v1/collections"} <= set(paths)
    # Each surface under its own heading in /docs, none under "default".
    tags = {f"{method.upper()} {path}": operation.get("tags") for path, item in paths.items()
            for method, operation in item.items()}  # fmt: skip
    assert [operation for operation, tagged in tags.items() if not tagged] == []
    assert tags["POST /v1/answer/stream"] == ["answers"]
    assert tags["POST /v1/chat/completions"] == ["OpenAI"]
    assert tags["POST /api/chat"] == ["AI SDK"]
    assert tags["GET /healthz"] == ["operations"]


def test_health_without_a_store_is_503(tmp_path: Path) -> None:
    settings = load_settings(home=tmp_path / "empty")
    pipeline = AnswerPipeline(settings, answer_model=FakeListChatModel(responses=["x"]),
                              expander_model=FakeListChatModel(responses=["x"]))  # fmt: skip
    for base in serve(create_app(settings, pipeline=pipeline)):
        response = httpx.get(f"{base}/healthz")
        assert response.status_code == 503
        assert response.json()["missing"] == ["reactome", "disease_variants", "userguide"]


def test_concurrent_streams_stay_separate(base_url: str) -> None:
    questions = ["What causes Tangier disease?", "What does IDH1 R132H do?",
                 "How do I use the pathway browser?", "What is glycolysis?"] * 3  # fmt: skip

    async def one(client: httpx.AsyncClient, question: str) -> list[Event]:
        async with client.stream("POST", f"{base_url}/v1/answer/stream",
                                 json={"question": question}) as response:  # fmt: skip
            events = []
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    events.append(parse_event(line.removeprefix("data: ")))
            return events

    async def all_of_them() -> list[list[Event]]:
        async with httpx.AsyncClient(timeout=120) as client:
            return list(await asyncio.gather(*(one(client, q) for q in questions)))

    streams = asyncio.run(all_of_them())
    ids = set()
    for question, events in zip(questions, streams, strict=True):
        check_stream(events)
        assert events[0].data.question == question  # type: ignore[union-attr]
        ids.add(events[0].request_id)
    assert len(ids) == len(questions)


@pytest.mark.slow  # waits out request limits
def test_disconnect_cancels_generation_and_timeouts_fail_cleanly(
    sample_home: Path, minilm: Embeddings
) -> None:
    # One token every 50 ms for 200 s, recorded as produced, so the test can see generation
    # stop. The request limit is far beyond the test, so only the disconnect can end it.
    ticker = ScriptedStream(script=lambda _: ["tick "] * 4000, delay_s=0.05, produced=[])

    def app_for(request_timeout_s: float) -> Any:
        settings = load_settings(home=sample_home, request_timeout_s=request_timeout_s)
        pipeline = AnswerPipeline(settings, embeddings=minilm, answer_model=ticker,
                                  expander_model=FakeListChatModel(responses=["{}"]))  # fmt: skip
        return create_app(settings, pipeline=pipeline)

    for base in serve(app_for(600)):
        with (
            httpx.Client(timeout=60) as client,
            connect_sse(
                client, "POST", f"{base}/v1/answer/stream", json={"question": "What is ABCA1?"}
            ) as source,
        ):
            for frame in source.iter_sse():
                request_id = parse_event(frame.data).request_id
                if frame.event == "token":
                    break
        # The log records the cancellation and is complete: error, then done. Waited for
        # (the server notices the disconnect when it next writes, later on a busy machine).
        deadline = time.monotonic() + 60
        while True:
            found = list((sample_home / "logs").glob(f"*-{request_id}.jsonl"))
            logged = read_log(found[0]).events if found else []
            if logged and logged[-1].type == "done":
                break
            assert time.monotonic() < deadline, "the cancelled answer's log never ended"
            time.sleep(0.05)
        assert [e.data.code for e in logged if isinstance(e, ErrorEvent)] == ["cancelled"]
        # By then the model has stopped: nothing more is produced, however long one looks.
        produced = len(ticker.produced)
        assert produced < 4000
        time.sleep(1.0)
        assert len(ticker.produced) == produced, "the model kept generating for nobody"

    for base in serve(app_for(3)):
        _, events = stream(base, {"question": "What is ABCA1?"})
        done = check_stream(events)
        assert done.data.state == "failed"
        assert [e.data.code for e in events if isinstance(e, ErrorEvent)] == ["timeout"]


@pytest.mark.slow  # a `serve` subprocess
def test_serve_command_starts_the_api(sample_home: Path) -> None:
    with serve_command(sample_home) as served:
        assert httpx.get(f"{served.base}/healthz").json()["status"] == "ok"
        body = {"question": "What causes Tangier disease?"}
        answer = httpx.post(f"{served.base}/v1/answer", json=body, timeout=60)
        assert answer.json()["state"] == "answered"
    assert f"serving on {served.base}/" in served.stderr


def test_housekeeping_that_fails_keeps_running_and_never_stops_the_server(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import app.http.factory

    calls: list[float] = []

    def breaking() -> None:
        calls.append(time.monotonic())
        raise RuntimeError("the store went away")

    monkeypatch.setattr(app.http.factory, "RETIRED_EVERY_S", 0.01)
    pipeline = AnswerPipeline(
        load_settings(event_logs=False),
        answer_model=FakeListChatModel(responses=["unused"]),
        expander_model=FakeListChatModel(responses=["{}"]),
        retriever=RunnableLambda(lambda _question: []),
    )
    monkeypatch.setattr(pipeline.operator, "remove_retired_versions", breaking)
    for _ in serve(create_app(pipeline.settings, pipeline=pipeline)):
        deadline = time.monotonic() + 120
        while len(calls) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
    assert len(calls) >= 3  # it went on after the first failure, and the server stopped cleanly
    assert "collection housekeeping not done (RuntimeError" in capsys.readouterr().err
