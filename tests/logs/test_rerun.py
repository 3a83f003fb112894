"""`replay --rerun` and `logs rerun` as an operator runs them before a release goes live:
answers recorded by `ask` on the sample release, a changed release ingested, the recorded
questions asked again (the installed command, real Chroma, real embeddings, the offline
default model)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from callbacks.events import DoneEvent
from callbacks.handler import AnswerEventHandler
from callbacks.log import EventLog, log_file_name, read_log
from callbacks.log_header import LogHeader
from pipelines.catalog import bundled_dir
from tests.conftest import check_logs_replay
from tests.support.cli import cli

pytestmark = pytest.mark.slow  # the installed command in subprocesses, most with real answers

# The entity the changed release drops: the Tangier disease pathway.
REMOVED = "R-HSA-5682113"
# (question, options for `ask`): with and without a history, routed and with collections.
ASKED: list[tuple[str, list[str]]] = [
    ("What causes Tangier disease?", []),
    ("What happens in apoptosis?", []),
    ("Which IDH1 variants are found in gliomas?", []),
    ("How do I export a pathway diagram?", []),
    ("Which lipoprotein is almost absent in the patients?", ["--history", "HISTORY"]),
    ("What is glycolysis?", ["--collections", "reactome"]),
]
HISTORY = [
    {"role": "user", "content": "What does ABCA1 do?"},
    {"role": "assistant", "content": "ABCA1 moves cholesterol out of cells."},
]


@dataclass(frozen=True)
class Recorded:
    home: Path
    logs: dict[str, list[str]]  # each recorded log's file name -> its reference ids
    same_release: subprocess.CompletedProcess[str]  # `logs rerun --json` before the change
    new_release: subprocess.CompletedProcess[str]  # and after it

    @property
    def touched(self) -> set[str]:
        """The answers the change touches: those that cited the removed entity."""
        return {name for name, ids in self.logs.items() if REMOVED in ids}

    def log_names(self) -> set[str]:
        return {path.name for path in (self.home / "logs").glob("*.jsonl")}


def _reference_ids(path: Path) -> list[str]:
    done = read_log(path).events[-1]
    assert isinstance(done, DoneEvent)
    return [r.st_id or r.url or "" for r in done.data.references]


def _changed_release(folder: Path) -> Path:
    """The sample's reactome files without the removed pathway's summary."""
    release = folder / "release-2"
    shutil.copytree(bundled_dir() / "reactome", release / "reactome")
    summaries = release / "reactome" / "pathway2summation.txt"
    lines = summaries.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if not line.startswith(f"{REMOVED}\t")]
    assert len(kept) == len(lines) - 1
    summaries.write_text("".join(kept), encoding="utf-8")
    return release


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory, sample_home: Path) -> Iterator[Recorded]:
    """Answers recorded by `ask` on the sample release and rerun there, then rerun on a
    release without one pathway."""
    folder = tmp_path_factory.mktemp("rerun")
    home = folder / "home"
    for name in ("chroma", "keyword"):
        shutil.copytree(sample_home / name, home / name)
    history = folder / "history.json"
    history.write_text(json.dumps(HISTORY), encoding="utf-8")
    for question, options in ASKED:
        options = [str(history) if option == "HISTORY" else option for option in options]
        asked = cli(home, "ask", question, *options)
        assert asked.returncode == 0, asked.stderr
    logs = {path.name: _reference_ids(path) for path in (home / "logs").glob("*.jsonl")}
    assert len(logs) == len(ASKED)
    same_release = cli(home, "logs", "rerun", "--json")
    changed = cli(home, "ingest", "--from", str(_changed_release(folder)),
                  "--collections", "reactome", "--release", "2")  # fmt: skip
    assert changed.returncode == 0, changed.stderr
    new_release = cli(home, "logs", "rerun", "--json")
    yield Recorded(home, logs, same_release, new_release)
    check_logs_replay(home)


def _rows(result: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    """`logs rerun --json`'s rows by log file name."""
    return {Path(row["file"]).name: row for row in json.loads(result.stdout)["logs"]}


def test_on_the_same_release_every_answer_is_the_same(recorded: Recorded) -> None:
    result = recorded.same_release
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["summary"]["compared"] == len(ASKED)
    assert report["summary"]["changed"] == report["summary"]["text_changed"] == 0
    assert set(_rows(result)) == set(recorded.logs)


def test_logs_rerun_reports_exactly_the_answers_the_new_release_touches(
    recorded: Recorded,
) -> None:
    touched = recorded.touched
    # The test means something only if the change touches some answers and spares others.
    assert touched, recorded.logs
    assert touched != set(recorded.logs), recorded.logs
    result = recorded.new_release
    assert result.returncode == 1, result.stderr
    rows = _rows(result)
    assert set(rows) == set(recorded.logs)
    assert {name for name, row in rows.items() if row["differs"]} == touched
    for name in touched:
        assert REMOVED in [ref["id"] for ref in rows[name]["references"]["removed"]]
        assert rows[name]["state"] == {"before": "answered", "after": "answered"}
    for name in set(rows) - touched:
        assert rows[name]["references"] == {"added": [], "removed": [], "moved": []}
        assert rows[name]["state"]["before"] == rows[name]["state"]["after"]
    summary = json.loads(result.stdout)["summary"]
    assert summary["references_changed"] == len(touched)
    assert (summary["compared"], summary["state_changed"], summary["skipped"]) == (6, 0, 0)
    # Progress, one line per log, went to stderr; the reruns wrote no log of their own.
    assert len([line for line in result.stderr.splitlines() if line.startswith("[")]) == 6
    assert recorded.log_names() == set(recorded.logs)


def test_replay_rerun_exits_0_when_untouched_and_1_with_the_changed_ids(
    recorded: Recorded,
) -> None:
    untouched = sorted(set(recorded.logs) - recorded.touched)[0]
    same = cli(recorded.home, "replay", "--rerun", untouched)
    assert same.returncode == 0, same.stderr
    assert "references: the same" in same.stdout
    assert "the rerun has the log's state and references" in same.stderr

    touched = sorted(recorded.touched)[0]
    changed = cli(recorded.home, "replay", "--rerun", touched)
    assert changed.returncode == 1, changed.stderr
    row = _rows(recorded.new_release)[touched]
    lines = changed.stdout.splitlines()
    removed = [line.split()[1] for line in lines if line.startswith("- ")]
    added = [line.split()[1] for line in lines if line.startswith("+ ")]
    assert removed == [ref["id"] for ref in row["references"]["removed"]]
    assert added == [ref["id"] for ref in row["references"]["added"]]
    assert REMOVED in removed
    assert "--- recorded" in changed.stdout  # the text's diff
    assert recorded.log_names() == set(recorded.logs)

    # --log keeps the rerun's own log, of the new release.
    kept = cli(recorded.home, "--log", "replay", "--rerun", touched)
    assert kept.returncode == 1, kept.stderr
    (new,) = recorded.log_names() - set(recorded.logs)
    assert REMOVED not in _reference_ids(recorded.home / "logs" / new)
    (recorded.home / "logs" / new).unlink()  # the recorded logs stay the ones recorded


# --- what cannot be rerun (no model needed) --------------------------------------------------


def _log(folder: Path, request_id: str, *, done: bool = True, **header: Any) -> Path:
    """A log as the pipeline writes one, of a refused question (no store or model)."""
    from datetime import UTC, datetime

    path = folder / log_file_name(request_id, datetime.now(UTC))
    log = EventLog(path, LogHeader(request_id=request_id, question="Why?", **header))
    handler = AnswerEventHandler(
        request_id=request_id, emit=log.event, record=log.callback, raise_error=True
    )
    handler.start("Why?", header.get("collections", ["auto"]), {})
    if done:
        handler.finish("refused", text="A refusal.")
    log.close()
    return path


def test_a_log_that_cannot_be_rerun_is_a_usage_error(isolated_home: Path, tmp_path: Path) -> None:
    missing = cli(isolated_home, "replay", "--rerun", "no-such-request")
    assert missing.returncode == 2
    assert "no request 'no-such-request'" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    cut_off = _log(tmp_path, "cut-off", done=False)
    incomplete = cli(isolated_home, "replay", "--rerun", str(cut_off))
    assert incomplete.returncode == 2
    assert "is incomplete" in incomplete.stderr
    both = cli(isolated_home, "replay", "--rerun", "--check", str(cut_off))
    assert both.returncode == 2
    assert "not allowed with argument" in both.stderr
    nowhere = cli(isolated_home, "logs", "rerun", "--logs", str(tmp_path / "nowhere"))
    assert nowhere.returncode == 2
    assert "is not a folder" in nowhere.stderr


def test_logs_rerun_skips_logs_it_cannot_compare(isolated_home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "recorded"
    folder.mkdir()
    _log(folder, "cut-off", done=False)
    (folder / "20261203T000000000000-broken.jsonl").write_text("{oops\n", encoding="utf-8")
    result = cli(isolated_home, "logs", "rerun", "--logs", str(folder), "--json")
    # Nothing could be compared: not "the same" (0), but a selection to fix (2).
    assert result.returncode == 2, result.stderr
    assert "no selected log could be rerun and compared" in result.stderr
    report = json.loads(result.stdout)
    assert report["summary"] == {
        "logs": 2, "compared": 0, "skipped": 2, "changed": 0,
        "references_changed": 0, "state_changed": 0, "text_changed": 0,
        "model_changed": 0, "recorded_models": {}, "current_model": None,
    }  # fmt: skip
    skipped = sorted(row["skipped"] for row in report["logs"])
    assert "is incomplete" in skipped[1]
    assert "is not JSON" in skipped[0]
    text = cli(isolated_home, "logs", "rerun", "--logs", str(folder))
    assert text.stdout.splitlines()[-1] == (
        "0 of 0 answers changed their references, 0 their state (0 their text); "
        "2 log(s) skipped: unreadable or without a done event"
    )


def test_a_collection_the_release_no_longer_declares_fails_the_rerun(
    isolated_home: Path, tmp_path: Path
) -> None:
    log = _log(tmp_path, "old-collection", collections=["retired_collection"])
    result = cli(isolated_home, "replay", "--rerun", str(log))
    assert result.returncode == 1, result.stderr
    assert "state: refused -> failed" in result.stdout
    assert "retired_collection" in result.stdout
