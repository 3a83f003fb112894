"""`replay`'s text view (issue 37, 6): the answer's text reads as one piece, whatever events
arrived in the middle of it; live numbering's reference events are listed after the text,
readable, and an error is a line of its own."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.language_models import FakeListChatModel

from app.cli import main as cli_main
from callbacks.events import DoneEvent
from tests.support.fake_pipeline import ABCA1, CDK5, make_pipeline


def _replayed(home: Path, request_id: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert cli_main(["--home", str(home), "replay", "--instant", request_id]) == 0
    return capsys.readouterr().out.splitlines()


def test_reference_events_do_not_break_the_answer_text(
    isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pipeline, _, _ = make_pipeline([ABCA1, CDK5], "CDK5 [2] first, ABCA1 [1].")
    events = list(pipeline.stream("What does CDK5 do?", request_id="req-live",
                                  live_citations=True))  # fmt: skip
    done = events[-1]
    assert isinstance(done, DoneEvent)
    # The stream really did send references in the middle of the text.
    types = [event.type for event in events]
    assert "reference" in types[types.index("token") :]

    lines = _replayed(isolated_home, "req-live", capsys)
    assert lines[0].startswith("[start] ")
    assert [line for line in lines if line.startswith("[citation] ")] == lines[1:3]
    # The text, whole, on its own line: exactly what the answer says.
    assert lines[3] == done.data.text == "CDK5 [1] first, ABCA1 [2]."
    assert lines[4:] == [
        "[reference] [1] Deregulated CDK5 in AD (R-HSA-8862803, citation 2)",
        "[reference] [2] Defective ABCA1 causes TGD (R-HSA-5682113, citation 1)",
        "[done: answered, 2 references]",
    ]


def test_an_error_is_a_line_of_its_own_after_the_partial_text(
    isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = FakeListChatModel(responses=["ABCA1 exports [1] more"], error_on_chunk_number=15)
    pipeline, _, _ = make_pipeline([ABCA1], model)
    list(pipeline.stream("What does ABCA1 do?", request_id="req-failed"))
    lines = _replayed(isolated_home, "req-failed", capsys)
    error = next(index for index, line in enumerate(lines) if line.startswith("[error] "))
    # The partial text streamed before the failure, ended by a newline of its own.
    partial = lines[error - 1]
    assert partial.startswith("ABCA1 exports")
    assert "ABCA1 exports [1] more".startswith(partial)
    assert lines[error].startswith("[error] model_failed: ")
    assert "{" not in lines[error]
    assert len(lines) == error + 2
    assert lines[-1].startswith("[done: failed, ")


def test_a_refusal_has_no_blank_line_before_done(
    isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pipeline, _, _ = make_pipeline([ABCA1], "unused")
    list(pipeline.stream("x" * 3000, request_id="req-refused"))
    lines = _replayed(isolated_home, "req-refused", capsys)
    assert len(lines) == 2
    assert lines[1] == "[done: refused, 0 references]"
