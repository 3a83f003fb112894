"""Events already waiting come as one batch (what an SSE writer sends in one write), in the
order and with the content the event stream has one by one."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from callbacks.events import DoneEvent, ErrorEvent, Event, TokenEvent
from callbacks.log import read_log
from pipelines.core.options import RequestOptions
from pipelines.core.tokens import count_tokens
from tests.support.fake_pipeline import ABCA1, CDK5, VARIANT, make_pipeline
from tests.support.invariants import check_stream
from tests.support.waiting import only_this_task_left

ANSWER = "ABCA1 moves cholesterol [1]. Its W590S variant cannot [3]."


def _shape(events: list[Event]) -> list[tuple[str, Any]]:
    """What a reader sees of each event, less its times and request id."""
    return [(event.type, event.data.model_dump(exclude={"timings"})) for event in events]


def test_a_reader_that_waits_gets_what_waited_in_one_batch() -> None:
    pipeline, _, _ = make_pipeline([ABCA1, CDK5, VARIANT], ANSWER)

    async def read() -> list[list[Event]]:
        batches = pipeline.event_batches("What does ABCA1 do?", RequestOptions())
        try:
            first = await anext(batches)
            await only_this_task_left()  # a slow reader: everything else is emitted meanwhile
            return [first, *[batch async for batch in batches]]
        finally:
            await batches.aclose()

    batches = asyncio.run(read())
    events = [event for batch in batches for event in batch]
    check_stream(events)
    assert len(batches) == 2
    # One character a token: the whole answer, done last, waited for the second read.
    assert sum(isinstance(event, TokenEvent) for event in batches[1]) == len(ANSWER)
    assert isinstance(batches[1][-1], DoneEvent)
    # The same stream as the events one by one.
    again, _, _ = make_pipeline([ABCA1, CDK5, VARIANT], ANSWER)
    assert _shape(events) == _shape(list(again.stream("What does ABCA1 do?")))


def test_a_reader_that_leaves_after_start_ends_the_work_and_its_log(isolated_home: Path) -> None:
    pipeline, _, _ = make_pipeline([ABCA1, CDK5, VARIANT], ANSWER * 50)

    async def leave_after_first() -> list[Event]:
        batches = pipeline.event_batches("What does ABCA1 do?", RequestOptions())
        first = await anext(batches)
        await batches.aclose()
        await only_this_task_left()  # bounded: the model's work was cancelled, not left to run on
        return first

    first = asyncio.run(leave_after_first())
    assert [event.type for event in first] == ["start"]
    # The work never began; its log still ends with done, as cancelled.
    (path,) = (isolated_home / "logs").glob("*.jsonl")
    logged = read_log(path).events
    assert [event.type for event in logged] == ["start", "error", "done"]
    error, done = logged[1], logged[2]
    assert isinstance(error, ErrorEvent)
    assert error.data.code == "cancelled"
    assert isinstance(done, DoneEvent)
    assert done.data.state == "failed"


def test_the_prompt_is_counted_the_same_with_a_log_and_without() -> None:
    # Without a log or a trace nothing records the model's start, and the prompt is counted
    # at the end instead: the same count as the log's, which is the model input's.
    counts = []
    for logs in (True, False):
        pipeline, _, _ = make_pipeline([ABCA1, CDK5, VARIANT], ANSWER, event_logs=logs)
        done = list(pipeline.stream("What does ABCA1 do?"))[-1]
        assert isinstance(done, DoneEvent)
        counts.append(done.data.usage.prompt_tokens)
        if logs:
            (path,) = pipeline.settings.logs_dir.glob("*.jsonl")
            (start,) = [
                r for r in read_log(path).callbacks
                if r.get("hook") == "model_start" and "prompt_tokens" in r
            ]  # fmt: skip
            joined = "\n".join(m["content"] for m in start["messages"])
            assert start["prompt_tokens"] == count_tokens(joined)
    assert counts[0] == counts[1]
    assert counts[0] is not None
    assert counts[0] > 20
