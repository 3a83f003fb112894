"""`logs rerun` and `replay --rerun` say when the log was answered by another model than the
one asked now (issue 37, 6): answers recorded by an unreachable `openai:fake-model` failed,
and rerun by the offline default they answer. That is the model's doing, not the release's,
and the operator reads so per answer and in the summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import FakeListChatModel

from app.cli import main as cli_main
from callbacks.events import DoneEvent
from tests.support.fake_pipeline import ABCA1, make_pipeline

RECORDED = "openai:fake-model"
QUESTIONS = ("What causes Tangier disease?", "What does ABCA1 do?")


@pytest.fixture
def recorded(isolated_home: Path) -> Path:
    """Logs of answers that failed at their model, recorded with ``openai:fake-model``."""
    for number, question in enumerate(QUESTIONS):
        unreachable = FakeListChatModel(responses=["never"], error_on_chunk_number=0)
        pipeline, _, _ = make_pipeline([ABCA1], unreachable, llm=RECORDED)
        done = list(pipeline.stream(question, request_id=f"req-{number}"))[-1]
        assert isinstance(done, DoneEvent)
        assert done.data.state == "failed"
    return isolated_home / "logs"


def _rerun(
    sample_home: Path, capsys: pytest.CaptureFixture[str], *arguments: str
) -> tuple[int, str, str]:
    code = cli_main(["--home", str(sample_home), *arguments])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_logs_rerun_names_both_models_per_answer_and_in_the_summary(
    recorded: Path, sample_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _rerun(sample_home, capsys, "logs", "rerun", "--logs", str(recorded))
    assert code == 1  # the states changed: failed -> answered
    progress = [line for line in err.splitlines() if line.startswith("[")]
    assert len(progress) == len(QUESTIONS)
    for line in progress:
        assert line.endswith(f"(recorded with {RECORDED}, rerun with extractive)"), line
    lines = out.splitlines()
    models = [line for line in lines if line.startswith("  model: ")]
    assert models == [
        f"  model: {RECORDED} -> extractive (not the model that answered the log: a change "
        "may be the model's)"
    ] * len(QUESTIONS)
    assert lines.count("  state: failed -> answered") == len(QUESTIONS)
    assert lines[-1].endswith(
        f"; 2 recorded with another model than the current extractive: {RECORDED}"
    )


def test_logs_rerun_json_has_both_models(
    recorded: Path, sample_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _rerun(sample_home, capsys, "logs", "rerun", "--logs", str(recorded), "--json")
    assert code == 1
    report: dict[str, Any] = json.loads(out)
    for row in report["logs"]:
        assert row["model"] == {"before": RECORDED, "after": "extractive"}
    summary = report["summary"]
    assert summary["model_changed"] == len(QUESTIONS)
    assert summary["recorded_models"] == {RECORDED: len(QUESTIONS)}
    assert summary["current_model"] == "extractive"


def test_replay_rerun_names_both_models(
    recorded: Path, sample_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (log,) = recorded.glob("*-req-0.jsonl")
    code, out, _ = _rerun(sample_home, capsys, "replay", "--rerun", str(log))
    assert code == 1
    assert out.splitlines()[1:3] == [
        f"model: {RECORDED} -> extractive (not the model that answered the log: a change may "
        "be the model's)",
        "state: failed -> answered",
    ]


def test_the_same_model_is_not_mentioned(
    isolated_home: Path, sample_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pipeline, _, _ = make_pipeline([ABCA1], "unused")
    list(pipeline.stream("x" * 3000, request_id="req-long"))  # refused, by extractive
    logs = isolated_home / "logs"
    code, out, err = _rerun(sample_home, capsys, "logs", "rerun", "--logs", str(logs), "--json")
    assert code == 0, err
    report: dict[str, Any] = json.loads(out)
    assert report["logs"][0]["model"] == {"before": "extractive", "after": "extractive"}
    assert report["summary"]["model_changed"] == 0
    code, out, err = _rerun(sample_home, capsys, "logs", "rerun", "--logs", str(logs))
    assert "model" not in out + err
