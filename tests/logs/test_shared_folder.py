"""One logs folder for a fleet (`REACTOME_ANSWERS_LOGS_DIR`): two real `serve` instances,
each with its own home, write to it; feedback sent to one reaches a log the other wrote;
`logs` and `replay` from either home see every log; and pruning by several processes at once
keeps exactly what it should and fails no request."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from callbacks.feedback import feedback_path, read_feedback, write_feedback
from callbacks.log import find_request_logs, list_log_files, log_file_name, prune_logs, read_log
from callbacks.replay import replay_diff
from pipelines.core.settings import load_settings
from tests.support.cli import cli
from tests.support.fake_pipeline import ABCA1, make_pipeline
from tests.support.servers import Served, serve_command

KEEP = 5


@pytest.mark.slow  # the installed command
def test_the_logs_folder_is_a_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    assert load_settings(home=home).logs_dir == home / "logs"
    monkeypatch.setenv("REACTOME_ANSWERS_LOGS_DIR", "~/shared-logs")
    assert load_settings(home=home).logs_dir == Path.home() / "shared-logs"
    assert load_settings(home=home, logs_path=tmp_path / "x").logs_dir == tmp_path / "x"
    shown = cli(home, "logs", "path", env={"REACTOME_ANSWERS_LOGS_DIR": str(tmp_path / "fleet")})
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == str(tmp_path / "fleet")
    empty = cli(home, "logs", "path", env={"REACTOME_ANSWERS_LOGS_DIR": " "})
    assert empty.returncode == 1
    assert "REACTOME_ANSWERS_LOGS_DIR" in empty.stderr


# --- two instances, one folder -----------------------------------------------------------------


def old_logs(folder: Path, count: int) -> list[Path]:
    """``count`` real logs in ``folder``, each rated, last touched an hour ago (so a server's
    pruning may take them); oldest first."""
    pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 exports cholesterol [1].", logs_path=folder)
    logs = []
    an_hour_ago = time.time() - 3600
    for n in range(count):
        list(pipeline.stream("What does ABCA1 do?", request_id=f"old-{n:02}"))
        (log,) = find_request_logs(folder, f"old-{n:02}")
        write_feedback(log, f"old-{n:02}", "up", None)
        for path in (log, feedback_path(log)):
            os.utime(path, (an_hour_ago, an_hour_ago))
        logs.append(log)
    return logs


@pytest.fixture
def fleet(sample_home: Path, tmp_path: Path) -> Iterator[tuple[Path, list[tuple[Path, Served]]]]:
    """Two `serve` instances, each on its own home (copies of the sample), sharing one logs
    folder that already holds 12 older logs; each keeps at most :data:`KEEP`."""
    shared = tmp_path / "shared-logs"
    old_logs(shared, 12)
    env = {"REACTOME_ANSWERS_LOGS_DIR": str(shared),
           "REACTOME_ANSWERS_LOG_RETENTION_COUNT": str(KEEP)}  # fmt: skip
    with ExitStack() as stack:
        instances = []
        for name in ("a", "b"):
            home = tmp_path / name
            # Without the session home's own logs: other tests answer there too.
            shutil.copytree(sample_home, home, ignore=shutil.ignore_patterns("logs"))
            instances.append((home, stack.enter_context(serve_command(home, env=env))))
        yield shared, instances


@pytest.mark.slow  # two `serve` processes
def test_two_instances_share_one_logs_folder(
    fleet: tuple[Path, list[tuple[Path, Served]]],
) -> None:
    shared, [(home_a, a), (home_b, b)] = fleet
    env = {"REACTOME_ANSWERS_LOGS_DIR": str(shared)}

    # One answer from each, at once: each instance prunes the folder as it opens its first log.
    answered: dict[str, httpx.Response] = {}

    def ask(name: str, server: Served) -> None:
        answered[name] = httpx.post(
            f"{server.base}/v1/answer", json={"question": "What does ABCA1 do?"}, timeout=120
        )

    threads = [threading.Thread(target=ask, args=item) for item in (("a", a), ("b", b))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    assert [answered[name].status_code for name in "ab"] == [200, 200]
    id_a, id_b = (answered[name].json()["request_id"] for name in "ab")
    (log_a,) = find_request_logs(shared, id_a)
    (log_b,) = find_request_logs(shared, id_b)
    assert read_log(log_a).header.process == a.pid
    assert read_log(log_b).header.process == b.pid
    assert not (home_a / "logs").exists()
    assert not (home_b / "logs").exists()

    # Pruned by both at once: the two new logs and the newest older ones, with their
    # feedback; nothing else, and no feedback left without its log.
    kept_old = [f"old-{n:02}" for n in range(12 - (KEEP - 2), 12)]
    remaining = [read_log(path).header.request_id for path in list_log_files(shared)]
    assert sorted(remaining) == sorted([id_a, id_b, *kept_old])
    assert sorted(path.name for path in shared.glob("*.feedback.json")) == sorted(
        feedback_path(find_request_logs(shared, old)[0]).name for old in kept_old
    )

    # Feedback sent to B for A's answer, and to A for B's: each reaches its log's sidecar.
    to_b = httpx.post(f"{b.base}/v1/answers/{id_a}/feedback",
                      json={"rating": "down", "comment": "sent to B"}, timeout=30)  # fmt: skip
    assert to_b.status_code == 201, to_b.text
    to_a = httpx.post(f"{a.base}/v1/answers/{id_b}/feedback", json={"rating": "up"}, timeout=30)
    assert to_a.status_code == 201, to_a.text
    assert read_feedback(log_a) == to_b.json()
    assert read_feedback(log_b) == to_a.json()

    # Either home's commands see every log of the folder, and the feedback.
    for home in (home_a, home_b):
        listed = cli(home, "logs", "list", "--json", env=env)
        assert listed.returncode == 0, listed.stderr
        ids = {row["request_id"] for row in json.loads(listed.stdout)}
        assert ids == {id_a, id_b, *kept_old}
        down = json.loads(cli(home, "logs", "list", "--feedback", "down", "--json", env=env).stdout)
        assert [row["request_id"] for row in down] == [id_a]
        stats = json.loads(cli(home, "logs", "stats", "--json", env=env).stdout)
        assert stats["feedback"] == {"up": 1 + len(kept_old), "down": 1}
        for request_id in (id_a, id_b):
            checked = cli(home, "replay", "--check", request_id, env=env)
            assert checked.returncode == 0, checked.stdout + checked.stderr
    # The older logs the pruning kept replay as well: nothing was cut from them.
    for path in list_log_files(shared):
        assert replay_diff(read_log(path)) == [], path


# --- several prunes at once ----------------------------------------------------------------------


def rated_logs(folder: Path, count: int) -> list[Path]:
    """``count`` logs named as we name them, a minute apart, each rated; newest first."""
    folder.mkdir(parents=True, exist_ok=True)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    logs = []
    for n in range(count):
        path = folder / log_file_name(f"req-{n:03}", start + timedelta(minutes=n))
        path.write_text('{"kind": "header"}\n', encoding="utf-8")
        write_feedback(path, f"req-{n:03}", "down", None)
        logs.append(path)
    return logs[::-1]


def check_kept(folder: Path, logs: list[Path], keep: int) -> None:
    """Exactly the newest ``keep`` logs are left, each with its feedback, and nothing else."""
    assert list_log_files(folder) == logs[:keep]
    assert sorted(folder.iterdir()) == sorted(
        logs[:keep] + [feedback_path(log) for log in logs[:keep]]
    )


def prune_at_once(folder: Path, pruners: int, keep: int) -> list[list[Path]]:
    """What each of ``pruners`` threads, started together, deleted from ``folder``; none may
    raise."""
    start = threading.Barrier(pruners)
    deleted: list[list[Path]] = []
    failures: list[BaseException] = []

    def prune() -> None:
        start.wait()
        try:
            deleted.append(prune_logs(folder, keep_days=0, keep_count=keep))
        except BaseException as error:  # any failure fails the test
            failures.append(error)

    threads = [threading.Thread(target=prune) for _ in range(pruners)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert failures == []
    return deleted


def test_several_threads_pruning_at_once_keep_exactly_the_newest(tmp_path: Path) -> None:
    for round_ in range(5):
        folder = tmp_path / f"round-{round_}"
        logs = rated_logs(folder, 120)
        deleted = prune_at_once(folder, pruners=8, keep=10)
        check_kept(folder, logs, 10)
        # Each log deleted was reported by exactly one pruner: the one whose unlink won.
        assert sorted(path for batch in deleted for path in batch) == sorted(logs[10:])


def _prune_in_process(folder: str, start: Any, results: Any) -> None:
    start.wait()
    try:
        results.put(("ok", [str(p) for p in prune_logs(Path(folder), keep_days=0, keep_count=7)]))
    except BaseException as error:  # reported to the test
        results.put(("failed", repr(error)))


@pytest.mark.slow  # starts four Python processes
def test_several_processes_pruning_at_once_keep_exactly_the_newest(tmp_path: Path) -> None:
    logs = rated_logs(tmp_path / "logs", 200)
    context = multiprocessing.get_context("spawn")  # a fresh interpreter, as another instance
    start = context.Barrier(4)
    results = context.Queue()
    processes = [
        context.Process(target=_prune_in_process, args=(str(tmp_path / "logs"), start, results))
        for _ in range(4)
    ]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    results.close()
    results.join_thread()
    assert [status for status, _ in outcomes] == ["ok"] * 4, outcomes
    check_kept(tmp_path / "logs", logs, 7)
    reported = [Path(path) for _, batch in outcomes for path in batch]
    assert sorted(reported) == sorted(logs[7:])
