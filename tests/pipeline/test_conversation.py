"""A conversation end to end from the command line: `chat` keeps the turns of the session and
`ask --history FILE` takes them from a file; a follow-up is taken to be about what came before
(the event log shows the history and the standalone question searched for)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from callbacks.log import read_log
from pipelines.retrieval.retriever import EXPANSION
from tests.support.cli import cli

pytestmark = pytest.mark.slow  # every test runs the installed command over the real model

FIRST = "What does ABCA1 do?"
FOLLOW_UP = "What disease does a defect in it cause?"


def _logs(home: Path) -> list[Path]:
    return sorted((home / "logs").glob("*.jsonl"))


def _searched_for(path: Path) -> list[str]:
    (record,) = [
        r["data"]
        for r in read_log(path).callbacks
        if r["hook"] == "custom_event" and r["name"] == EXPANSION
    ]
    return list(record["queries"])


def test_chat_answers_a_follow_up_about_what_came_before(sample_home: Path) -> None:
    before = set(_logs(sample_home))
    result = cli(sample_home, "chat", stdin=f"{FIRST}\n\n{FOLLOW_UP}\n/new\n{FOLLOW_UP}\n")
    assert result.returncode == 0, result.stderr  # end of input leaves
    transcript = result.stdout
    assert transcript.count("you> ") == 3  # the empty line and /new are no questions
    assert transcript.count("\nSources:\n") >= 2
    first, follow_up, _ = sorted(set(_logs(sample_home)) - before)
    assert read_log(first).header.history == ()
    assert [role for role, _ in read_log(follow_up).header.history] == [
        "user",
        "assistant",
    ]
    assert "ABCA1" in _searched_for(follow_up)[0]
    assert "ABCA1" in transcript.split(f"you> {FOLLOW_UP}")[1]


def test_the_log_keeps_the_history_and_what_the_follow_up_was_taken_to_mean(
    sample_home: Path, tmp_path: Path
) -> None:
    first = json.loads(cli(sample_home, "ask", "--json", FIRST).stdout)
    turns = [{"role": "user", "content": FIRST}, {"role": "assistant", "content": first["text"]}]
    history = tmp_path / "history.json"
    history.write_text(json.dumps(turns), encoding="utf-8")
    before = set(_logs(sample_home))

    result = cli(sample_home, "ask", "--json", "--history", str(history), FOLLOW_UP)

    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["state"] == "answered"
    (log,) = set(_logs(sample_home)) - before
    header = read_log(log).header
    assert header.history == tuple((turn["role"], turn["content"]) for turn in turns)
    standalone = _searched_for(log)[0]
    assert standalone == "What disease does a defect in ABCA1 cause?"
    # Taken that way, it finds the Tangier disease pathway (Defective ABCA1 causes TGD).
    assert "R-HSA-5682113" in [reference.get("st_id") for reference in answer["references"]]
    shown = cli(sample_home, "replay", "--instant", answer["request_id"]).stdout
    assert f"[history] user: {FIRST}\n" in shown
    assert "[searched for] What disease does a defect in ABCA1 cause?\n" in shown
    alone = json.loads(cli(sample_home, "ask", "--json", FOLLOW_UP).stdout)
    assert alone["text"] != answer["text"]  # without the history it is another question


def test_a_history_file_that_is_not_turns_is_a_one_line_error(tmp_path: Path) -> None:
    for content, says in (
        ("not json", "not JSON"),
        ('{"role": "user"}', "not a list of turns"),
        ('[{"role": "robot", "content": "x"}]', "turn 1 needs a role"),
    ):
        path = tmp_path / "history.json"
        path.write_text(content, encoding="utf-8")
        result = cli(tmp_path / "home", "ask", "--history", str(path), FIRST)
        assert result.returncode == 1
        assert len(result.stderr.strip().splitlines()) == 1
        assert says in result.stderr
        assert "--history" in result.stderr
    missing = cli(tmp_path / "home", "ask", "--history", str(tmp_path / "none.json"), FIRST)
    assert missing.returncode == 1
    assert "cannot read it" in missing.stderr
