"""A long answer does not stall the worker (issue 37, item 4): its finishing work (the
finalizer, the evidence, ``done``) runs off the event loop, so other requests are answered
meanwhile. How that work grows with the answer is measured in ``tests/core/test_linear_time.py``.

The check is by construction, not by a clock: the handler's ``finish`` is made to wait until
``/healthz`` has answered. Were it on the event loop, ``/healthz`` could not answer and the
request for it would time out; off the loop, it answers, and then the answer completes.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from langchain_core.language_models import FakeListChatModel
from langchain_core.messages import BaseMessage

from app.http.factory import create_app
from callbacks.handler import AnswerEventHandler
from callbacks.log import read_log
from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline
from pipelines.pipeline import _request as request_module
from tests.support.fake_pipeline import ABCA1, CDK5, make_pipeline
from tests.support.fakes import ScriptedStream
from tests.support.invariants import check_stream
from tests.support.servers import serve
from tests.support.sse import parse_sse
from tests.support.waiting import wait_until

# Short cited sentences (the attack used 8,000 in 168 KB): enough that finishing is real work,
# few enough that the offline judge rules on them all in a few seconds.
SENTENCES = 300
WAIT_S = 120  # generous: only a failure ever waits this long


def _long_answer(_: Sequence[BaseMessage]) -> list[str]:
    return [f"ABCA1 moves cholesterol out of cells, step {i} [{i % 2 + 1}]. " for i in
            range(SENTENCES)]  # fmt: skip


@pytest.mark.parametrize("live", [False, True])
def test_healthz_answers_while_a_long_answer_finishes(
    sample_home: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch, live: bool
) -> None:
    entered = threading.Event()
    healthz_answered = threading.Event()
    on_the_loop: list[bool] = []
    real_finish = AnswerEventHandler.finish

    def held_finish(self: AnswerEventHandler, *args: Any, **kwargs: Any) -> Any:
        try:
            asyncio.get_running_loop()
            on_the_loop.append(True)
        except RuntimeError:
            on_the_loop.append(False)
        if (args[0] if args else kwargs.get("state")) == "answered":
            entered.set()
            # Off the loop this waits for /healthz; on it, nothing could answer /healthz.
            healthz_answered.wait(WAIT_S)
        return real_finish(self, *args, **kwargs)

    monkeypatch.setattr(AnswerEventHandler, "finish", held_finish)
    settings = load_settings(home=sample_home, logs_path=isolated_home / "logs")
    pipeline = AnswerPipeline(
        settings,
        answer_model=ScriptedStream(script=_long_answer),
        expander_model=FakeListChatModel(responses=["{}"]),
    )
    answer: dict[str, Any] = {}

    with httpx.Client(timeout=WAIT_S) as client:
        for base in serve(create_app(settings, pipeline=pipeline)):

            def ask(base: str = base) -> None:
                body = {"question": "What causes Tangier disease?", "live_citations": live}
                answer["response"] = client.post(f"{base}/v1/answer/stream", json=body)

            asking = threading.Thread(target=ask)
            asking.start()
            try:
                assert entered.wait(WAIT_S), "the answer never reached its finish"
                health = httpx.get(f"{base}/healthz", timeout=30)
                assert health.status_code == 200
                healthz_answered.set()
            finally:
                healthz_answered.set()
                asking.join(WAIT_S)

    events = parse_sse(answer["response"].text)
    done = check_stream(events)
    assert done.data.state == "answered"
    assert done.data.text.count(". ") >= SENTENCES - 1
    assert on_the_loop == [False]
    (log,) = (isolated_home / "logs").glob("*.jsonl")
    logged = read_log(log)
    assert logged.complete, "done reached the log, written from the loop"
    assert [event.seq for event in logged.events] == [event.seq for event in events]


def test_a_client_leaving_while_the_answer_finishes_still_gets_its_done_logged(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream's reader goes away while ``finish`` runs in its thread, and the work is
    cancelled (Starlette may cancel every await after that, the wait for the work included).
    The log must still end with ``done``, and the answer be counted out once: a review found
    neither held."""
    entered, release = threading.Event(), threading.Event()
    real_finish = AnswerEventHandler.finish

    def held_finish(self: AnswerEventHandler, *args: Any, **kwargs: Any) -> Any:
        if (args[0] if args else kwargs.get("state")) == "answered":
            entered.set()
            release.wait(WAIT_S)
        return real_finish(self, *args, **kwargs)

    working: list[asyncio.Task[Any]] = []
    real_off_the_loop = request_module._off_the_loop

    async def noting_the_task(work: Any) -> Any:
        working.append(asyncio.current_task())  # type: ignore[arg-type]
        return await real_off_the_loop(work)

    monkeypatch.setattr(AnswerEventHandler, "finish", held_finish)
    monkeypatch.setattr(request_module, "_off_the_loop", noting_the_task)
    pipeline, _, _ = make_pipeline([ABCA1, CDK5], "ABCA1 exports cholesterol [1]. CDK5 [2].")
    body = json.dumps({"question": "What does ABCA1 do?"}).encode()
    logs = isolated_home / "logs"
    with contextmanager(serve)(create_app(pipeline.settings, pipeline=pipeline)) as base:
        address = urlsplit(base)
        with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
            sock.sendall(
                b"POST /v1/answer/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            assert entered.wait(WAIT_S), "the answer never reached its finish"
            sock.shutdown(socket.SHUT_RDWR)
        wait_until(lambda: working[-1].cancelling() > 0, what="the work cancelled")
        release.set()
        wait_until(
            lambda: any(read_log(path).complete for path in logs.glob("*.jsonl")),
            what="the log's done",
        )
        (log,) = logs.glob("*.jsonl")
        assert [event.type for event in read_log(log).events][-1] == "done"
        wait_until(lambda: _in_progress(base) == 0.0, what="the answer counted out")


def _in_progress(base: str) -> float:
    metrics = httpx.get(f"{base}/metrics", timeout=30).text
    (line,) = [line for line in metrics.splitlines() if line.startswith(IN_PROGRESS)]
    return float(line.split()[-1])


IN_PROGRESS = "reactome_answers_answers_in_progress "
