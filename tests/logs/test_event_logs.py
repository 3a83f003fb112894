"""Event logs: written per request, read back, and replayed into a fresh handler."""

from __future__ import annotations

import itertools
import json
import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from httpx_sse import connect_sse
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel

from callbacks.events import DoneEvent, parse_event
from callbacks.handler import AnswerEventHandler
from callbacks.log import EventLog, log_file_name, prune_logs, read_log
from callbacks.log_header import LogHeader
from callbacks.replay import paced, replay_diff
from pipelines.core.errors import EventLogError
from tests.support.cli import cli
from tests.support.fake_pipeline import ABCA1, CDK5, GUIDE, make_pipeline
from tests.support.servers import serve_command


def only_log(home: Path) -> Path:
    (log,) = sorted((home / "logs").glob("*.jsonl"))
    return log


@pytest.mark.parametrize(
    ("documents", "answer", "question"),
    [
        ([ABCA1, CDK5], "CDK5 [2], ABCA1 [1] and [9].", "What does CDK5 do?"),
        ([GUIDE], "Click a pathway [1].", "How do I use the pathway browser?"),
        ([], "never said", "What is the capital of Peru?"),
        ([ABCA1], "unused", ""),
    ],
    ids=["answered", "no-citations", "nothing-found", "refused"],
)
def test_every_request_writes_a_log_that_replays_identically(
    isolated_home: Path,
    documents: list[Document],
    answer: str,
    question: str,
) -> None:
    pipeline, _, _ = make_pipeline(documents, answer)
    streamed = list(pipeline.stream(question, request_id="req-42"))
    log = read_log(only_log(isolated_home))
    assert log.header.request_id == "req-42"
    assert log.header.question == question
    assert len(log.header.settings_digest or "") == 16
    assert log.events == streamed
    assert replay_diff(log) == []


def test_a_failed_answer_replays_too(isolated_home: Path) -> None:
    model = FakeListChatModel(responses=["ABCA1 exports [1] more"], error_on_chunk_number=15)
    pipeline, _, _ = make_pipeline([ABCA1], model)
    streamed = list(pipeline.stream("q"))
    log = read_log(only_log(isolated_home))
    assert [e.type for e in log.events] == [e.type for e in streamed]
    assert replay_diff(log) == []


def test_raw_callbacks_carry_documents_and_tokens(isolated_home: Path) -> None:
    pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 [1].")
    list(pipeline.stream("q"))
    log = read_log(only_log(isolated_home))
    hooks = [record["hook"] for record in log.callbacks]
    assert hooks[0] == "start"
    assert hooks[-1] == "finish"
    (end,) = [r for r in log.callbacks if r["hook"] == "retriever_end"]
    assert end["documents"][0]["metadata"]["st_id"] == "R-HSA-5682113"
    tokens = [r["token"] for r in log.callbacks if r["hook"] == "llm_new_token"]
    assert "".join(tokens) == "ABCA1 [1]."


def altered_copy(log: Path, folder: Path) -> Path:
    """The log moved out of the logs folder (whose logs must all replay) to be tampered with."""
    return log.rename(folder / log.name)


def test_an_altered_log_fails_the_check(isolated_home: Path, tmp_path: Path) -> None:
    pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 [1].")
    list(pipeline.stream("q"))
    path = altered_copy(only_log(isolated_home), tmp_path)
    lines = path.read_text(encoding="utf-8").splitlines()
    last_token = max(i for i, line in enumerate(lines) if '"type": "token"' in line)
    record = json.loads(lines[last_token])
    record["event"]["data"]["text"] = "FORGED"
    lines[last_token] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    diff = replay_diff(read_log(path))
    assert any(line.startswith("-") and "FORGED" in line for line in diff)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "is empty"),
        (
            '{"kind": "header", "schema": 1, "request_id": "r"}\n{"kind": "event", "ev',
            ":2 is not JSON",
        ),
        ('{"some": "other file"}\n', ":1 is not a reactome-answers event log header"),
        ('{"kind": "header", "schema": 1}\n', ":1: the header has no request_id"),
        (
            '{"kind": "header", "schema": 1, "request_id": "r"}\n{"kind": "event", "event": {}}\n',
            ":2 holds an invalid event",
        ),
    ],
    ids=["empty", "truncated", "foreign", "no-request-id", "invalid-event"],
)
def test_broken_logs_name_the_file_and_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(EventLogError, match=message) as caught:
        read_log(path)
    assert str(path) in str(caught.value)


def test_an_unwritable_log_folder_does_not_stop_the_answer(
    isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    isolated_home.mkdir(parents=True, exist_ok=True)
    (isolated_home / "logs").write_text("a file where the folder should be", encoding="utf-8")
    pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 [1].")
    done = list(pipeline.stream("q"))[-1]
    assert isinstance(done, DoneEvent)
    assert done.data.state == "answered"
    warnings = capsys.readouterr().err.splitlines()
    assert len([w for w in warnings if "event log" in w]) == 1


def test_logs_can_be_switched_off(isolated_home: Path) -> None:
    pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 [1].", event_logs=False)
    list(pipeline.stream("q"))
    assert not (isolated_home / "logs").exists()


@pytest.mark.slow  # the installed command, once per action
def test_logs_and_replay_commands(isolated_home: Path, tmp_path: Path) -> None:
    pipeline, _, _ = make_pipeline([ABCA1, CDK5], "CDK5 [2] first, ABCA1 [1].")
    list(pipeline.stream("What does CDK5 do?", request_id="req-cli"))
    path = only_log(isolated_home)

    assert cli(isolated_home, "logs", "path").stdout.strip() == str(isolated_home / "logs")
    listed = json.loads(cli(isolated_home, "logs", "list", "--json").stdout)
    assert [row["request_id"] for row in listed] == ["req-cli"]

    stats = json.loads(cli(isolated_home, "logs", "stats", "req-cli", "--json").stdout)
    assert stats["state"] == "answered"
    assert stats["citations_early"] == 2
    assert stats["citations_final"] == 2
    assert stats["last_citation_seq"] < stats["first_token_seq"]

    shown = cli(isolated_home, "logs", "show", str(path)).stdout.splitlines()
    assert [json.loads(line)["seq"] for line in shown] == list(range(1, len(shown) + 1))

    check = cli(isolated_home, "replay", "--check", "req-cli")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "replayed identically" in check.stdout
    replayed = cli(isolated_home, "replay", "--instant", "--jsonl", "req-cli").stdout.splitlines()
    assert replayed == shown

    path = altered_copy(path, tmp_path)
    lines = path.read_text(encoding="utf-8").splitlines()
    done_line = max(i for i, line in enumerate(lines) if '"type": "done"' in line)
    record = json.loads(lines[done_line])
    record["event"]["data"]["references"].reverse()
    lines[done_line] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    altered = cli(isolated_home, "replay", "--check", str(path))
    assert altered.returncode == 1
    assert "differ" in altered.stderr
    assert altered.stdout.startswith("--- recorded")


@pytest.mark.slow  # a `replay serve` subprocess
def test_replay_serve_streams_the_recorded_events_as_sse(isolated_home: Path) -> None:
    pipeline, _, _ = make_pipeline([ABCA1, CDK5], "CDK5 [2] first, ABCA1 [1].")
    recorded = list(pipeline.stream("What does CDK5 do?", request_id="req-sse"))
    replay = ("replay", "req-sse", "--instant", "--serve")
    with serve_command(isolated_home, command=replay) as served, httpx.Client(timeout=30) as client:
        for method, body in (("POST", {"question": "anything"}), ("GET", None)):
            url = f"{served.base}/v1/answer/stream"
            with connect_sse(client, method, url, json=body) as source:
                assert source.response.headers["x-accel-buffering"] == "no"
                frames = list(source.iter_sse())
            assert [parse_event(frame.data) for frame in frames] == recorded
            assert [(f.id, f.event) for f in frames] == [(str(e.seq), e.type) for e in recorded]
    assert "replaying" in served.stderr
    assert "req-sse" in served.stderr


def test_replay_pacing_follows_the_recorded_gaps() -> None:
    pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 [1].")
    events = list(pipeline.stream("What does ABCA1 do?"))
    gaps = [later.t_ms - earlier.t_ms for earlier, later in itertools.pairwise(events)]
    paused = [pause for pause, _ in paced(events, 0.5)]
    assert paused[0] == pytest.approx(events[0].t_ms / 1000 / 0.5)
    assert paused[1:] == pytest.approx([gap / 1000 / 0.5 for gap in gaps])
    assert [event for _, event in paced(events, 4)] == events
    assert {pause for pause, _ in paced(events, None)} == {0.0}


@pytest.mark.slow  # the installed command
@pytest.mark.parametrize("speed", ["0", "-2", "fast", "inf"])
def test_replay_refuses_a_speed_that_is_not_positive(isolated_home: Path, speed: str) -> None:
    result = cli(isolated_home, "replay", "--speed", speed, "any")
    assert result.returncode == 2
    assert "positive number" in result.stderr


@pytest.mark.slow  # the installed command
def test_a_missing_or_broken_log_is_a_one_line_error(isolated_home: Path, tmp_path: Path) -> None:
    missing = cli(isolated_home, "replay", "--check", "no-such-request")
    assert missing.returncode == 1
    assert "no request 'no-such-request'" in missing.stderr
    broken = tmp_path / "broken.jsonl"
    header = '{"kind": "header", "schema": 1, "request_id": "r"}'
    broken.write_text(header + "\n{oops\n", encoding="utf-8")
    result = cli(isolated_home, "logs", "stats", str(broken))
    assert result.returncode == 1
    assert f"{broken}:2 is not JSON" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow  # two real answers by the installed command
def test_no_log_option_writes_nothing(sample_home: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    for name in ("chroma", "keyword"):
        shutil.copytree(sample_home / name, home / name)
    assert cli(home, "--no-log", "ask", "What is ABCA1?").returncode == 0
    assert not (home / "logs").exists()
    assert cli(home, "ask", "What is ABCA1?").returncode == 0
    assert len(list((home / "logs").glob("*.jsonl"))) == 1


def fake_logs(folder: Path, ages_days: list[float], now: datetime) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for number, age in enumerate(ages_days):
        path = folder / log_file_name(f"old-{number}", now - timedelta(days=age))
        log = EventLog(path, LogHeader(request_id=f"old-{number}", question="old"))
        handler = AnswerEventHandler(
            request_id=f"old-{number}", emit=log.event, record=log.callback, raise_error=True
        )
        handler.start("old", ["auto"], {})
        handler.finish("refused", text="an old refusal")
        log.close()
        written = (now - timedelta(days=age)).timestamp()
        os.utime(path, (written, written))
        paths.append(path)
    return paths


def test_pruning_by_age_and_count_leaves_other_files_alone(tmp_path: Path) -> None:
    now = datetime(2026, 11, 30, 12, tzinfo=UTC)
    folder = tmp_path / "logs"
    newest, recent, older, old, ancient = fake_logs(folder, [0.01, 1, 5, 31, 400], now)
    notes = folder / "notes.jsonl"
    notes.write_text("mine\n", encoding="utf-8")

    would = prune_logs(folder, keep_days=30, keep_count=0, now=now, dry_run=True)
    assert sorted(would) == sorted([old, ancient])
    assert old.exists()
    assert sorted(prune_logs(folder, keep_days=30, keep_count=0, now=now)) == sorted(would)
    assert prune_logs(folder, keep_days=0, keep_count=2, now=now) == [older]
    assert sorted(folder.iterdir()) == sorted([newest, recent, notes])
    assert prune_logs(folder, keep_days=0, keep_count=0, now=now) == []
    assert prune_logs(tmp_path / "never-written", keep_days=1, keep_count=1) == []


def test_pruning_spares_logs_in_use_and_odd_names(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    folder = tmp_path / "logs"
    (old,) = fake_logs(folder, [90], now)
    impossible = folder / "20261399T000000000000-x.jsonl"
    impossible.write_text("not ours after all\n", encoding="utf-8")
    # Named 90 days ago but still being written: a request that may still be running.
    in_use = folder / log_file_name("in-use", now - timedelta(days=90))
    in_use.write_text("{}\n", encoding="utf-8")

    deleted = prune_logs(folder, keep_days=1, keep_count=0, spare_newer_than=timedelta(minutes=3))
    assert deleted == [old]
    assert impossible.exists()
    assert in_use.exists()
    # A retention longer than the calendar deletes nothing rather than failing.
    assert prune_logs(folder, keep_days=10**9, keep_count=0) == []


def test_a_request_prunes_old_logs_but_never_its_own(isolated_home: Path) -> None:
    folder = isolated_home / "logs"
    now = datetime.now(UTC)
    stale = fake_logs(folder, [40, 50], now)
    recent = fake_logs(folder, [0.5, 1, 2], now)
    pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 [1].", log_retention_count=3)
    list(pipeline.stream("What does ABCA1 do?", request_id="req-new"))
    remaining = sorted(folder.iterdir())
    assert not any(path.exists() for path in stale)
    assert len(remaining) == 3
    assert any(path.name.endswith("-req-new.jsonl") for path in remaining)
    assert recent[-1] not in remaining  # the oldest of the recent ones went over the count


@pytest.mark.slow  # the installed command, three times
def test_logs_prune_command(isolated_home: Path) -> None:
    folder = isolated_home / "logs"
    paths = fake_logs(folder, [1, 2, 3], datetime.now(UTC))
    dry = cli(isolated_home, "logs", "prune", "--keep", "1", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.split() == [str(p) for p in sorted(paths[1:])]
    assert "would delete 2 log(s)" in dry.stderr
    assert all(p.exists() for p in paths)
    done = cli(isolated_home, "logs", "prune", "--older-than", "1.5")
    assert done.stdout.split() == [str(p) for p in sorted(paths[1:])]
    assert [p.exists() for p in paths] == [True, False, False]
    bad = cli(isolated_home, "logs", "prune", "--keep", "-1")
    assert bad.returncode == 2
    assert "0 or more" in bad.stderr
