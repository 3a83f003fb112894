"""A long answer does not stall the worker (issue 37, item 4): its finishing work (the
finalizer, the evidence, ``done``) runs off the event loop, so other requests are answered
meanwhile. How that work grows with the answer is measured in ``tests/test_linear_regex.py``.

The check is by construction, not by a clock: the handler's ``finish`` is made to wait until
``/healthz`` has answered. Were it on the event loop, ``/healthz`` could not answer and the
request for it would time out; off the loop, it answers, and then the answer completes.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.language_models import FakeListChatModel
from langchain_core.messages import BaseMessage

from app.server import create_app
from callbacks.handler import AnswerEventHandler
from callbacks.log import read_log
from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline
from tests.support.fakes import ScriptedStream
from tests.support.invariants import check_stream
from tests.support.servers import serve
from tests.support.sse import parse_sse

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
