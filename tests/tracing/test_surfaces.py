"""One trace per answer on every surface, each root span naming its surface and continuing
the caller's trace where the surface can carry one: the native JSON and SSE routes, OpenAI's
and the AI SDK's, MCP over Streamable HTTP (the SDK's own client), the command line (its
TRACEPARENT variable), the pipeline's four ways of asking and its Runnable."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.cli import main as cli_main
from app.http.factory import create_app
from callbacks.tracing.tracer import tracer_from_environ
from pipelines.pipeline import AnswerPipeline
from tests.support.collector import collector
from tests.support.servers import serve
from tests.tracing.test_answer_spans import CALLER_SPAN, CALLER_TRACE, TRACEPARENT, traced_pipeline

QUESTION = "What does ABCA1 do?"
CALLER = {"traceparent": TRACEPARENT}


def roots(exporter: InMemorySpanExporter, pipeline: AnswerPipeline) -> list[ReadableSpan]:
    assert pipeline.tracer is not None
    assert pipeline.tracer.flush(60)
    return [span for span in exporter.get_finished_spans() if span.name == "answer"]


def surface_and_caller(span: ReadableSpan) -> tuple[Any, str | None]:
    caller = f"{span.parent.span_id:016x}" if span.parent is not None else None
    return (span.attributes or {}).get("reactome_answers.surface"), caller


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    found = InMemorySpanExporter()
    yield found
    found.shutdown()


async def ask_over_mcp(base: str) -> None:
    async with (
        httpx2.AsyncClient(headers=CALLER, timeout=httpx2.Timeout(30, read=120)) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client,
    ):
        result = await client.call_tool("ask_reactome", {"question": QUESTION})
        assert not result.is_error


def test_every_http_surface_names_itself_and_continues_the_callers_trace(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    pipeline = traced_pipeline(tmp_path, exporter)
    chat = {"model": "reactome-answers", "messages": [{"role": "user", "content": QUESTION}]}
    ui = {"messages": [{"role": "user", "parts": [{"type": "text", "text": QUESTION}]}]}
    asked: list[str] = []
    for base in serve(create_app(pipeline.settings, pipeline=pipeline)):
        for path, body, surface in (
            ("/v1/answer", {"question": QUESTION}, "http"),
            ("/v1/answer/stream", {"question": QUESTION}, "sse"),
            ("/v1/chat/completions", chat, "openai"),
            ("/api/chat", ui, "ai_sdk"),
        ):
            response = httpx.post(f"{base}{path}", json=body, headers=CALLER, timeout=60)
            assert response.status_code == 200, (path, response.text[:200])
            asked.append(surface)
            # One surface at a time: each answer's trace is found as the latest root.
            found = roots(exporter, pipeline)
            assert surface_and_caller(found[-1]) == (surface, CALLER_SPAN)
            assert found[-1].kind.name == "SERVER"
        asyncio.run(ask_over_mcp(base))
        asked.append("mcp")
    found = roots(exporter, pipeline)
    assert [surface_and_caller(span) for span in found] == [
        (surface, CALLER_SPAN) for surface in asked
    ]
    assert {f"{span.context.trace_id:032x}" for span in found} == {CALLER_TRACE}


def test_the_pipelines_own_ways_and_its_runnable(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    pipeline = traced_pipeline(tmp_path, exporter)

    async def asynchronously() -> list[dict[str, Any]]:
        streamed = [event async for event in pipeline.astream(QUESTION)]
        return [streamed[-1].data.model_dump(), await pipeline.ainvoke(QUESTION)]

    results = [
        list(pipeline.stream(QUESTION))[-1].data.model_dump(),
        pipeline.invoke(QUESTION),
        *asyncio.run(asynchronously()),
        pipeline.as_runnable().invoke({"question": QUESTION}),
    ]
    found = roots(exporter, pipeline)
    assert [surface_and_caller(span)[0] for span in found] == ["python"] * 4 + ["runnable"]
    assert [result["trace_id"] for result in results] == [
        f"{span.context.trace_id:032x}" for span in found
    ]
    assert len({result["trace_id"] for result in results}) == 5  # a trace each


def test_the_command_line_continues_the_trace_its_environment_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with collector() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        monkeypatch.setenv("TRACEPARENT", TRACEPARENT)
        # Nothing is ingested in this home: the answer fails, and is traced all the same.
        cli_main(["--home", str(tmp_path), "ask", "--json", QUESTION])
        tracer = tracer_from_environ()
        assert tracer is not None
        assert tracer.flush(60)
        root = [span for span in receiver.spans if span.name == "answer"]
    said = capsys.readouterr()
    assert CALLER_TRACE in said.out
    assert [(span.trace_id, span.parent_span_id) for span in root] == [(CALLER_TRACE, CALLER_SPAN)]
    assert root[0].attributes["reactome_answers.surface"] == "cli"
