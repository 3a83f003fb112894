"""Feedback on an answer: `POST /v1/answers/{request_id}/feedback` on a real server on
127.0.0.1, the sidecar file it writes beside the answer's log, what `logs list --feedback`,
`logs stats` and `/metrics` make of it, and the web client's thumbs in Chromium."""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import sync_playwright
from prometheus_client.parser import text_string_to_metric_families

from app.http.factory import create_app
from app.http.settings import load_server_settings
from callbacks.feedback import (
    FEEDBACK_LOCK,
    MAX_COMMENT_CHARS,
    feedback_path,
    read_feedback,
    write_feedback,
)
from callbacks.log import find_request_logs, list_log_files, log_file_name, prune_logs
from callbacks.log_summary import summarize
from pipelines.core.errors import InputError
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS
from tests.support.cli import cli
from tests.support.fake_pipeline import ABCA1, CDK5, make_pipeline
from tests.support.servers import serve, serve_command

KEY = "feedback-key-7c2d9e41"


@contextmanager
def served(**server: Any) -> Iterator[str]:
    """A real server on 127.0.0.1 over a scripted pipeline that logs into the test's home;
    ``server`` are the HTTP server's settings (keys, rate limit)."""
    pipeline, _, _ = make_pipeline([ABCA1, CDK5], "ABCA1 exports cholesterol [1].")
    app = create_app(pipeline.settings, pipeline=pipeline, server=load_server_settings(**server))
    yield from serve(app)


def answer(base: str, headers: dict[str, str] | None = None) -> str:
    """Ask one question; the answer's request id."""
    response = httpx.post(
        f"{base}/v1/answer", json={"question": "What does ABCA1 do?"}, headers=headers, timeout=60
    )
    assert response.status_code == 200, response.text
    request_id: str = response.json()["request_id"]
    return request_id


def rate(base: str, request_id: str, body: object, **headers: str) -> httpx.Response:
    return httpx.post(
        f"{base}/v1/answers/{request_id}/feedback", json=body, headers=headers, timeout=30
    )


def the_log(home: Path, request_id: str) -> Path:
    (log,) = find_request_logs(home / "logs", request_id)
    return log


def feedback_counts(base: str, **headers: str) -> dict[str, float]:
    text = httpx.get(f"{base}/metrics", headers=headers, timeout=30).text
    return {
        sample.labels["rating"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "reactome_answers_feedback_total"
    }


# --- the endpoint ---------------------------------------------------------------------------


@pytest.mark.slow  # the installed command
def test_feedback_is_stored_beside_the_log_and_a_later_rating_replaces_it(
    isolated_home: Path,
) -> None:
    with served() as base:
        request_id = answer(base)
        log = the_log(isolated_home, request_id)
        written = log.read_bytes()

        first = rate(base, request_id, {"rating": "down", "comment": "It missed HDL."})
        assert first.status_code == 201, first.text
        assert first.json()["rating"] == "down"
        stored = json.loads(feedback_path(log).read_text(encoding="utf-8"))
        assert stored["request_id"] == request_id
        assert stored["rating"] == "down"
        assert stored["comment"] == "It missed HDL."
        assert datetime.fromisoformat(stored["at"]).tzinfo is not None

        later = rate(base, request_id, {"rating": "up"})
        assert later.status_code == 200, later.text
        assert read_feedback(log) == later.json()
        assert later.json()["rating"] == "up"
        assert later.json()["comment"] is None

    # The log is as the answer left it (conftest replays it: `replay --check` passes), and
    # the folder holds it, its one sidecar, the folder's feedback lock and nothing half
    # written.
    assert log.read_bytes() == written
    assert sorted(path.name for path in log.parent.iterdir()) == sorted(
        [log.name, feedback_path(log).name, FEEDBACK_LOCK]
    )
    checked = cli(isolated_home, "replay", "--check", request_id)
    assert checked.returncode == 0, checked.stderr


def test_an_unknown_request_id_is_404_in_our_error_shape(isolated_home: Path) -> None:
    with served() as base:
        answer(base)
        for unknown in ("0" * 32, "no-such-answer", "no such answer"):
            response = rate(base, unknown, {"rating": "up"})
            assert response.status_code == 404, unknown
            error = response.json()["error"]
            assert error["code"] == "not_found"
            assert "request id" in error["message"]
    assert not list(isolated_home.glob("logs/*.feedback.json"))


def test_a_bad_body_is_422(isolated_home: Path) -> None:
    with served() as base:
        request_id = answer(base)
        bad_bodies = [
            {"rating": "sideways"},
            {"rating": "UP"},
            {},
            {"comment": "no rating"},
            {"rating": "down", "comment": "x" * (MAX_COMMENT_CHARS + 1)},
            {"rating": "down", "comment": 5},
            {"rating": "down", "stars": 1},
            ["down"],
        ]
        for body in bad_bodies:
            response = rate(base, request_id, body)
            assert response.status_code == 422, body
            assert response.json()["error"]["code"] == "bad_input"
        not_json = httpx.post(
            f"{base}/v1/answers/{request_id}/feedback",
            content=b"rating=up",
            headers={"Content-Type": "application/json"},
            timeout=30,
        )
        assert not_json.status_code == 422
        assert read_feedback(the_log(isolated_home, request_id)) is None

        longest = rate(base, request_id, {"rating": "down", "comment": "y" * MAX_COMMENT_CHARS})
        assert longest.status_code == 201
        assert longest.json()["comment"] == "y" * MAX_COMMENT_CHARS


def test_a_comment_is_redacted_like_a_question(isolated_home: Path) -> None:
    pasted = "sk-proj-4f9a8b7c6d5e4f3a2b1c"
    with served(api_keys=KEY) as base:
        auth = {"Authorization": f"Bearer {KEY}"}
        request_id = answer(base, auth)
        comment = f"It broke when I pasted {pasted} and then the server's key {KEY} here."
        response = rate(base, request_id, {"rating": "down", "comment": comment}, **auth)
        assert response.status_code == 201, response.text
    sidecar = feedback_path(the_log(isolated_home, request_id)).read_text(encoding="utf-8")
    assert pasted not in sidecar
    assert KEY not in sidecar
    assert "It broke when I pasted [redacted]" in sidecar


def test_keys_apply_to_feedback(isolated_home: Path) -> None:
    with served(api_keys=KEY) as base:
        request_id = answer(base, {"Authorization": f"Bearer {KEY}"})
        missing = rate(base, request_id, {"rating": "up"})
        assert missing.status_code == 401
        assert missing.json()["error"]["code"] == "unauthorized"
        wrong = rate(base, request_id, {"rating": "up"}, Authorization="Bearer not-the-key")
        assert wrong.status_code == 401
        assert read_feedback(the_log(isolated_home, request_id)) is None
        given = rate(base, request_id, {"rating": "up"}, Authorization=f"Bearer {KEY}")
        assert given.status_code == 201
        assert read_feedback(the_log(isolated_home, request_id)) == given.json()


def test_the_rate_limit_applies_to_feedback(isolated_home: Path) -> None:
    with served(rate_limit=3) as base:
        request_id = answer(base)  # one of the minute's three
        assert rate(base, request_id, {"rating": "up"}).status_code == 201
        assert rate(base, request_id, {"rating": "down"}).status_code == 200
        limited = rate(base, request_id, {"rating": "up"})
        assert limited.status_code == 429
        assert limited.json()["error"]["code"] == "rate_limited"
        assert "Retry-After" in limited.headers
    stored = read_feedback(the_log(isolated_home, request_id))
    assert stored is not None
    assert stored["rating"] == "down"


def test_metrics_count_each_rated_answer_once_under_its_latest_rating() -> None:
    with served() as base:
        first, second = answer(base), answer(base)
        assert feedback_counts(base) == {}
        rate(base, first, {"rating": "down"})
        rate(base, first, {"rating": "down", "comment": "the comment, after the click"})
        rate(base, second, {"rating": "up"})
        assert feedback_counts(base) == {"down": 1.0, "up": 1.0}
        rate(base, second, {"rating": "down"})  # changed its mind: moved, not added
        assert feedback_counts(base) == {"down": 2.0, "up": 0.0}
        rate(base, second, {"rating": "up"})
        assert feedback_counts(base) == {"down": 1.0, "up": 1.0}
        assert "# TYPE reactome_answers_feedback_total gauge" in httpx.get(f"{base}/metrics").text
        text = httpx.get(f"{base}/metrics", timeout=30).text
        assert 'endpoint="/v1/answers/{request_id}/feedback"' in text


# --- the commands ---------------------------------------------------------------------------


def record(home: Path, *ratings: str | None) -> list[Path]:
    """One logged answer per rating, rated so (None: not rated); their logs, oldest first."""
    pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 exports cholesterol [1].")
    logs = []
    for n, rating in enumerate(ratings):
        request_id = f"req-{n}"
        list(pipeline.stream("What does ABCA1 do?", request_id=request_id))
        (log,) = find_request_logs(home / "logs", request_id)
        if rating is not None:
            write_feedback(log, request_id, rating, f"comment {n}")
        logs.append(log)
    return logs


@pytest.mark.slow  # the installed command
def test_logs_list_selects_by_feedback_and_stats_count_it(isolated_home: Path) -> None:
    record(isolated_home, "down", None, "up", "down")

    down = cli(isolated_home, "logs", "list", "--feedback", "down", "--json")
    assert down.returncode == 0, down.stderr
    rows = json.loads(down.stdout)
    assert [row["request_id"] for row in rows] == ["req-3", "req-0"]
    assert [row["feedback"]["comment"] for row in rows] == ["comment 3", "comment 0"]
    every = json.loads(cli(isolated_home, "logs", "list", "--json").stdout)
    assert [row["feedback"] and row["feedback"]["rating"] for row in every] == [
        "down", "up", None, "down"
    ]  # fmt: skip
    text = cli(isolated_home, "logs", "list", "--feedback", "up")
    assert text.returncode == 0
    assert len(text.stdout.splitlines()) == 1
    assert "req-2" in text.stdout
    bad = cli(isolated_home, "logs", "list", "--feedback", "sideways")
    assert bad.returncode == 2

    many = cli(isolated_home, "logs", "stats", "--json")
    assert many.returncode == 0, many.stderr
    assert json.loads(many.stdout)["feedback"] == {"up": 1, "down": 2}
    assert "feedback: 1 up, 2 down" in cli(isolated_home, "logs", "stats").stdout
    last = json.loads(cli(isolated_home, "logs", "stats", "--last", "2", "--json").stdout)
    assert last["feedback"] == {"up": 1, "down": 1}

    one = json.loads(cli(isolated_home, "logs", "stats", "req-0", "--json").stdout)
    assert one["feedback"]["rating"] == "down"
    unrated = json.loads(cli(isolated_home, "logs", "stats", "req-1", "--json").stdout)
    assert unrated["feedback"] is None


def test_summarize_counts_feedback_rows_carry() -> None:
    answered = {"state": "answered", "citations_final": 1}
    rows: list[dict[str, Any]] = [
        {**answered, "feedback": {"rating": "down"}},
        {**answered, "feedback": None},
        {"state": "refused", "feedback": {"rating": "up"}},
        {**answered, "feedback": {"rating": "down"}},
        {"error": "unreadable", "feedback": {"rating": "down"}},  # still a user's rating
        answered,  # a row from a caller that read no feedback
        {**answered, "feedback": "garbage"},
    ]
    assert summarize(rows)["feedback"] == {"up": 1, "down": 3}
    assert summarize([])["feedback"] == {"up": 0, "down": 0}


# --- the sidecar ------------------------------------------------------------------------------


def a_log(folder: Path, request_id: str, when: datetime) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / log_file_name(request_id, when)
    path.write_text('{"kind": "header"}\n', encoding="utf-8")
    return path


def test_the_sidecar_is_named_after_the_log_and_never_listed_as_one(tmp_path: Path) -> None:
    log = a_log(tmp_path, "req-a", datetime(2026, 1, 2, tzinfo=UTC))
    assert feedback_path(log) == tmp_path / "20260102T000000000000-req-a.feedback.json"
    write_feedback(log, "req-a", "up", None)
    assert list_log_files(tmp_path) == [log]
    assert find_request_logs(tmp_path, "req-a") == [log]


def test_a_damaged_sidecar_reads_as_no_feedback(tmp_path: Path) -> None:
    log = a_log(tmp_path, "req-a", datetime(2026, 1, 2, tzinfo=UTC))
    sidecar = feedback_path(log)
    assert read_feedback(log) is None
    huge = b'{"rating": "up", "x": "' + b"a" * 70_000 + b'"}'
    damaged_forms = [b"", b"{", b'{"rating": "up"', b"[]", b'"up"', b'{"rating": "sideways"}',
                     b"\xff\xfe", b"[" * 100_000, huge]  # fmt: skip
    for damaged in damaged_forms:
        sidecar.write_bytes(damaged)
        assert read_feedback(log) is None, damaged[:40]
    sidecar.unlink()
    sidecar.mkdir()
    assert read_feedback(log) is None
    sidecar.rmdir()
    sidecar.write_text('{"rating": "down", "comment": 7}', encoding="utf-8")
    assert read_feedback(log) == {"request_id": "", "rating": "down", "comment": None, "at": ""}


@pytest.mark.slow  # the installed command
def test_a_fifo_named_as_a_sidecar_is_not_waited_on(isolated_home: Path) -> None:
    # On a shared folder any host that can write there could leave one; a reader that opened
    # it would wait for a writer for ever, and `logs list` and the log page with it.
    pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 [1].")
    done = list(pipeline.stream("What does ABCA1 do?"))[-1]
    (log,) = find_request_logs(isolated_home / "logs", done.request_id)
    os.mkfifo(feedback_path(log))
    read: list[object] = []
    reader = threading.Thread(target=lambda: read.append(read_feedback(log)), daemon=True)
    reader.start()
    reader.join(timeout=60)
    assert read == [None]
    listed = cli(isolated_home, "logs", "list", "--json", timeout_s=60)
    assert listed.returncode == 0, listed.stderr
    assert [row["feedback"] for row in json.loads(listed.stdout)] == [None]


def test_a_rating_is_as_readable_as_its_log(tmp_path: Path) -> None:
    # Every account that reads a shared logs folder must see the ratings too; a private
    # temporary file renamed into place would hide them.
    log = a_log(tmp_path, "req-a", datetime(2026, 1, 2, tzinfo=UTC))
    log.chmod(0o644)
    write_feedback(log, "req-a", "up", None)
    assert stat.S_IMODE(feedback_path(log).stat().st_mode) == 0o644


def test_write_feedback_refuses_a_bad_rating_or_a_long_comment(tmp_path: Path) -> None:
    log = a_log(tmp_path, "req-a", datetime(2026, 1, 2, tzinfo=UTC))
    with pytest.raises(InputError, match="neither 'up' nor 'down'"):
        write_feedback(log, "req-a", "meh", None)
    with pytest.raises(InputError, match="2,001 characters"):
        write_feedback(log, "req-a", "up", "z" * (MAX_COMMENT_CHARS + 1))
    assert read_feedback(log) is None
    assert write_feedback(log, "req-a", "up", "   \n ")["comment"] is None
    lone = write_feedback(log, "req-a", "down", "bad \ud800 text")
    assert lone["comment"] == "bad \ufffd text"
    assert read_feedback(log) == lone


def test_concurrent_writers_leave_one_whole_rating(tmp_path: Path) -> None:
    log = a_log(tmp_path, "req-a", datetime(2026, 1, 2, tzinfo=UTC))
    comments = {rating: f"{rating} " * 390 for rating in ("up", "down")}  # 1 to 2 kB each
    seen: list[dict[str, Any] | None] = []
    start = threading.Barrier(5)
    written = threading.Event()

    def write(rating: str) -> None:
        start.wait()
        for _ in range(100):
            write_feedback(log, "req-a", rating, comments[rating])

    def watch() -> None:
        # Reads for as long as the writers write, and at least once after: however the
        # threads are scheduled, the last read sees a rating.
        start.wait()
        while True:
            finished = written.is_set()
            seen.append(read_feedback(log))
            if finished:
                return

    writers = [threading.Thread(target=write, args=(r,)) for r in ("up", "down", "up", "down")]
    watcher = threading.Thread(target=watch)
    for thread in [*writers, watcher]:
        thread.start()
    for thread in writers:
        thread.join(timeout=120)
    written.set()
    watcher.join(timeout=120)
    # Every read saw one writer's whole record, never a mixture or a part (a part reads as
    # None, which only the reads before the first write may see).
    first = next(n for n, found in enumerate([*seen, {}]) if found is not None)
    assert seen[first:], "the reader never saw a rating"
    for found in seen[first:]:
        assert found is not None
        assert found["comment"] == comments[found["rating"]].strip()
    assert read_feedback(log) is not None
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_pruning_takes_a_logs_feedback_with_it_and_keeps_a_kept_logs(tmp_path: Path) -> None:
    old = a_log(tmp_path, "old", datetime(2026, 1, 1, tzinfo=UTC))
    kept = a_log(tmp_path, "kept", datetime(2026, 1, 3, tzinfo=UTC))
    for log, request_id in ((old, "old"), (kept, "kept")):
        write_feedback(log, request_id, "down", None)
    # Feedback whose log another process pruned between finding it and storing beside it.
    orphan = feedback_path(tmp_path / log_file_name("gone", datetime(2026, 1, 2, tzinfo=UTC)))
    orphan.write_text('{"rating": "up"}', encoding="utf-8")
    foreign = tmp_path / "notes.feedback.json"  # not named as we name them: not ours
    foreign.write_text("{}", encoding="utf-8")

    assert prune_logs(tmp_path, keep_days=0, keep_count=1, dry_run=True) == [old]
    assert feedback_path(old).exists()
    assert orphan.exists()

    assert prune_logs(tmp_path, keep_days=0, keep_count=1) == [old]
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        [kept.name, feedback_path(kept).name, foreign.name]
    )


def test_a_sidecar_that_is_no_file_is_left_alone(tmp_path: Path) -> None:
    old = a_log(tmp_path, "old", datetime(2026, 1, 1, tzinfo=UTC))
    a_log(tmp_path, "new", datetime(2026, 1, 3, tzinfo=UTC))
    feedback_path(old).mkdir()
    target = tmp_path / "elsewhere.txt"
    target.write_text("not ours", encoding="utf-8")
    feedback_path(tmp_path / log_file_name("x", datetime(2026, 1, 2))).symlink_to(target)
    assert prune_logs(tmp_path, keep_days=0, keep_count=1) == [old]
    assert feedback_path(old).is_dir()
    assert target.read_text(encoding="utf-8") == "not ours"


# --- the web client -------------------------------------------------------------------------


@pytest.mark.slow
def test_the_page_rates_an_answer_down_with_a_comment(
    sample_home: Path, isolated_home: Path
) -> None:
    logs = isolated_home / "logs"  # the shared-folder setting: conftest replays these logs
    env = {"REACTOME_ANSWERS_LOGS_DIR": str(logs)}
    with (
        serve_command(sample_home, env=env) as server,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.set_default_timeout(90_000)
        problems: list[str] = []
        page.on("pageerror", lambda error: problems.append(str(error)))
        page.goto(f"{server.base}/")
        page.fill("#question", "What does ABCA1 do?")
        page.click("#submit")
        page.wait_for_selector("#feedback .feedback button.rate[data-rating=down]")
        request_id = page.get_attribute("#feedback .feedback", "data-request-id")
        assert request_id
        (log,) = find_request_logs(logs, request_id)

        page.click("#feedback button.rate[data-rating=down]")
        page.wait_for_selector("#feedback .feedback[data-sent=down]", state="attached")
        rated = read_feedback(log)
        assert rated is not None
        assert rated["rating"] == "down"
        assert page.get_attribute("#feedback button[data-rating=down]", "aria-pressed") == "true"
        # Too long: the server's reason is shown, and nothing stored changes.
        page.fill("#feedback .feedback-comment textarea", "w" * (MAX_COMMENT_CHARS + 1))
        page.click("#feedback .feedback-comment button[type=submit]")
        page.wait_for_function(
            "() => document.querySelector('#feedback .feedback-note').textContent"
            ".includes('at most 2000 characters')"
        )
        assert read_feedback(log) == {**rated, "comment": None}
        page.fill("#feedback .feedback-comment textarea", "  The answer never mentions HDL.  ")
        page.click("#feedback .feedback-comment button[type=submit]")
        page.wait_for_function(
            "() => document.querySelector('#feedback .feedback-note').textContent"
            ".includes('comment sent')"
        )
        stored = read_feedback(log)
        assert stored is not None
        assert stored["rating"] == "down"
        assert stored["comment"] == "The answer never mentions HDL."

        # Asking again keeps the rated answer above, its controls still there.
        page.fill("#question", "What does CDK5 do?")
        page.click("#submit")
        page.wait_for_function(
            "() => document.querySelectorAll('.feedback').length === 2"
            " && document.querySelector('#conversation .feedback') !== null"
        )
        browser.close()
        assert problems == []


def test_limits_say_whether_answers_can_be_rated() -> None:
    from app.http.replay_app import create_replay_app
    from pipelines.core.settings import load_settings

    server = load_server_settings()
    for logs_on in (True, False):
        pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 [1].", event_logs=logs_on)
        app = create_app(pipeline.settings, pipeline=pipeline, server=server)
        with contextmanager(serve)(app) as base:
            assert httpx.get(f"{base}/v1/limits").json()["feedback"] is logs_on
    # A replay serves the recorded answer but keeps no ratings.
    replay = create_replay_app([], speed=None, settings=load_settings(), server=server)
    with contextmanager(serve)(replay) as base:
        assert httpx.get(f"{base}/v1/limits").json()["feedback"] is False


@pytest.mark.slow
def test_the_page_offers_no_rating_when_the_server_keeps_none(sample_home: Path) -> None:
    env = {"REACTOME_ANSWERS_EVENT_LOGS": "false"}
    with serve_command(sample_home, env=env) as server, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.goto(f"{server.base}/")
        page.fill("#question", "What does ABCA1 do?")
        page.click("#submit")
        page.wait_for_selector("#answer[data-state=answered]", state="attached", timeout=90_000)
        # The controls would be drawn in the same moment the answer settles.
        assert page.locator("#feedback .feedback").count() == 0
        browser.close()
