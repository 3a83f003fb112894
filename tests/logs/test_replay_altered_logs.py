"""`replay --check` on a real log altered by hand: whatever was done to it, the operator reads
one line naming the file (and line) and what is wrong, never a traceback (issue 37, 6)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.cli import main as cli_main
from tests.support.cli import cli
from tests.support.fake_pipeline import ABCA1, CDK5, make_pipeline

Lines = list[str]


def _record(line: str) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(line)
    return record


def _index(lines: Lines, kind: str, name: str, nth: int = 0) -> int:
    """The index of the ``nth`` callback record of hook ``name``, or event of type ``name``."""
    found = [
        i
        for i, line in enumerate(lines)
        if _record(line).get("kind") == kind
        and (
            _record(line).get("hook") == name
            if kind == "callback"
            else _record(line)["event"]["type"] == name
        )
    ]
    return found[nth]


def _repeat(kind: str, name: str) -> Callable[[Lines], Lines]:
    def alter(lines: Lines) -> Lines:
        at = _index(lines, kind, name)
        return [*lines[: at + 1], lines[at], *lines[at + 1 :]]

    return alter


def _drop(kind: str, name: str) -> Callable[[Lines], Lines]:
    def alter(lines: Lines) -> Lines:
        at = _index(lines, kind, name)
        return lines[:at] + lines[at + 1 :]

    return alter


def _move_to_end(kind: str, name: str) -> Callable[[Lines], Lines]:
    def alter(lines: Lines) -> Lines:
        at = _index(lines, kind, name)
        return [*lines[:at], *lines[at + 1 :], lines[at]]

    return alter


def _swap_events(first: str, second: str) -> Callable[[Lines], Lines]:
    def alter(lines: Lines) -> Lines:
        a, b = _index(lines, "event", first), _index(lines, "event", second)
        changed = list(lines)
        changed[a], changed[b] = lines[b], lines[a]
        return changed

    return alter


def _edit(name: str, change: Callable[[dict[str, Any]], None]) -> Callable[[Lines], Lines]:
    def alter(lines: Lines) -> Lines:
        at = _index(lines, "callback", name)
        record = _record(lines[at])
        change(record)
        return [*lines[:at], json.dumps(record), *lines[at + 1 :]]

    return alter


def _cut_line(lines: Lines) -> Lines:
    at = _index(lines, "callback", "retriever_end")
    return [*lines[:at], lines[at][:40], *lines[at + 1 :]]


# Each alteration, and a phrase of what the one line must say is wrong.
ALTERED: dict[str, tuple[Callable[[Lines], Lines], str]] = {
    "start record repeated": (_repeat("callback", "start"), "a second start record"),
    "start record missing": (_drop("callback", "start"), "is not the request's start record"),
    "start record moved last": (
        _move_to_end("callback", "start"),
        "is not the request's start record",
    ),
    "finish record repeated": (
        _repeat("callback", "finish"),
        "the finish record cannot be replayed (the stream already ended with done)",
    ),
    "finish record missing": (
        _drop("callback", "finish"),
        "the log has a done event where a fresh handler sends no event",
    ),
    "retrieval record repeated": (
        _repeat("callback", "retriever_end"),
        "a second retriever_end record of run",
    ),
    "retrieval record missing": (_drop("callback", "retriever_end"), "from seq 2 on"),
    "model start repeated": (_repeat("callback", "model_start"), "a second model_start record"),
    "token record repeated": (_repeat("callback", "llm_new_token"), "the token events differ"),
    "start event repeated": (
        _repeat("event", "start"),
        "event seq 1 where seq 2 was due (an event is repeated or out of order)",
    ),
    "citation event missing": (
        _drop("event", "citation"),
        "event seq 3 where seq 2 was due (an event before it is missing)",
    ),
    "events reordered": (_swap_events("citation", "token"), "where seq 2 was due"),
    "done repeated": (_repeat("event", "done"), "events follow the done event"),
    "done missing": (_drop("event", "done"), "is incomplete"),
    "bad JSON on one line": (_cut_line, "is not JSON"),
    "unknown hook": (
        _edit("llm_new_token", lambda record: record.update(hook="llm_old_token")),
        "a callback record of unknown hook 'llm_old_token'",
    ),
    "hook missing": (
        _edit("llm_new_token", lambda record: record.pop("hook")),
        "a callback record without a hook",
    ),
    "hook not a name": (
        _edit("llm_new_token", lambda record: record.update(hook=["llm_new_token"])),
        "a callback record of unknown hook ['llm_new_token']",
    ),
    "run id not a uuid": (
        _edit("llm_new_token", lambda record: record.update(run_id="run-1")),
        "the llm_new_token record cannot be replayed",
    ),
    "question not text": (
        _edit("start", lambda record: record.update(question=5)),
        "the start record cannot be replayed (question: Input should be a valid string)",
    ),
    "documents not a list of objects": (
        _edit("retriever_end", lambda record: record.update(documents="x")),
        "the retriever_end record cannot be replayed",
    ),
    "verdict without its source": (
        _edit("finish", lambda record: record.update(verdicts=[{"sentence": "x"}])),
        "the finish record cannot be replayed (it has no 'source_n')",
    ),
    "unknown state": (
        _edit("finish", lambda record: record.update(state="weird")),
        "the finish record cannot be replayed (state: Input should be",
    ),
    "record missing a field": (
        _edit("llm_new_token", lambda record: record.pop("token")),
        "the llm_new_token record cannot be replayed (it has no 'token')",
    ),
}


@pytest.fixture(scope="module")
def real_log(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One real answer's log, with two citations and streamed tokens, as the pipeline wrote
    it (recorded in a home of its own: every log in a test's home must replay as recorded)."""
    home = tmp_path_factory.mktemp("recorded")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REACTOME_ANSWERS_HOME", str(home))
        pipeline, _, _ = make_pipeline([ABCA1, CDK5], "CDK5 [2] first, ABCA1 [1].")
        list(pipeline.stream("What does CDK5 do?", request_id="req-altered"))
    (path,) = (home / "logs").glob("*.jsonl")
    return path.read_text(encoding="utf-8")


def _altered(real_log: str, folder: Path, name: str) -> Path:
    alter, _ = ALTERED[name]
    path = folder / f"{name.replace(' ', '-')}.jsonl"
    path.write_text("\n".join(alter(real_log.splitlines())) + "\n", encoding="utf-8")
    return path


def test_the_unaltered_log_replays_identically(
    real_log: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "as-recorded.jsonl"
    path.write_text(real_log, encoding="utf-8")
    assert cli_main(["replay", "--check", str(path)]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"{path}: ")
    assert out.endswith(" events replayed identically")


@pytest.mark.parametrize("name", list(ALTERED))
def test_an_altered_log_is_one_line_naming_the_file_and_what_is_wrong(
    real_log: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    path = _altered(real_log, tmp_path, name)
    code = cli_main(["replay", "--check", str(path)])
    captured = capsys.readouterr()
    assert code == 1
    err = captured.err.strip().splitlines()
    assert len(err) == 1, captured.err
    (line,) = err
    assert str(path) in line
    assert ALTERED[name][1] in line
    assert "Traceback" not in captured.out + captured.err
    if line.startswith("reactome-answers: error: "):
        assert captured.out == ""  # no diff when what is wrong is said in words
    else:
        # The replayed events differ: the diff on stdout, and where they part on stderr.
        assert line.startswith(f"{path}: the replayed events differ from the recorded ones, ")
        assert captured.out.startswith("--- recorded\n+++ replayed\n")


def test_where_a_line_is_named_it_is_the_altered_one(
    real_log: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _altered(real_log, tmp_path, "start record repeated")
    assert cli_main(["replay", "--check", str(path)]) == 1
    # Line 1 is the header, line 2 the start record, line 3 its copy.
    assert f"{path}:3: a second start record" in capsys.readouterr().err


@pytest.mark.slow  # the installed command, in a process of its own
def test_the_installed_command_shows_no_traceback_for_a_repeated_finish(
    real_log: str, tmp_path: Path
) -> None:
    path = _altered(real_log, tmp_path, "finish record repeated")
    result = cli(tmp_path / "home", "replay", "--check", str(path))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"reactome-answers: error: {path}:")
    assert "the stream already ended with done" in line
