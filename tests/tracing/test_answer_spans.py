"""Each answer's trace through the SDK's in-memory exporter: the span tree, the retriever's
documents, the model and the evaluation events, every state an answer ends in, and the same
spans drawn again from the answer's event log."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel, FakeListChatModel
from langchain_core.messages import BaseMessage
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from callbacks.events import CitationEvent, DoneEvent
from callbacks.log import list_log_files, read_log
from callbacks.tracing.spans import AnswerRecords, answer_spans
from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline
from tests.support.fake_pipeline import ABCA1, GUIDE, VARIANT, FakeRetriever
from tests.support.fakes import ScriptedStream
from tests.support.refusal_questions import PERSONAL_CARE

CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
ANSWER = "ABCA1 exports cholesterol to apolipoprotein A-I [1]. W590S breaks it [2]."


def breaks_after_a_token(_: Sequence[BaseMessage]) -> Iterator[str]:
    yield "ABCA1 "
    raise RuntimeError("the model server went away")


def traced_pipeline(
    home: Path,
    exporter: InMemorySpanExporter,
    *,
    documents: list[Any] | None = None,
    answer: BaseChatModel | None = None,
    **settings: Any,
) -> AnswerPipeline:
    retriever = FakeRetriever(
        documents=[ABCA1, VARIANT, GUIDE] if documents is None else documents,
        expander=FakeListChatModel(responses=["ABCA1 cholesterol"]),
    )
    return AnswerPipeline(
        load_settings(home=home, **settings),
        answer_model=answer or FakeListChatModel(responses=[ANSWER]),
        expander_model=FakeListChatModel(responses=["unused"]),
        retriever=retriever,
        raise_handler_errors=True,
        span_exporter=exporter,
    )


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    found = InMemorySpanExporter()
    yield found
    found.shutdown()


def spans_of(pipeline: AnswerPipeline, exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    assert pipeline.tracer is not None
    assert pipeline.tracer.flush(60), "the spans were not exported within a minute"
    return list(exporter.get_finished_spans())


def attrs(item: ReadableSpan | Event) -> dict[str, Any]:
    return dict(item.attributes or {})


def by_name(spans: list[ReadableSpan]) -> dict[str, ReadableSpan]:
    return {span.name: span for span in spans}


def parent_name(span: ReadableSpan, spans: list[ReadableSpan]) -> str | None:
    if span.parent is None:
        return None
    for other in spans:
        if other.context.span_id == span.parent.span_id:
            return other.name
    return "(outside)"


# Without a log the trace alone reads the records, once the answer has ended: the prompt is
# counted at the end, as with no record at all, and the span takes its count from done.
@pytest.mark.parametrize("logged", [True, False], ids=["logged", "trace-only"])
def test_an_answer_is_one_trace_with_its_sources_model_and_rulings(
    tmp_path: Path, exporter: InMemorySpanExporter, logged: bool
) -> None:
    pipeline = traced_pipeline(tmp_path, exporter, event_logs=logged)
    events = list(pipeline.stream("What does ABCA1 do?"))
    assert isinstance(events[-1], DoneEvent)
    done = events[-1].data
    spans = spans_of(pipeline, exporter)
    named = by_name(spans)

    assert {f"{span.context.trace_id:032x}" for span in spans} == {done.trace_id}
    assert {name: parent_name(span, spans) for name, span in named.items()} == {
        "answer": None,
        "retrieval": "answer",
        "model": "retrieval",  # the fake retriever's expander call
        "answer_model": "answer",
        "evidence": "answer",
        "finalize": "answer",
    }
    root = named["answer"]
    assert attrs(root)["reactome_answers.state"] == "answered"
    assert attrs(root)["reactome_answers.request_id"] == events[0].request_id
    assert list(attrs(root)["reactome_answers.references"]) == [
        reference.st_id for reference in done.references
    ]
    assert root.status.status_code == StatusCode.UNSET

    # The retriever's documents are the citation events, in their order, in both conventions.
    retrieval = attrs(named["retrieval"])
    cited = [event.data.st_id for event in events if isinstance(event, CitationEvent)]
    assert cited == ["R-HSA-5682113", "R-HSA-5682201"]
    assert [
        retrieval[f"retrieval.documents.{index}.document.id"] for index in range(len(cited))
    ] == cited
    assert "retrieval.documents.2.document.id" not in retrieval
    assert [
        item["id"] for item in json.loads(str(retrieval["gen_ai.retrieval.documents"]))
    ] == cited
    assert retrieval["openinference.span.kind"] == "RETRIEVER"
    # The user-guide page went to the model unnumbered: context, not a document.
    assert list(retrieval["reactome_answers.retrieval.context"]) == ["/userguide/pathway-browser"]

    model = named["answer_model"]
    assert attrs(model)["openinference.span.kind"] == "LLM"
    assert attrs(model)["gen_ai.operation.name"] == "chat"
    assert done.usage.prompt_tokens is not None
    assert done.usage.prompt_tokens > 20
    assert attrs(model)["gen_ai.usage.input_tokens"] == done.usage.prompt_tokens
    assert attrs(model)["gen_ai.usage.output_tokens"] == done.usage.answer_tokens
    # No messages without the opt-in.
    assert not [key for key in attrs(model) if "messages" in key]
    rulings = [event for event in model.events if event.name == "gen_ai.evaluation.result"]
    assert [
        (attrs(e)["reactome_answers.evidence.n"], attrs(e)["gen_ai.evaluation.score.label"])
        for e in rulings
    ] == [(item.n, "supported" if item.supported else "unsupported") for item in done.evidence]
    assert [attrs(e)["reactome_answers.evidence.source_id"] for e in rulings] == [
        done.references[item.n - 1].st_id for item in done.evidence
    ]
    assert {attrs(e)["reactome_answers.evidence.judge"] for e in rulings} == {"offline"}


def test_a_traceparent_is_continued(tmp_path: Path, exporter: InMemorySpanExporter) -> None:
    pipeline = traced_pipeline(tmp_path, exporter)
    result = pipeline.invoke("What does ABCA1 do?", traceparent=TRACEPARENT)
    spans = spans_of(pipeline, exporter)
    root = by_name(spans)["answer"]
    assert result["trace_id"] == CALLER_TRACE
    assert root.parent is not None
    assert f"{root.parent.span_id:016x}" == CALLER_SPAN
    assert root.parent.is_remote
    assert {f"{span.context.trace_id:032x}" for span in spans} == {CALLER_TRACE}
    # The log names the trace, so an operator goes from one to the other.
    header = read_log(list_log_files(tmp_path / "logs")[0]).header
    assert (header.trace_id, header.parent_span_id) == (CALLER_TRACE, CALLER_SPAN)
    assert header.span_id == f"{root.context.span_id:016x}"


def test_a_malformed_traceparent_starts_a_new_trace(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    pipeline = traced_pipeline(tmp_path, exporter)
    result = pipeline.invoke("What does ABCA1 do?", traceparent=f"00-{CALLER_TRACE}-zz-01")
    root = by_name(spans_of(pipeline, exporter))["answer"]
    assert result["trace_id"] not in (None, CALLER_TRACE)
    assert root.parent is None


def test_a_refused_answer_says_which_rule(tmp_path: Path, exporter: InMemorySpanExporter) -> None:
    pipeline = traced_pipeline(tmp_path, exporter)
    result = pipeline.invoke(PERSONAL_CARE[0])
    spans = spans_of(pipeline, exporter)
    assert result["state"] == "refused"
    assert [span.name for span in spans] == ["answer", "finalize"]  # nothing was searched
    root = attrs(spans[0])
    assert (root["reactome_answers.state"], root["reactome_answers.refusal.reason"]) == (
        "refused",
        "rule",
    )
    assert root["reactome_answers.refusal.rule"] == "personal_care"


def test_nothing_found_has_a_retriever_span_without_documents(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    pipeline = traced_pipeline(tmp_path, exporter, documents=[])
    assert pipeline.invoke("What does ABCA1 do?")["state"] == "nothing_found"
    named = by_name(spans_of(pipeline, exporter))
    assert attrs(named["answer"])["reactome_answers.state"] == "nothing_found"
    retrieval = attrs(named["retrieval"])
    assert json.loads(str(retrieval["gen_ai.retrieval.documents"])) == []
    assert not [key for key in retrieval if key.startswith("retrieval.documents.")]


def test_a_failed_answer_is_an_error_with_our_code(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    pipeline = traced_pipeline(
        tmp_path, exporter, answer=ScriptedStream(script=breaks_after_a_token)
    )
    result = pipeline.invoke("What does ABCA1 do?")
    assert result["state"] == "failed"
    named = by_name(spans_of(pipeline, exporter))
    root = named["answer"]
    assert root.status.status_code == StatusCode.ERROR
    assert attrs(root)["error.type"] == result["error"]["code"]
    exception = [event for event in root.events if event.name == "exception"]
    assert [attrs(event)["exception.type"] for event in exception] == [result["error"]["code"]]
    # The model's own span failed too, with what it said.
    model = named["answer_model"]
    assert model.status.status_code == StatusCode.ERROR
    assert "went away" in str(model.status.description)
    assert attrs(model)["error.type"] == result["error"]["code"]


def test_a_cancelled_answer_ends_its_trace(tmp_path: Path, exporter: InMemorySpanExporter) -> None:
    pipeline = traced_pipeline(tmp_path, exporter)
    stream = pipeline.stream("What does ABCA1 do?")
    for event in stream:
        if event.type == "token":
            break
    stream.close()  # type: ignore[attr-defined]
    root = by_name(spans_of(pipeline, exporter))["answer"]
    assert attrs(root)["reactome_answers.state"] == "failed"
    assert attrs(root)["error.type"] == "cancelled"


def test_content_only_with_the_opt_in_and_secrets_redacted(tmp_path: Path) -> None:
    secret = "sk-" + "a1B2" * 12
    question = f"What does ABCA1 do? my key is {secret}"
    quiet_exporter, said_exporter = InMemorySpanExporter(), InMemorySpanExporter()
    quiet = traced_pipeline(tmp_path / "quiet", quiet_exporter)
    quiet.invoke(question)
    said = traced_pipeline(tmp_path / "said", said_exporter, trace_content=True)
    said.invoke(question)
    quiet_spans, said_spans = spans_of(quiet, quiet_exporter), spans_of(said, said_exporter)
    everything = json.dumps(
        [{**attrs(s), "events": [attrs(e) for e in s.events]} for s in quiet_spans + said_spans],
        default=list,
    )
    assert "ABCA1 do?" in everything
    assert secret not in everything
    quiet_model = attrs(by_name(quiet_spans)["answer_model"])
    said_model = attrs(by_name(said_spans)["answer_model"])
    assert "llm.input_messages.0.message.content" not in quiet_model
    assert said_model["llm.input_messages.0.message.role"] == "system"
    assert "ABCA1" in str(said_model["llm.output_messages.0.message.content"])
    said_retrieval = attrs(by_name(said_spans)["retrieval"])
    assert said_retrieval["retrieval.documents.0.document.content"] == ABCA1.page_content
    # Without an event log the handler records the models' text for the trace alone.
    unlogged_exporter = InMemorySpanExporter()
    unlogged = traced_pipeline(
        tmp_path / "unlogged", unlogged_exporter, trace_content=True, event_logs=False
    )
    unlogged.invoke(question)
    unlogged_model = by_name(spans_of(unlogged, unlogged_exporter))["answer_model"]
    assert loosely(unlogged_model) == loosely(by_name(said_spans)["answer_model"])
    quiet_retrieval = attrs(by_name(quiet_spans)["retrieval"])
    assert "retrieval.documents.0.document.content" not in quiet_retrieval


def test_the_sampler_leaves_answers_out(
    tmp_path: Path, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    pipeline = traced_pipeline(tmp_path, exporter)
    assert pipeline.invoke("What does ABCA1 do?")["trace_id"] is None
    assert spans_of(pipeline, exporter) == []


def comparable(span: ReadableSpan) -> dict[str, Any]:
    return {
        "name": span.name,
        "span_id": span.context.span_id,
        "parent": span.parent.span_id if span.parent else None,
        "kind": span.kind,
        "attributes": {
            key: value
            for key, value in attrs(span).items()
            # what the live answer measured after its log closed: the same names, own times
            if "timings" not in key and not key.endswith("first_token_ms")
        },
        "events": [(event.name, attrs(event)) for event in span.events],
        "status": span.status.status_code,
    }


def test_the_log_gives_the_spans_the_live_answer_gave(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    from callbacks.tracing.otlp import our_resource, readable_spans

    pipeline = traced_pipeline(tmp_path, exporter)
    pipeline.invoke("What does ABCA1 do?", traceparent=TRACEPARENT)
    live = spans_of(pipeline, exporter)
    log = read_log(list_log_files(tmp_path / "logs")[0])
    drawn = readable_spans(answer_spans(AnswerRecords.from_log(log)), our_resource())
    assert [comparable(span) for span in drawn] == [comparable(span) for span in live]
    # Times too, to the microsecond: both read the handler's clock.
    assert [(s.start_time, s.end_time) for s in drawn] == [(s.start_time, s.end_time) for s in live]


def test_nothing_is_traced_or_loaded_without_an_endpoint(tmp_path: Path) -> None:
    script = f"""
import json, sys
from langchain_core.language_models import BaseChatModel, FakeListChatModel
from langchain_core.messages import BaseMessage
from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline
from tests.support.fake_pipeline import ABCA1, FakeRetriever
pipeline = AnswerPipeline(load_settings(home={str(tmp_path)!r}),
    answer_model=FakeListChatModel(responses=["ABCA1 moves cholesterol [1]."]),
    expander_model=FakeListChatModel(responses=["x"]),
    retriever=FakeRetriever(documents=[ABCA1]))
result = pipeline.invoke("What does ABCA1 do?")
# (chromadb loads the SDK's tracing for itself; our spans, exporters and conventions stay out)
loaded = sorted(m for m in sys.modules if m.startswith(("callbacks.tracing.tracer",
    "callbacks.tracing.spans", "callbacks.tracing.otlp", "callbacks.tracing.shipping",
    "opentelemetry.exporter.otlp.proto.http", "openinference")))
print(json.dumps({{"trace_id": result["trace_id"], "tracer": pipeline.tracer is None,
    "loaded": loaded, "state": result["state"]}}))
"""
    env = {key: value for key, value in __import__("os").environ.items()
           if not key.startswith("OTEL_")}  # fmt: skip
    found = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        timeout=300,
    )
    said = json.loads(found.stdout.strip().splitlines()[-1])
    assert said == {"trace_id": None, "tracer": True, "loaded": [], "state": "answered"}


def loosely(span: ReadableSpan) -> dict[str, Any]:
    """A span as another answer to the same question gives it: its own ids, request id and
    times left out."""
    own = ("first_token_ms", "request_id")
    return {
        "name": span.name,
        "kind": span.kind,
        "attributes": {
            k: v for k, v in attrs(span).items() if ".timings." not in k and not k.endswith(own)
        },
        "events": [(event.name, attrs(event)) for event in span.events],
    }


def test_a_real_search_traces_its_dropped_candidates_logged_or_not(
    sample_home: Path,
    minilm: Any,
    tmp_path: Path,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from callbacks.log_records import read_retrieval_record

    question = "What causes Tangier disease, and what does ABCA1 do?"
    pipelines = {
        logged: AnswerPipeline(
            load_settings(home=sample_home, logs_path=tmp_path / "logs", event_logs=logged),
            embeddings=minilm,
            raise_handler_errors=True,
            span_exporter=exporter,
        )
        for logged in (True, False)
    }
    # Without a log the record is made in the shipper's thread, and only what a trace shows
    # of it (no ranks): the whole record is made for the log alone.
    # (The package's retrieval_record is the function, which hides the module.)
    module = importlib.import_module("pipelines.retrieval.retrieval_record")
    made = []
    whole = module.retrieval_record

    def making(**given: Any) -> Any:
        made.append(given["queries"])
        return whole(**given)

    monkeypatch.setattr(module, "retrieval_record", making)
    traces = []
    for pipeline in pipelines.values():
        pipeline.invoke(question)
        traces.append(spans_of(pipeline, exporter))
        exporter.clear()
    assert len(made) == 1
    logged, unlogged = traces
    # The answer's log need not be written for its trace to hold everything.
    assert [loosely(span) for span in unlogged] == [loosely(span) for span in logged]

    record = read_retrieval_record(read_log(list_log_files(tmp_path / "logs")[0]))
    assert record is not None
    dropped = [c for c in record.candidates if c.outcome not in ("kept", "context")]
    assert dropped  # the sample's search always leaves some out
    traced = json.loads(
        str(attrs(by_name(logged)["retrieval"])["reactome_answers.retrieval.dropped"])
    )
    assert [(item["id"], item["outcome"], item.get("score")) for item in traced] == [
        (c.st_id or c.url or c.chunk_id, c.outcome, c.score) for c in dropped
    ]
    kept = {c.n or 0: c.score for c in record.candidates if c.outcome == "kept"}
    retrieval = attrs(by_name(logged)["retrieval"])
    assert [retrieval[f"retrieval.documents.{i}.document.score"] for i in range(len(kept))] == [
        kept[n] for n in sorted(kept)
    ]


def test_a_full_queue_counts_each_answers_spans_without_drawing_them(
    tmp_path: Path, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What /metrics reports as dropped is what the answers would have sent: for each state
    an answer ends in, the spans counted on a full queue equal the spans drawn on an empty
    one."""
    asked: list[tuple[dict[str, Any], str]] = [
        ({}, "What does ABCA1 do?"),  # answered
        ({}, PERSONAL_CARE[0]),  # refused
        ({"documents": []}, "What does ABCA1 do?"),  # nothing found
        ({"answer": ScriptedStream(script=breaks_after_a_token)}, "What does ABCA1 do?"),
    ]
    drawn = []
    for index, (made, question) in enumerate(asked):
        pipeline = traced_pipeline(tmp_path / f"drawn{index}", exporter, **made)
        pipeline.invoke(question)
        drawn.append(len(spans_of(pipeline, exporter)))
        exporter.clear()
    assert drawn[0] > drawn[2] > drawn[1] >= 2  # the states differ in what ran

    import callbacks.tracing.tracer as tracer_module

    def not_drawn(*_: Any, **__: Any) -> list[Any]:
        raise AssertionError("a dropped answer's spans were drawn")

    monkeypatch.setattr(tracer_module, "answer_spans", not_drawn)
    counted = []
    for index, (made, question) in enumerate(asked):
        pipeline = traced_pipeline(tmp_path / f"full{index}", exporter, **made)
        assert pipeline.tracer is not None
        pipeline.tracer.shipper.max_answers = 0  # full: every answer is dropped
        pipeline.invoke(question)
        assert pipeline.tracer.flush(30)
        counted.append(pipeline.tracer.dropped)
    assert counted == drawn
    assert exporter.get_finished_spans() == ()


def test_json_attributes_are_redacted_string_by_string_and_stay_json(
    tmp_path: Path, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A credential inside a JSON attribute (a cited url's query, a title holding a secret
    that JSON escapes) is redacted, and the attribute still reads as JSON."""
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "pässwort-123")  # escaped as \\u00e4 by default
    monkeypatch.setenv("OTHER_PASSWORD", 'quo"ted-secret')  # escaped as \\" always
    leaky = Document(
        "Open the Pathway Browser from the home page and click a pathway.",
        metadata={
            "url": "/userguide/pathway-browser?api_key=abcdef123456",
            "display_name": 'Browser pässwort-123 and quo"ted-secret',
            "collection": "userguide",
        },
    )
    pipeline = traced_pipeline(tmp_path, exporter, documents=[ABCA1, leaky], cite_urls=True)
    pipeline.invoke("How do I open the Pathway Browser?")
    retrieval = attrs(by_name(spans_of(pipeline, exporter))["retrieval"])
    json_values = {
        key: json.loads(str(value))
        for key, value in retrieval.items()
        if key == "gen_ai.retrieval.documents" or key.endswith(".document.metadata")
    }
    assert len(json_values) == 3  # the listing and each of two documents' metadata
    everything = json.dumps(json_values, ensure_ascii=False) + json.dumps(retrieval, default=list)
    for secret in ("abcdef123456", "pässwort-123", 'quo"ted-secret', 'quo\\\\"ted-secret'):
        assert secret not in everything
    assert "[redacted]" in json.dumps(json_values)
