"""What the answer model saw, as the log keeps it: its messages as sent and its raw text.

Through a real OpenAI-compatible client against a local server that records what it was sent:
the log's messages are that request's messages, and the raw text is what the server streamed,
markers as the model wrote them (before the finalizer renumbered them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import FakeListChatModel
from langchain_core.messages import BaseMessage

from callbacks.events import DoneEvent
from callbacks.log import list_log_files, read_log
from callbacks.log_records import model_input, model_raw_text
from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline
from tests.support.cli import cli
from tests.support.fake_openai import FakeChat, fake_chat
from tests.support.fake_pipeline import ABCA1, CDK5, FakeRetriever, make_pipeline
from tests.support.fakes import ScriptedStream
from tests.support.logs import answered_with_log

QUESTION = "What causes Tangier disease?"


@pytest.fixture
def chat_server(monkeypatch: pytest.MonkeyPatch) -> Any:
    with fake_chat("ok") as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
        yield fake


def _answer_request(fake: FakeChat) -> dict[str, Any]:
    answers = [r for r in fake.requests if "prepare searches" not in r["messages"][0]["content"]]
    assert len(answers) == 1
    return answers[0]


def test_the_log_holds_the_messages_the_server_received(
    chat_server: FakeChat, sample_home: Path, minilm: Embeddings
) -> None:
    pipeline = AnswerPipeline(
        load_settings(home=sample_home, llm="openai:local-model"),
        embeddings=minilm,
        raise_handler_errors=True,
    )
    done, log = answered_with_log(pipeline, QUESTION, sample_home)
    sent = _answer_request(chat_server)["messages"]
    assert model_input(log) == [{"role": m["role"], "content": m["content"]} for m in sent]
    # What the server streamed, word by word, with the markers the model wrote.
    raw = model_raw_text(log)
    assert raw is not None
    assert raw.startswith(f"About {QUESTION}: see [")
    assert done.data.text.strip() == raw.strip()  # one source cited as [1]: nothing to renumber


def test_the_raw_text_keeps_the_markers_the_finalizer_renumbered(tmp_path: Path) -> None:
    received: list[list[BaseMessage]] = []

    def script(messages: Any) -> list[str]:
        received.append(list(messages))
        return ["CDK5 stays active [2], ", "unlike ABCA1 [1]."]

    pipeline = AnswerPipeline(
        load_settings(home=tmp_path),
        answer_model=ScriptedStream(script=script),
        expander_model=FakeListChatModel(responses=["unused"]),
        retriever=FakeRetriever(documents=[ABCA1, CDK5]),
        raise_handler_errors=True,
    )
    done = list(pipeline.stream("Is CDK5 like ABCA1?"))[-1]
    assert isinstance(done, DoneEvent)
    assert done.data.text == "CDK5 stays active [1], unlike ABCA1 [2]."  # renumbered
    log = read_log(list_log_files(tmp_path / "logs")[0])
    assert model_raw_text(log) == "CDK5 stays active [2], unlike ABCA1 [1]."
    (messages,) = received
    assert model_input(log) == [
        {"role": {"system": "system", "human": "user"}[m.type], "content": str(m.content)}
        for m in messages
    ]
    # Both sources' text went to the model, numbered as the citations are.
    shown = "\n".join(m["content"] for m in model_input(log) or [])
    assert "[1]" in shown
    assert ABCA1.page_content in shown
    assert CDK5.page_content in shown


def test_a_pasted_credential_is_redacted_in_the_logged_messages(tmp_path: Path) -> None:
    secret = "sk-proj-" + "A1b2C3d4" * 6
    pipeline, _, _model = make_pipeline([ABCA1], "ABCA1 exports cholesterol [1].", home=tmp_path)
    done = list(pipeline.stream(f"Why does ABCA1 matter? my key is {secret}"))[-1]
    assert isinstance(done, DoneEvent)
    assert done.data.state == "answered"
    raw = (list_log_files(tmp_path / "logs")[0]).read_text(encoding="utf-8")
    assert secret not in raw
    messages = model_input(read_log(list_log_files(tmp_path / "logs")[0])) or []
    assert "Why does ABCA1 matter?" in messages[-1]["content"]


@pytest.mark.slow  # the installed command
def test_replay_model_input_prints_both_through_the_cli(tmp_path: Path) -> None:
    pipeline, _, _ = make_pipeline([ABCA1, CDK5], "CDK5 [2] and ABCA1 [1].", home=tmp_path)
    done = list(pipeline.stream("Compare CDK5 and ABCA1"))[-1]
    shown = cli(tmp_path, "replay", done.request_id, "--model-input")
    assert shown.returncode == 0, shown.stderr
    assert "----- system -----" in shown.stdout
    assert "----- user -----" in shown.stdout
    assert ABCA1.page_content in shown.stdout
    raw_part = shown.stdout.split("before its markers were finalized -----\n", 1)[1]
    assert raw_part.strip() == "CDK5 [2] and ABCA1 [1]."


@pytest.mark.slow  # the installed command
def test_replay_model_input_of_an_answer_that_never_asked_the_model(tmp_path: Path) -> None:
    pipeline, _, _ = make_pipeline([], "unused", home=tmp_path)
    done = list(pipeline.stream("Anything about zebrafish fins?"))[-1]
    assert isinstance(done, DoneEvent)
    assert done.data.state == "nothing_found"
    shown = cli(tmp_path, "replay", done.request_id, "--model-input")
    assert shown.returncode == 0, shown.stderr
    assert "the answer model was not asked" in shown.stdout
