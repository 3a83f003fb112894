"""The SDK's OTLP exporter against a collector that refuses, recovers, or is not there: no
answer waits or fails for it, what is lost is counted in /metrics, and stderr says once that
export fails and once that it works again. Through a real server on 127.0.0.1, whose
requests carry a caller's traceparent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.http.factory import create_app
from pipelines.pipeline import AnswerPipeline
from tests.support.collector import Collector, collector
from tests.support.servers import free_port, serve
from tests.tracing.test_answer_spans import CALLER_SPAN, CALLER_TRACE, TRACEPARENT, traced_pipeline

FAILING = "trace export to"


def dropped(base: str) -> float:
    text = httpx.get(f"{base}/metrics", timeout=30).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "reactome_answers_trace_spans_dropped_total"
    )


def pipeline_for(home: Path, endpoint: str, monkeypatch: pytest.MonkeyPatch) -> AnswerPipeline:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2")
    pipeline = traced_pipeline(home, exporter=None)  # type: ignore[arg-type]
    assert pipeline.tracer is not None
    return pipeline


@pytest.fixture
def receiver() -> Iterator[Collector]:
    with collector() as found:
        yield found


def ask(base: str, traceparent: str | None = None) -> dict[str, object]:
    headers = {"traceparent": traceparent} if traceparent else {}
    response = httpx.post(
        f"{base}/v1/answer", json={"question": "What does ABCA1 do?"}, headers=headers, timeout=60
    )
    assert response.status_code == 200
    result: dict[str, object] = response.json()
    return result


def test_a_refusing_collector_fails_no_answer_and_its_recovery_is_said_once(
    tmp_path: Path,
    receiver: Collector,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    pipeline = pipeline_for(tmp_path, receiver.url, monkeypatch)
    tracer = pipeline.tracer
    assert tracer is not None
    receiver.status = 400
    for base in serve(create_app(pipeline.settings, pipeline=pipeline)):
        refused = [ask(base), ask(base)]
        assert [answer["state"] for answer in refused] == ["answered", "answered"]
        assert tracer.flush(60)
        assert receiver.requests >= 1
        assert receiver.spans == []
        lost = dropped(base)
        assert lost == tracer.dropped
        assert lost >= 2 * 5  # two answers' spans, five or more each
        receiver.status = 200
        taken = ask(base, TRACEPARENT)
        assert tracer.flush(60)
        assert dropped(base) == lost  # nothing more lost
    said = capfd.readouterr().err
    assert said.count(f"{FAILING} {receiver.url} is failing") == 1
    assert said.count(f"{FAILING} {receiver.url} works again") == 1
    # What the collector took: the third answer, in the caller's trace, under its span.
    assert taken["trace_id"] == CALLER_TRACE
    assert {span.trace_id for span in receiver.spans} == {CALLER_TRACE}
    root = [span for span in receiver.spans if span.name == "answer"]
    assert [span.parent_span_id for span in root] == [CALLER_SPAN]
    assert root[0].attributes["reactome_answers.surface"] == "http"
    assert {span.name for span in receiver.spans} >= {"answer", "retrieval", "answer_model"}


def test_a_collector_that_is_not_there_delays_no_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    pipeline = pipeline_for(tmp_path, nobody, monkeypatch)
    tracer = pipeline.tracer
    assert tracer is not None
    answers = [pipeline.invoke("What does ABCA1 do?") for _ in range(3)]
    assert [answer["state"] for answer in answers] == ["answered"] * 3
    assert all(answer["trace_id"] for answer in answers)
    assert tracer.flush(120)
    assert tracer.dropped >= 3 * 5
    said = capfd.readouterr().err
    assert said.count(f"{FAILING} {nobody} is failing") == 1
    assert "Connection refused" in said or "connect" in said.lower()


def test_a_batch_that_cannot_be_drawn_is_counted_and_the_next_is_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The shipping thread outlives a batch it cannot draw (the secrets it redacts with
    unreadable, say): that batch is counted as dropped, with one line, and later answers are
    sent as ever."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import callbacks.tracing.shipping as shipping
    from pipelines.core.redaction import SecretRedactor, secret_redactor

    exporter = InMemorySpanExporter()
    pipeline = traced_pipeline(tmp_path, exporter)
    tracer = pipeline.tracer
    assert tracer is not None
    calls = []

    def fails_first(*args: object) -> SecretRedactor:
        calls.append(args)
        if len(calls) == 1:
            raise KeyError("SOME_TOKEN")  # os.environ changed under it, say
        return secret_redactor()

    monkeypatch.setattr(shipping, "secret_redactor", fails_first)
    pipeline.invoke("What does ABCA1 do?")
    assert tracer.flush(30)
    lost = tracer.dropped
    assert lost >= 5
    assert exporter.get_finished_spans() == ()
    assert capfd.readouterr().err.count("a batch of traces was not drawn") == 1
    result = pipeline.invoke("What does ABCA1 do?")
    assert tracer.flush(30)
    assert tracer.dropped == lost
    roots = [span for span in exporter.get_finished_spans() if span.name == "answer"]
    assert [f"{span.context.trace_id:032x}" for span in roots] == [result["trace_id"]]
    exporter.shutdown()
