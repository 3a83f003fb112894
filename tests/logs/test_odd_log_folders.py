"""Logs that are not what they seem and logs folders that are odd: an incomplete log, ids and
file names matched literally, extreme speeds and times in a replay, odd files and an unreadable
folder (on the command line and over HTTP), files named as logs that are none, and ratings
raced against each other in one instance and across two sharing a folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from callbacks.feedback import feedback_path, read_feedback
from callbacks.log import find_request_logs, log_file_name
from tests.support.cli import cli
from tests.support.fake_pipeline import ABCA1, make_pipeline
from tests.support.scripted_server import metric_samples, served
from tests.support.servers import serve_command

QUESTION = "What does ABCA1 do?"


# --- every log ends with done, or is named incomplete ----------------------------------------


@pytest.mark.slow
def test_an_incomplete_log_is_marked_and_replay_check_fails_on_it(
    isolated_home: Path, tmp_path: Path
) -> None:
    pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 exports cholesterol [1].")
    list(pipeline.stream("What does ABCA1 do?", request_id="req-whole"))
    whole = next((isolated_home / "logs").glob("*-req-whole.jsonl"))
    cut = tmp_path / "cut.jsonl"
    lines = whole.read_text().splitlines()
    cut.write_text("\n".join(lines[: len(lines) // 2]) + "\n")
    check = cli(isolated_home, "replay", "--check", str(cut))
    assert check.returncode == 1
    assert f"{cut} is incomplete: it does not end with a done event" in check.stderr
    assert len(check.stderr.strip().splitlines()) == 1
    header_only = tmp_path / "header-only.jsonl"
    header_only.write_text(lines[0] + "\n")
    assert cli(isolated_home, "replay", "--check", str(header_only)).returncode == 1
    stats = json.loads(cli(isolated_home, "logs", "stats", str(cut), "--json").stdout)
    assert stats["state"] == "incomplete"


# --- ids and file names are matched literally ------------------------------------------------


@pytest.mark.slow
def test_log_ids_and_file_names_are_literal(isolated_home: Path) -> None:
    pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 [1].")
    list(pipeline.stream("What does ABCA1 do?", request_id="req-one"))
    list(pipeline.stream("What does CDK5 do?", request_id="req-two"))
    for pattern in ("*", "a**b", "req-*", "[r]eq-one", "x" * 5000):
        result = cli(isolated_home, "logs", "show", pattern)
        assert result.returncode == 1, pattern
        assert "no request" in result.stderr
        assert "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        assert len(result.stderr) < 500
    listed = cli(isolated_home, "logs", "list").stdout.splitlines()
    names = [line.split()[0] for line in listed]
    assert len(names) == 2
    for name in names:  # what `logs list` prints is accepted back
        shown = cli(isolated_home, "logs", "show", name)
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout.splitlines()[0])["type"] == "start"
    by_id = cli(isolated_home, "logs", "show", "req-two").stdout.splitlines()
    assert json.loads(by_id[0])["data"]["question"] == "What does CDK5 do?"


# --- absurd speeds and times in a log cannot overflow or stall a replay ----------------------


@pytest.mark.slow
def test_extreme_speeds_are_refused_and_extreme_times_capped(
    isolated_home: Path, tmp_path: Path
) -> None:
    pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 [1].")
    list(pipeline.stream("What does ABCA1 do?", request_id="req-time"))
    for speed in ("1e-300", "1e300", "nan"):
        refused = cli(isolated_home, "replay", "req-time", "--speed", speed)
        assert refused.returncode == 2
        assert "give a positive number from 0.001 to 1,000,000" in refused.stderr
    path = next((isolated_home / "logs").glob("*-req-time.jsonl"))
    altered = tmp_path / "altered.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for record in records:
        if record["kind"] == "event" and record["event"]["type"] == "done":
            record["event"]["t_ms"] = 1e300
    altered.write_text("".join(json.dumps(record) + "\n" for record in records))
    # Capped at a minute, at 1000x a pause is 60 ms; uncapped, the replay would never end
    # and the command's bound (120 s) would fail the test.
    result = cli(isolated_home, "replay", str(altered), "--speed", "1000", timeout_s=120)
    assert result.returncode == 0, result.stderr
    assert "[done: answered" in result.stdout
    replay = ("replay", str(altered), "--speed", "1000", "--serve")
    with serve_command(isolated_home, command=replay) as served:
        streamed = httpx.post(f"{served.base}/v1/answer/stream", json={}, timeout=30)
        assert "event: done" in streamed.text


# --- odd files in the logs folder, and a folder that cannot be read --------------------------


@pytest.mark.slow
def test_odd_files_in_the_logs_folder_are_named_not_read(isolated_home: Path) -> None:
    pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 [1].")
    list(pipeline.stream("What does ABCA1 do?", request_id="req-real"))
    folder = isolated_home / "logs"
    (folder / "20260101T000000000000-zero.jsonl").symlink_to("/dev/zero")
    os.mkfifo(folder / "20260101T000000000001-fifo.jsonl")
    (folder / "20260101T000000000002-loop.jsonl").symlink_to(
        folder / "20260101T000000000002-loop.jsonl"
    )
    (folder / "20260101T000000000003-dir.jsonl").mkdir()
    listed = cli(isolated_home, "logs", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {Path(row["file"]).name.split("-", 1)[1]: row for row in json.loads(listed.stdout)}
    assert rows["req-real.jsonl"]["state"] == "answered"
    for odd in ("zero.jsonl", "fifo.jsonl", "dir.jsonl"):
        assert "is not a regular file" in rows[odd]["error"]
    assert "cannot read" in rows["loop.jsonl"]["error"]
    for odd in ("zero", "fifo"):
        shown = cli(isolated_home, "logs", "show", str(next(folder.glob(f"*-{odd}.jsonl"))))
        assert shown.returncode == 1
        assert "is not a regular file" in shown.stderr
    pruned = cli(isolated_home, "logs", "prune", "--keep", "1")
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout == ""  # none of the odd entries is deleted, or followed
    assert len(list(folder.iterdir())) == 5


@pytest.mark.slow
def test_an_unreadable_logs_folder_is_a_one_line_error(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "logs").mkdir(parents=True)
    (home / "logs").chmod(0o000)
    # Root reads any folder: as root the command runs without the capabilities that let it.
    no_override = ["setpriv", "--inh-caps=-dac_override,-dac_read_search",
                   "--bounding-set=-dac_override,-dac_read_search"]  # fmt: skip
    prefix = no_override if os.geteuid() == 0 else []
    try:
        for action in (("list",), ("prune",), ("show", "req-x")):
            result = subprocess.run(
                [*prefix, str(Path(sys.executable).parent / "reactome-answers"),
                 "--home", str(home), "logs", *action],
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
            assert result.returncode == 1, (action, result.stderr)
            assert "cannot list the logs folder" in result.stderr
            assert "Permission denied" in result.stderr
            assert len(result.stderr.strip().splitlines()) == 1
    finally:
        (home / "logs").chmod(0o755)


def test_an_unreadable_logs_folder_is_a_500_that_names_no_path(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "logs").write_text("a file where the folder should be", encoding="utf-8")
    with served(home) as base:
        for got in (
            httpx.get(f"{base}/v1/logs/anything", timeout=30),
            httpx.get(f"{base}/logs/anything", timeout=30),
            httpx.post(f"{base}/v1/answers/anything/feedback", json={"rating": "up"}, timeout=30),
        ):
            assert got.status_code == 500
            error = got.json()["error"]
            assert error["code"] == "event_log"
            assert "cannot read its logs folder" in error["message"]
            assert str(tmp_path) not in got.text


# --- only an answer's log is served or rated -------------------------------------------------


def _decoys(folder: Path, real_log: Path) -> dict[str, Path]:
    """Entries named as logs that are no answer's log, by the request id each names."""
    when = datetime(2026, 5, 1, tzinfo=UTC)
    fifo = folder / log_file_name("decoy-fifo", when)
    os.mkfifo(fifo)
    passwd = folder / log_file_name("decoy-passwd", when)
    passwd.symlink_to("/etc/passwd")
    linked = folder / log_file_name("decoy-link", when)
    linked.symlink_to(real_log)  # a real log, but out of a link: not followed
    header = json.loads(real_log.read_text(encoding="utf-8").splitlines()[0])
    one_line = folder / log_file_name("decoy-one-line", when)
    one_line.write_text(json.dumps({**header, "request_id": "decoy-one-line"}) + "\n")
    stray = folder / log_file_name("decoy-stray", when)
    stray.write_text("rating me costs nothing\n", encoding="utf-8")
    return {path.name.split("-", 1)[1].removesuffix(".jsonl"): path
            for path in (fifo, passwd, linked, one_line, stray)}  # fmt: skip


@pytest.mark.slow  # the installed command
def test_files_named_as_logs_are_neither_shown_nor_rated(isolated_home: Path) -> None:
    logs = isolated_home / "logs"
    with served() as base:
        reply = httpx.post(f"{base}/v1/answer", json={"question": QUESTION}, timeout=60)
        request_id = reply.json()["request_id"]
        (real,) = find_request_logs(logs, request_id)
        decoys = _decoys(logs, real)
        try:
            for decoy in decoys:
                for got in (
                    httpx.get(f"{base}/v1/logs/{decoy}", timeout=30),
                    httpx.post(f"{base}/v1/answers/{decoy}/feedback", json={"rating": "up"},
                               timeout=30),
                ):  # fmt: skip
                    assert got.status_code == 404, (decoy, got.request.url, got.text)
                    error = got.json()["error"]
                    assert error["code"] == "not_found"
                    assert f"request id {decoy!r}" in error["message"]
                    assert str(isolated_home) not in got.text
                # The page is the page, with 404: it reads the 404 above and says so.
                page = httpx.get(f"{base}/logs/{decoy}", timeout=30)
                assert page.status_code == 404
                assert page.headers["content-type"].startswith("text/html")
                assert str(isolated_home) not in page.text
            assert not list(logs.glob("*decoy*.feedback.json"))
            # The answer's own log is served and rated as ever.
            assert httpx.get(f"{base}/v1/logs/{request_id}", timeout=30).status_code == 200
            rated = httpx.post(
                f"{base}/v1/answers/{request_id}/feedback", json={"rating": "up"}, timeout=30
            )
            assert rated.status_code == 201
            stats = cli(isolated_home, "logs", "stats", "--json")
            assert stats.returncode == 0, stats.stderr
            assert json.loads(stats.stdout)["feedback"] == {"up": 1, "down": 0}
        finally:
            decoys["decoy-one-line"].unlink()  # the suite replays every regular log left behind
            decoys["decoy-stray"].unlink()


# --- a rating counts once per answer ---------------------------------------------------------


def _feedback_counts(base: str) -> dict[str, float]:
    return metric_samples(base, "reactome_answers_feedback_total")


@pytest.mark.slow  # 200 requests through a real server: 100+, as the marker says
def test_two_hundred_alternating_ratings_count_one_answer_once(isolated_home: Path) -> None:
    with served() as base:
        request_id = httpx.post(f"{base}/v1/answer", json={"question": QUESTION}, timeout=60)
        request_id = request_id.json()["request_id"]
        url = f"{base}/v1/answers/{request_id}/feedback"

        def rate(n: int) -> int:
            body = {"rating": ("up", "down")[n % 2]}
            return httpx.post(url, json=body, timeout=60).status_code

        with ThreadPoolExecutor(max_workers=8) as pool:
            statuses = list(pool.map(rate, range(200)))
        assert statuses.count(201) == 1  # the first to take the lock
        assert statuses.count(200) == 199
        (log,) = find_request_logs(isolated_home / "logs", request_id)
        last = read_feedback(log)
        assert last is not None
        other = "down" if last["rating"] == "up" else "up"
        assert _feedback_counts(base) == {last["rating"]: 1.0, other: 0.0}
        # A comment added to the same rating is the same answer rated the same; a change
        # moves it to the other count.
        same = httpx.post(url, json={"rating": last["rating"], "comment": "why"}, timeout=30)
        assert same.status_code == 200
        assert _feedback_counts(base) == {last["rating"]: 1.0, other: 0.0}
        assert httpx.post(url, json={"rating": other}, timeout=30).status_code == 200
        assert _feedback_counts(base) == {last["rating"]: 0.0, other: 1.0}
        assert not [p for p in log.parent.iterdir() if p.name.endswith(".tmp")]
        assert feedback_path(log).exists()


@pytest.mark.slow  # two `serve` processes
def test_ratings_raced_across_two_instances_sharing_a_logs_folder_count_once(
    sample_home: Path, tmp_path: Path
) -> None:
    logs = tmp_path / "shared-logs"
    env = {"REACTOME_ANSWERS_LOGS_DIR": str(logs)}
    with serve_command(sample_home, env=env) as one, serve_command(sample_home, env=env) as other:
        reply = httpx.post(f"{one.base}/v1/answer", json={"question": QUESTION}, timeout=120)
        request_id = reply.json()["request_id"]

        def rate(n: int) -> int:
            # Every other rating to the other process, which finds the log the first wrote.
            base = (one.base, other.base)[n % 4 // 2]
            body = {"rating": ("up", "down")[n % 2]}
            url = f"{base}/v1/answers/{request_id}/feedback"
            return httpx.post(url, json=body, timeout=60).status_code

        with ThreadPoolExecutor(max_workers=8) as pool:
            statuses = list(pool.map(rate, range(200)))
        assert statuses.count(201) == 1
        assert statuses.count(200) == 199
        (log,) = find_request_logs(logs, request_id)
        last = read_feedback(log)
        assert last is not None
        other_rating = "down" if last["rating"] == "up" else "up"
        # Each instance counts the changes it stored; summed, as a query over the fleet
        # sums them, the answer is counted once, under its latest rating.
        counts = [_feedback_counts(base) for base in (one.base, other.base)]
        for rating, expected in ((last["rating"], 1.0), (other_rating, 0.0)):
            assert sum(count.get(rating, 0.0) for count in counts) == expected, counts
