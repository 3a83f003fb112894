"""`logs export --otlp`: recorded logs as the spans their live answers made, written as OTLP
JSON lines or sent to a collector; and the way from a log to its trace (`logs show`, the log
page's view)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.cli import main as cli_main
from callbacks.log import list_log_files
from callbacks.log_view import read_log_view
from tests.support.collector import collector
from tests.support.refusal_questions import PERSONAL_CARE
from tests.tracing.test_answer_spans import spans_of, traced_pipeline

TRACE_URL = "http://phoenix.example:6006/redirects/traces/{trace_id}"


def exported_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def spans_in(line: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        span
        for resource in line["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]


def test_logs_export_writes_the_live_spans_as_otlp_json_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exporter = InMemorySpanExporter()
    pipeline = traced_pipeline(tmp_path, exporter)
    answered = pipeline.invoke("What does ABCA1 do?")
    refused = pipeline.invoke(PERSONAL_CARE[0])
    live = spans_of(pipeline, exporter)
    output = tmp_path / "spans.jsonl"
    home = ["--home", str(tmp_path)]
    assert cli_main([*home, "logs", "export", "--otlp", "--output", str(output)]) == 0
    assert "exported 2 logs" in capsys.readouterr().err
    lines = exported_lines(output)
    assert len(lines) == 2
    exported = [span for line in lines for span in spans_in(line)]
    # The very spans the live answers made: ids, parents and names, as OTLP/JSON writes them.
    assert sorted(
        (span["traceId"], span["spanId"], span.get("parentSpanId", ""), span["name"])
        for span in exported
    ) == sorted(
        (
            f"{span.context.trace_id:032x}",
            f"{span.context.span_id:016x}",
            f"{span.parent.span_id:016x}" if span.parent else "",
            span.name,
        )
        for span in live
    )
    assert {span["traceId"] for span in exported} == {
        answered["trace_id"],
        refused["trace_id"],
    }
    root = next(span for span in exported if span["name"] == "answer" and span["traceId"] ==
                answered["trace_id"])  # fmt: skip
    assert root["kind"] == 1  # OTLP/JSON writes enums as numbers: SPAN_KIND_INTERNAL
    attributes = {item["key"]: item["value"] for item in root["attributes"]}
    assert attributes["reactome_answers.state"] == {"stringValue": "answered"}

    # --state selects; a second export appends.
    state = ["--state", "refused"]
    assert cli_main([*home, "logs", "export", "--otlp", *state, "--output", str(output)]) == 0
    lines = exported_lines(output)
    assert len(lines) == 3
    assert {span["traceId"] for span in spans_in(lines[2])} == {refused["trace_id"]}


def test_an_untraced_log_exports_to_the_same_trace_every_time(tmp_path: Path) -> None:
    pipeline = traced_pipeline(tmp_path, InMemorySpanExporter())
    pipeline.tracer = None  # answered untraced: the log names no trace
    assert pipeline.invoke("What does ABCA1 do?")["trace_id"] is None
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    for output in (first, second):
        argv = ["--home", str(tmp_path), "logs", "export", "--otlp", "--output", str(output)]
        assert cli_main(argv) == 0
    ids = [
        sorted((span["traceId"], span["spanId"]) for span in spans_in(exported_lines(path)[0]))
        for path in (first, second)
    ]
    assert ids[0] == ids[1]
    assert len(ids[0]) >= 5


def test_logs_export_sends_to_the_configured_collector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pipeline = traced_pipeline(tmp_path, InMemorySpanExporter())
    answered = pipeline.invoke("What does ABCA1 do?")
    with collector() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        assert cli_main(["--home", str(tmp_path), "logs", "export", "--otlp"]) == 0
        assert {span.trace_id for span in receiver.spans} == {answered["trace_id"]}
        receiver.status = 400
        assert cli_main(["--home", str(tmp_path), "logs", "export", "--otlp"]) == 1
    said = capsys.readouterr().err
    assert f"error: {receiver.url} did not take" in said


def test_logs_export_names_what_it_could_not_read_and_where_to_send(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pipeline = traced_pipeline(tmp_path, InMemorySpanExporter())
    pipeline.invoke("What does ABCA1 do?")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    home = ["--home", str(tmp_path)]
    assert cli_main([*home, "logs", "export", "--otlp"]) == 1
    assert "set OTEL_EXPORTER_OTLP_ENDPOINT" in capsys.readouterr().err
    broken = tmp_path / "logs" / "20260101T000000000000-broken.jsonl"
    broken.write_text("not a log\n", encoding="utf-8")
    output = tmp_path / "spans.jsonl"
    assert cli_main([*home, "logs", "export", "--otlp", "--output", str(output)]) == 1
    said = capsys.readouterr().err
    assert f"skipped {broken}" in said
    assert "exported 1 log (" in said
    assert len(exported_lines(output)) == 1


def test_a_log_links_to_its_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pipeline = traced_pipeline(tmp_path, InMemorySpanExporter())
    trace_id = pipeline.invoke("What does ABCA1 do?")["trace_id"]
    log = list_log_files(tmp_path / "logs")[0]
    view = read_log_view(log, TRACE_URL)
    assert view["trace_id"] == trace_id
    assert view["trace_url"] == TRACE_URL.replace("{trace_id}", str(trace_id))
    # Only an http(s) page is linked: the log page never gets a script for a link.
    assert read_log_view(log, "javascript:alert(1)//{trace_id}")["trace_url"] is None
    monkeypatch.setenv("REACTOME_ANSWERS_TRACE_URL", TRACE_URL)
    assert cli_main(["--home", str(tmp_path), "logs", "show", str(log)]) == 0
    shown = capsys.readouterr()
    assert f"its trace: {view['trace_url']}" in shown.err
    assert all(json.loads(line)["request_id"] for line in shown.out.splitlines())
