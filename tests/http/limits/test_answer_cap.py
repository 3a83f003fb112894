"""The cap on answers in progress: answers over it get 429 at once while the rest finish, every
route that answers takes a slot and no other does, a request whose body has not arrived holds
none while one whose body has is counted, and the refusal says whether the cap is this
process's or the fleet's; through a real server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, FastAPI
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from pydantic import Field

from app.http.factory import create_app
from app.http.middleware.access import (
    AnswerCap,
    AnswerRoute,
    AnswerSlots,
    answer_paths,
    cap_full_message,
)
from app.http.settings import load_server_settings
from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline
from tests.support.fake_openai import fake_chat, serving_env
from tests.support.fake_pipeline import ABCA1, FakeRetriever
from tests.support.held_requests import answer_requests, model_server, raw_request, wait_for
from tests.support.invariants import check_stream
from tests.support.servers import redis_server, serve, serve_command
from tests.support.sse import parse_sse

QUESTION = "What causes Tangier disease?"
HELD_QUESTION = "What does ABCA1 do?"  # asked of a pipeline whose retriever holds ABCA1


# --- answers over the cap --------------------------------------------------------------------


async def _stream(client: httpx.AsyncClient, base: str, question: str) -> httpx.Response:
    response = await client.post(
        f"{base}/v1/answer/stream", json={"question": question}, timeout=120
    )
    await response.aread()
    return response


@pytest.mark.slow
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


# --- which routes take a slot ----------------------------------------------------------------


@pytest.mark.slow
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


@pytest.mark.slow
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


# --- a slot is taken only once the body has arrived ------------------------------------------


@pytest.mark.slow
def test_stalled_bodies_hold_no_answer_slot(sample_home: Path) -> None:
    env = {"REACTOME_ANSWERS_MAX_CONCURRENT_ANSWERS": "2", "REACTOME_ANSWERS_EVENT_LOGS": "false"}
    body = json.dumps({"question": QUESTION}).encode()
    with serve_command(sample_home, env=env) as served, ExitStack() as stack:
        # Two clients send their headers and never their bodies: as many as the cap.
        for _ in range(2):
            stack.enter_context(raw_request(served.base, "/v1/answer", body, send_body=False))
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


@pytest.mark.slow
def test_the_cap_still_counts_answers_whose_body_has_arrived(sample_home: Path) -> None:
    with model_server("hang") as (fake, env):
        env["REACTOME_ANSWERS_MAX_CONCURRENT_ANSWERS"] = "1"
        env["REACTOME_ANSWERS_EVENT_LOGS"] = "false"
        with serve_command(sample_home, env=env) as served:
            body = json.dumps({"question": QUESTION}).encode()
            with raw_request(served.base, "/v1/answer", body):
                wait_for(lambda: answer_requests(fake) == 1, "the first answer reaching the model")
                refused = httpx.post(
                    f"{served.base}/v1/answer", json={"question": QUESTION}, timeout=60
                )
            assert refused.status_code == 429
            assert refused.json()["error"]["code"] == "too_many_answers"


# --- whose cap a 429 names -------------------------------------------------------------------


class _HeldRetriever(FakeRetriever):
    """Holds each search until :attr:`release` is set: an answer in progress for as long as
    the test needs one."""

    searching: threading.Event = Field(default_factory=threading.Event)
    release: threading.Event = Field(default_factory=threading.Event)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        self.searching.set()
        self.release.wait(60)
        return super()._get_relevant_documents(query, run_manager=run_manager, **kwargs)


def _over_the_cap(**server: Any) -> str:
    """The message a second answer gets while the one slot is taken."""
    held = _HeldRetriever(documents=[ABCA1])
    pipeline = AnswerPipeline(
        load_settings(event_logs=False),
        answer_model=FakeListChatModel(responses=["ABCA1 exports cholesterol [1]."]),
        expander_model=FakeListChatModel(responses=["{}"]),
        retriever=held,
    )
    app = create_app(
        pipeline.settings,
        pipeline=pipeline,
        server=load_server_settings(max_concurrent_answers=1, **server),
    )
    body = {"question": HELD_QUESTION}
    with ExitStack() as stack:
        base = stack.enter_context(contextmanager(serve)(app))
        pool = stack.enter_context(ThreadPoolExecutor(max_workers=1))
        stack.callback(held.release.set)  # whatever happens, the held answer ends
        first = pool.submit(httpx.post, f"{base}/v1/answer", json=body, timeout=60)
        assert held.searching.wait(60), "the first answer never started"
        refused = httpx.post(f"{base}/v1/answer", json=body, timeout=60)
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "too_many_answers"
        held.release.set()
        assert first.result(timeout=60).status_code == 200
        message: str = refused.json()["error"]["message"]
        return message


@pytest.mark.slow  # a `redis-server`
def test_the_cap_refusal_says_whether_the_cap_is_the_process_or_the_fleets() -> None:
    alone = _over_the_cap()
    assert alone == cap_full_message(AnswerSlots(1))
    assert alone.startswith("this server process is writing as many answers as it takes")
    assert "(1)" in alone
    assert "counted per server process" in alone
    with redis_server() as own:
        fleet = _over_the_cap(redis_url=own.url, redis_prefix="issue37-cap")
    assert fleet.startswith("the servers sharing this one's limits are writing as many answers")
    assert "counted across the fleet" in fleet
    assert "this server process" not in fleet
