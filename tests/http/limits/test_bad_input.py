"""Bad input: the HTTP API fuzzed from its own OpenAPI document, source texts and model output
that try to forge our output, questions we must not answer, and broken logs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from langchain_core.embeddings import Embeddings
from schemathesis.config import SchemathesisConfig
from schemathesis.core.result import Ok

from app.cli import main as cli_main
from callbacks.events import CitationEvent, Event, TokenEvent
from pipelines.citations.finalize import cited_numbers
from pipelines.core.identifiers import url_problem
from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline
from tests.support.fake_openai import FORGED, fake_chat
from tests.support.fake_pipeline import ABCA1, make_pipeline
from tests.support.forged import FORGED_IDS, FORGED_QUESTION, GUIDE_QUESTION, build_forged_home
from tests.support.invariants import check_stream
from tests.support.servers import serve_command
from tests.support.sse import parse_sse

# --- the HTTP API, fuzzed from its OpenAPI document -------------------------------------------


@pytest.mark.slow  # every operation the schema allows, generated
@pytest.mark.parametrize("mode", list(schemathesis.GenerationMode))
def test_no_request_the_schema_allows_or_breaks_gets_a_server_error(
    fuzz_base: str, mode: schemathesis.GenerationMode
) -> None:
    # Positive cases follow the schema (they reach the pipeline); negative ones break it.
    # Schemathesis stops reading an event stream after 20 events by default; an answer that
    # found sources sends more, and its stream must be read whole to check that done ends it.
    whole_streams = SchemathesisConfig.from_dict({"max-stream-events": 100_000})
    schema = schemathesis.openapi.from_url(f"{fuzz_base}/openapi.json", config=whole_streams)
    operations = [result.ok() for result in schema.get_all_operations() if isinstance(result, Ok)]
    assert {op.path for op in operations} >= {"/v1/answer", "/v1/answer/stream", "/healthz"}
    for operation in operations:
        takes_input = bool(operation.body) or any(True for _ in operation.iter_parameters())
        if mode is schemathesis.GenerationMode.NEGATIVE and not takes_input:
            continue  # nothing to break in GET /healthz

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
        def call(case: Any) -> None:
            response = case.call(timeout=60)
            assert response.status_code < 500, (case.as_curl_command(), response.text)
            if response.status_code >= 400:
                error = response.json()["error"]
                assert error["code"]
                assert error["message"]
            elif "text/event-stream" in str(response.headers.get("content-type")):
                if operation.path == "/v1/chat/completions":  # noqa: B023 (called at once)
                    check_openai_stream(response.text)
                elif operation.path == "/api/chat":  # noqa: B023
                    check_ui_message_stream(response.text)
                else:
                    check_stream(parse_sse(response.text))

        try:
            call()
        except Unsatisfiable:
            # An operation whose one input is a free string in its path (GET
            # /v1/logs/{request_id}) has no request that breaks its schema; one with a body
            # always has.
            if mode is not schemathesis.GenerationMode.NEGATIVE or operation.body:
                raise


def check_openai_stream(body: str) -> None:
    """OpenAI's framing: every ``data:`` a JSON chunk (or an error), the last ``[DONE]``."""
    frames = [line[len("data: ") :] for line in body.splitlines() if line.startswith("data: ")]
    assert frames[-1] == "[DONE]", body[-300:]
    for frame in frames[:-1]:
        chunk = json.loads(frame)
        assert chunk.get("object") == "chat.completion.chunk" or "error" in chunk, frame


def check_ui_message_stream(body: str) -> None:
    """The AI SDK's framing: JSON chunks from ``start`` to ``finish``, then ``[DONE]``."""
    frames = [line[len("data: ") :] for line in body.splitlines() if line.startswith("data: ")]
    assert frames[-1] == "[DONE]", body[-300:]
    types = [json.loads(frame)["type"] for frame in frames[:-1]]
    assert types[0] == "start"
    assert types[-1] == "finish"


# --- forged sources and forged model output --------------------------------------------------


@pytest.fixture(scope="module")
def forged_home(tmp_path_factory: pytest.TempPathFactory, minilm: Embeddings) -> Path:
    return build_forged_home(tmp_path_factory.mktemp("forged"), minilm)


def stream_of(base: str, body: dict[str, Any]) -> tuple[str, list[Event]]:
    response = httpx.post(f"{base}/v1/answer/stream", json=body, timeout=120)
    assert response.status_code == 200
    return response.text, parse_sse(response.text)  # strict: only our own frames


@pytest.mark.slow  # a `serve` subprocess over a forged corpus
def test_source_text_cannot_forge_events_markers_or_local_citations(forged_home: Path) -> None:
    with serve_command(forged_home) as served:
        body, events = stream_of(served.base, {"question": FORGED_QUESTION})
        guide_body, guide = stream_of(served.base, {"question": GUIDE_QUESTION, "cite_urls": True})
    for raw, stream in ((body, events), (guide_body, guide)):
        done = check_stream(stream)  # one done, last; seq contiguous; markers in range
        assert len(re.findall(r"^event: done\r?$", raw, re.MULTILINE)) == 1
        assert "[99]" not in done.data.text
        assert "[42]" not in done.data.text
        assert done.data.state == "answered"
    cited = {e.data.st_id for e in events if isinstance(e, CitationEvent)}
    assert cited & FORGED_IDS
    # The forged lines reached the answer as text, inside our own frames.
    text = check_stream(events).data.text
    assert "event: citation" in text
    urls = [e.data.url for e in guide if isinstance(e, CitationEvent) and e.data.url]
    assert urls == ["/userguide/forged"]  # the local paths stayed uncited context
    assert all(url_problem(url) is None for url in urls)


@pytest.mark.slow  # a `serve` subprocess over a forged corpus
def test_model_output_cannot_forge_events_or_markers(
    forged_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fake_chat("forge") as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-local-forge")
        with serve_command(forged_home, "--llm", "openai:fake-model") as served:
            raw, events = stream_of(served.base, {"question": FORGED_QUESTION})
    done = check_stream(events)
    streamed = "".join(e.data.text for e in events if isinstance(e, TokenEvent))
    assert streamed == FORGED  # every byte arrived, as data
    assert len(re.findall(r"^event: done\r?$", raw, re.MULTILINE)) == 1
    assert "[99]" not in done.data.text
    assert cited_numbers(done.data.text) == [1, 2]
    assert "</script><script>" in done.data.text  # text, for the client to show as text


# --- questions that must not be answered -----------------------------------------------------

NOT_ANSWERED = {
    "": "refused",
    "   \n\t ": "refused",
    "What\x00is\x01ABCA1\x7f?": "refused",
    "Should I stop taking my statins before surgery?": "refused",
    "How much aspirin should I take for my headache?": "refused",
    "What is the capital of Peru?": "nothing_found",
    "¿Cuál es la capital del Perú?": "nothing_found",
    "Quelle est la capitale du Pérou ?": "nothing_found",
    "Who won the football world cup in 1998?": "nothing_found",
}


@pytest.fixture(scope="module")
def answering(sample_home: Path, minilm: Embeddings) -> AnswerPipeline:
    return AnswerPipeline(load_settings(home=sample_home), embeddings=minilm)


@pytest.mark.parametrize(("question", "state"), list(NOT_ANSWERED.items()))
def test_questions_we_must_not_answer_get_a_message_and_no_sources(
    answering: AnswerPipeline, question: str, state: str
) -> None:
    events = list(answering.stream(question))
    done = check_stream(events)
    assert done.data.state == state
    assert done.data.text.strip()  # a message saying why, never silence
    assert done.data.references == []
    assert not any(isinstance(e, TokenEvent) for e in events)
    if state == "refused":
        assert not any(isinstance(e, CitationEvent) for e in events)


def test_huge_and_binary_questions_over_http(fuzz_base: str) -> None:
    huge = {"question": "What is ABCA1? " * 7000}  # about 100 KB
    response = httpx.post(f"{fuzz_base}/v1/answer", json=huge, timeout=60)
    assert response.status_code == 413
    assert response.json()["error"]["code"]
    response = httpx.post(
        f"{fuzz_base}/v1/answer", content=bytes(range(256)) * 4, timeout=60,
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "bad_input"
    binary = {"question": "\x00\x01\x02 binary \x7f\x1b[2J"}
    response = httpx.post(f"{fuzz_base}/v1/answer", json=binary, timeout=60)
    assert response.status_code == 200
    assert response.json()["state"] == "refused"


def test_the_cli_refuses_a_medical_advice_question_with_its_reason(
    sample_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli_main(["--home", str(sample_home), "ask", "What dose of metformin should I take?"])
    assert code == 1
    out = capsys.readouterr().out
    assert "doctor" in out
    assert "Sources" not in out


# --- broken event logs -----------------------------------------------------------------------


def _real_log(home: Path) -> str:
    pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 [1].")
    list(pipeline.stream("What is ABCA1?", request_id="real"))
    (path,) = (home / "logs").glob("*-real.jsonl")
    text = path.read_text(encoding="utf-8")
    path.unlink()  # only material for the broken copies
    return text


def _corrupt(log: str) -> bytes:
    lines = log.splitlines(keepends=True)
    lines[2] = '{"kind": "callback", "hook": \n'
    return "".join(lines).encode()


def _truncated(log: str) -> bytes:
    return log[: log.rstrip("\n").rfind("\n") + 20].encode()  # stops inside the last line


BROKEN: dict[str, Any] = {
    "corrupt": _corrupt,
    "truncated": _truncated,
    "foreign": lambda _: (json.dumps({"model": "gpt", "messages": []}) + "\n").encode(),
    "binary": lambda log: log.encode()[:200] + b"\n\x00\xff\xfe\x80 not text\n",
    "empty": lambda _: b"",
}


@pytest.mark.parametrize("kind", list(BROKEN))
@pytest.mark.parametrize("command", [["replay"], ["replay", "--check"], ["logs", "stats"]])
def test_broken_logs_are_one_line_errors_naming_file_and_line(
    isolated_home: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    kind: str,
    command: list[str],
) -> None:
    path = tmp_path / f"{kind}.jsonl"
    path.write_bytes(BROKEN[kind](_real_log(isolated_home)))
    code = cli_main(["--home", str(isolated_home), *command, str(path)])
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("reactome-answers: error: ")
    assert str(path) in err[0]
    if kind != "empty":
        assert f"{path}:" in err[0]  # and the line
