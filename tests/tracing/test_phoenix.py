"""Answers traced into a real Arize Phoenix, read back with Phoenix's own client: the real
pipeline over the ingested sample, served on 127.0.0.1, asked through the native SSE route
and OpenAI's with a caller's traceparent; and recorded logs exported into it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.embeddings import Embeddings

from app.cli import main as cli_main
from app.http.factory import create_app
from callbacks.events import CitationEvent, DoneEvent
from callbacks.log import list_log_files, read_log
from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline
from tests.support.phoenix import phoenix_server, phoenix_spans
from tests.support.servers import serve
from tests.support.sse import parse_sse

pytestmark = pytest.mark.slow  # Phoenix in a subprocess (about 12 s to start)

CALLER_TRACE = "5b8aa5a2d2c872e8321cf37308d69df2"
CALLER_SPAN = "051581bf3cb55c13"
QUESTION = "What causes Tangier disease, and what does ABCA1 do?"


@pytest.fixture(scope="module")
def phoenix() -> Iterator[str]:
    with phoenix_server() as base:
        yield base


def traced(
    home: Path, minilm: Embeddings, phoenix: str, monkeypatch: pytest.MonkeyPatch, logs: Path
) -> AnswerPipeline:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix)
    settings = load_settings(home=home, logs_path=logs)
    pipeline = AnswerPipeline(settings, embeddings=minilm)
    assert pipeline.tracer is not None
    return pipeline


def named(spans: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {span["name"]: span for span in spans}


def documents(span: dict[str, Any]) -> list[str]:
    attributes = span["attributes"]
    found: list[str] = []
    while f"retrieval.documents.{len(found)}.document.id" in attributes:
        found.append(attributes[f"retrieval.documents.{len(found)}.document.id"])
    return found


def test_answers_traced_live_are_read_back_from_phoenix(
    sample_home: Path,
    minilm: Embeddings,
    phoenix: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    pipeline = traced(sample_home, minilm, phoenix, monkeypatch, tmp_path / "logs")
    traceparent = {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"}
    for base in serve(create_app(pipeline.settings, pipeline=pipeline)):
        streamed = httpx.post(
            f"{base}/v1/answer/stream",
            json={"question": QUESTION},
            headers=traceparent,
            timeout=120,
        )
        events = parse_sse(streamed.text)
        chat = httpx.post(
            f"{base}/v1/chat/completions",
            json={"model": "reactome-answers", "messages": [{"role": "user", "content": QUESTION}]},
            timeout=120,
        )
        assert chat.status_code == 200
    assert pipeline.tracer is not None
    assert pipeline.tracer.flush(120)
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.data.state == "answered"
    assert done.data.trace_id == CALLER_TRACE

    spans = phoenix_spans(phoenix, [CALLER_TRACE])
    by_name = named(spans)
    assert {name: span["span_kind"] for name, span in by_name.items()} == {
        "answer": "CHAIN",
        "advice_gate": "GUARDRAIL",
        "retrieval": "RETRIEVER",
        "expander": "LLM",
        "answer_model": "LLM",
        "evidence": "EVALUATOR",
        "finalize": "CHAIN",
    }
    root = by_name["answer"]
    assert root["parent_id"] == CALLER_SPAN  # the caller's trace continued
    assert root["attributes"]["reactome_answers.surface"] == "sse"
    ids = {span["name"]: span["context"]["span_id"] for span in spans}
    parents = {span["name"]: span["parent_id"] for span in spans}
    assert parents["retrieval"] == parents["answer_model"] == ids["answer"]
    assert parents["expander"] == parents["advice_gate"] == ids["retrieval"]

    # The retriever's documents are the citation events, in their order.
    cited = [event.data.st_id or event.data.url for event in events
             if isinstance(event, CitationEvent)]  # fmt: skip
    assert cited
    assert documents(by_name["retrieval"]) == cited
    model = by_name["answer_model"]["attributes"]
    assert model["gen_ai.operation.name"] == "chat"
    assert model["gen_ai.usage.input_tokens"] == done.data.usage.prompt_tokens
    rulings = [
        e for e in by_name["answer_model"]["events"] if e["name"] == "gen_ai.evaluation.result"
    ]
    assert len(rulings) == len(done.data.evidence) > 0
    assert [e["attributes"]["reactome_answers.evidence.source_id"] for e in rulings] == [
        done.data.references[item.n - 1].st_id for item in done.data.evidence
    ]

    # The OpenAI route's answer is a trace of its own, named by its surface.
    headers = [read_log(path).header for path in list_log_files(tmp_path / "logs")]
    chat_trace = next(header.trace_id for header in headers if header.surface == "openai")
    assert chat_trace is not None
    chat_root = named(phoenix_spans(phoenix, [chat_trace]))["answer"]
    assert chat_root["parent_id"] is None
    assert chat_root["attributes"]["reactome_answers.surface"] == "openai"


def test_logs_exported_are_read_back_from_phoenix(
    sample_home: Path,
    minilm: Embeddings,
    phoenix: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs = tmp_path / "logs"
    untraced = AnswerPipeline(load_settings(home=sample_home, logs_path=logs), embeddings=minilm)
    assert untraced.tracer is None
    assert untraced.invoke(QUESTION)["trace_id"] is None
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix)
    monkeypatch.setenv("REACTOME_ANSWERS_LOGS_DIR", str(logs))
    assert cli_main(["--home", str(sample_home), "logs", "export", "--otlp"]) == 0
    assert "exported 1 log" in capsys.readouterr().err
    output = tmp_path / "spans.jsonl"
    argv = ["--home", str(sample_home), "logs", "export", "--otlp", "--output", str(output)]
    assert cli_main(argv) == 0
    written = json.loads(output.read_text(encoding="utf-8"))
    trace_id = written["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]
    spans = phoenix_spans(phoenix, [trace_id])
    assert sorted(span["name"] for span in spans) == sorted(
        span["name"] for span in written["resourceSpans"][0]["scopeSpans"][0]["spans"]
    )
    retrieval = named(spans)["retrieval"]
    recorded = read_log(list_log_files(logs)[0])
    cited = [event.data.st_id for event in recorded.events if isinstance(event, CitationEvent)]
    assert documents(retrieval) == cited
