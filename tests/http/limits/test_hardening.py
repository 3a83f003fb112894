"""What an outside attack on `serve`, the logs and ingestion found, each through the real server
or the real command line: oversized and slow bodies, idle connections, terminal escapes,
pasted secrets, look-alike text, broken log folders, odd ids, speeds and ports."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.cli import cli
from tests.support.fake_pipeline import ABCA1, CDK5, make_pipeline
from tests.support.servers import serve_command
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow  # `serve` subprocesses and the installed command

QUESTION = "What does ABCA1 do in Tangier disease?"
ONE_MB_BODY = json.dumps(
    {"question": QUESTION, "history": [{"role": "user", "content": "x" * 20_000}] * 50}
).encode()


def chunked(body: bytes, size: int = 8192) -> Iterator[bytes]:
    for start in range(0, len(body), size):
        piece = body[start : start + size]
        yield b"%x\r\n%s\r\n" % (len(piece), piece)
    yield b"0\r\n\r\n"


def post_chunked(base: str, path: str, body: bytes) -> tuple[int, bytes]:
    """POST ``body`` with ``Transfer-Encoding: chunked`` over a raw socket, reading the answer
    while still sending (a server that answers early closes on a client still writing)."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        ).encode()

        def send() -> None:
            try:
                sock.sendall(head)
                for piece in chunked(body):
                    sock.sendall(piece)
            except OSError:
                pass  # the server stopped reading: the answer says why

        sender = threading.Thread(target=send)
        sender.start()
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except OSError:
            pass  # a reset after the answer: it was read already
        sender.join(timeout=30)
    status_line, _, rest = received.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 "), received[:200]
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def address(base: str) -> tuple[str, int]:
    host, port = base.removeprefix("http://").split(":")
    return host, int(port)


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


# --- 1. the body limit holds whatever the framing -----------------------------------------------


def test_a_chunked_body_over_the_limit_is_413_and_never_read_whole(sample_home: Path) -> None:
    with serve_command(sample_home, "--no-log") as served:
        small = json.dumps({"question": QUESTION}).encode()
        status, body = post_chunked(served.base, "/v1/answer", small)
        assert status == 200, body  # a chunked body under the limit still answers
        assert json.loads(body)["state"] == "answered"
        before = rss_kb(served.pid)

        for path in ("/v1/answer", "/v1/answer/stream"):
            status, body = post_chunked(served.base, path, ONE_MB_BODY)
            assert status == 413, body
            assert "65,536 bytes" in json.loads(body)["error"]["message"]

        # Several at once, 8 MB each: each is cut off at the limit, so memory stays flat.
        huge = ONE_MB_BODY * 8
        results: list[tuple[int, bytes]] = []
        threads = [
            threading.Thread(
                target=lambda p=path: results.append(post_chunked(served.base, p, huge))
            )
            for path in ["/v1/answer", "/v1/answer/stream"] * 4
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert sorted(status for status, _ in results) == [413] * 8
        assert all(json.loads(body)["error"]["code"] == "too_large" for _, body in results)
        assert rss_kb(served.pid) - before < 30_000  # 64 MB was sent; far less was kept


def test_replay_serve_has_the_same_body_limit_and_error_shape(isolated_home: Path) -> None:
    pipeline, _, _ = make_pipeline([ABCA1, CDK5], "CDK5 [2] first, ABCA1 [1].")
    list(pipeline.stream("What does CDK5 do?", request_id="req-limit"))
    replay = ("replay", "req-limit", "--instant", "--serve")
    with serve_command(isolated_home, command=replay) as served:
        status, body = post_chunked(served.base, "/v1/answer/stream", ONE_MB_BODY)
        assert status == 413
        assert json.loads(body)["error"]["code"] == "too_large"
        missing = httpx.get(f"{served.base}/no-such-page", timeout=10)
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "http_404"
        wrong_method = httpx.delete(f"{served.base}/v1/answer/stream", timeout=10)
        assert wrong_method.status_code == 405
        assert wrong_method.json()["error"]["message"]


# --- 3. slow clients are cut off; open connections are capped ----------------------------------


def _closed_by_server(sock: socket.socket, until: float) -> bytes | None:
    """What the server sent before closing, or None if it is still open at ``until``."""
    received = b""
    while time.monotonic() < until:
        sock.settimeout(max(until - time.monotonic(), 0.01))
        try:
            chunk = sock.recv(4096)
        except TimeoutError:
            return None
        except OSError:
            return received
        if not chunk:
            return received
        received += chunk
    return None


def test_slow_and_idle_clients_are_closed_within_the_time_limits(sample_home: Path) -> None:
    limits = {"REACTOME_ANSWERS_HEADER_TIMEOUT_S": "1", "REACTOME_ANSWERS_BODY_TIMEOUT_S": "2"}
    with serve_command(sample_home, "--no-log", env=limits) as served:
        host, port = served.base.removeprefix("http://").split(":")
        slow_body, idle = [], []
        for number in range(40):
            sock = socket.create_connection((host, int(port)), timeout=10)
            sock.sendall(
                b"POST /v1/answer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 100\r\n\r\n{"
            )
            slow_body.append(sock)
            sock = socket.create_connection((host, int(port)), timeout=10)
            if number % 2:  # half-sent headers; the others send nothing at all
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            idle.append(sock)
        started = time.monotonic()
        # One byte a second on every slow body, as the attack did.
        for _ in range(2):
            time.sleep(1)
            for sock in slow_body:
                with contextlib.suppress(OSError):
                    sock.sendall(b" ")
        # The limits are 1 s and 2 s; without them nothing would close these at all. The
        # bound is for that, not for a slow machine.
        deadline = started + 120
        for sock in idle:
            assert _closed_by_server(sock, deadline) == b""
        for sock in slow_body:
            answer = _closed_by_server(sock, deadline)
            assert answer is not None, "a slow body is still open"
            assert answer.startswith(b"HTTP/1.1 408"), answer[:100]
            assert b'"code":"body_timeout"' in answer
        for sock in slow_body + idle:
            sock.close()
        # The server is still there for everyone else.
        normal = httpx.post(f"{served.base}/v1/answer", json={"question": QUESTION}, timeout=60)
        assert normal.status_code == 200


def test_connections_over_the_cap_get_503_in_our_error_shape(sample_home: Path) -> None:
    with serve_command(
        sample_home, "--no-log", env={"REACTOME_ANSWERS_MAX_CONNECTIONS": "10"}
    ) as served:
        host, port = served.base.removeprefix("http://").split(":")
        held = [socket.create_connection((host, int(port)), timeout=10) for _ in range(10)]

        def healthz() -> httpx.Response:
            return httpx.get(f"{served.base}/healthz", timeout=30)

        def refused() -> httpx.Response | None:
            response = healthz()
            return response if response.status_code == 503 else None

        try:
            # Once the server has taken all ten (it may not have, just after they connect).
            response = wait_until(refused, what="a connection over the cap refused")
            assert response.json()["error"]["code"] == "too_many_connections"
        finally:
            for sock in held:
                sock.close()
        # Once the server has seen them close, a slot is free again.
        wait_until(lambda: healthz().status_code == 200, what="a free connection slot")


# --- 12. one behaviour for empty and blank questions; content type; HEAD --------------------


@pytest.mark.parametrize("question", ["", "   ", "\n\t "])
@pytest.mark.parametrize("path", ["/v1/answer", "/v1/answer/stream"])
def test_empty_and_blank_questions_are_both_422(fuzz_base: str, path: str, question: str) -> None:
    response = httpx.post(f"{fuzz_base}{path}", json={"question": question}, timeout=30)
    assert response.status_code == 422
    assert response.json()["error"]["message"] == (
        "question: is empty or only white space; ask a question"
    )


def test_a_body_that_is_not_json_is_415_naming_the_content_type(fuzz_base: str) -> None:
    body = json.dumps({"question": QUESTION})
    for headers, named in (
        ({"Content-Type": "text/plain"}, "'text/plain'"),
        ({"Content-Type": "application/x-www-form-urlencoded"}, "x-www-form-urlencoded"),
        ({}, "no Content-Type"),
    ):
        response = httpx.post(f"{fuzz_base}/v1/answer", content=body, headers=headers, timeout=30)
        assert response.status_code == 415, response.text
        message = response.json()["error"]["message"]
        assert named in message
        assert "Content-Type: application/json" in message
    charset = {"Content-Type": "application/json; charset=utf-8"}
    ok = httpx.post(f"{fuzz_base}/v1/answer", content=body, headers=charset, timeout=30)
    assert ok.status_code == 200


def test_head_healthz_answers_like_get_without_a_body(fuzz_base: str) -> None:
    got = httpx.get(f"{fuzz_base}/healthz", timeout=30)
    head = httpx.head(f"{fuzz_base}/healthz", timeout=30)
    assert head.status_code == got.status_code == 200
    assert head.content == b""
    assert head.headers["content-type"] == "application/json"


# --- 11. ports outside 1-65535 are usage errors ----------------------------------------------


@pytest.mark.parametrize("port", ["70000", "0", "-1", "99999", "http"])
def test_ports_outside_the_range_are_a_usage_error(isolated_home: Path, port: str) -> None:
    served = cli(isolated_home, "serve", "--port", port)
    assert served.returncode == 2
    assert "give a number from 1 to 65535" in served.stderr
    replayed = cli(isolated_home, "replay", "any-log", "--serve", port)
    assert replayed.returncode == 2
    assert "give a number from 1 to 65535" in replayed.stderr


# --- 2. nothing from a request reaches the operator's terminal as a control sequence ---------

ESCAPES = "Tangier\x1b]0;OWNED\x07\x1b[2J\x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\\x9b31m"
RAW_CONTROLS = ("\x1b", "\x07", "\x9b")


def test_cli_output_shows_escape_sequences_instead_of_obeying_them(isolated_home: Path) -> None:
    pipeline, _, _ = make_pipeline([ABCA1], f"ABCA1 [1] {ESCAPES}.")
    list(pipeline.stream(ESCAPES, request_id="req-refused"))  # refused: control characters
    list(pipeline.stream("What does ABCA1 do?", request_id="req-answered"))
    outputs = {
        "list": cli(isolated_home, "logs", "list"),
        "list --json": cli(isolated_home, "logs", "list", "--json"),
        "stats": cli(isolated_home, "logs", "stats", "req-refused"),
        "show": cli(isolated_home, "logs", "show", "req-answered"),
        "replay": cli(isolated_home, "replay", "--instant", "req-answered"),
        "missing": cli(isolated_home, "logs", "show", ESCAPES),
    }
    for name, result in outputs.items():
        for control in RAW_CONTROLS:
            assert control not in result.stdout + result.stderr, (name, result)
    assert "Tangier\\u001b]0;OWNED\\u0007\\u001b[2J" in outputs["list"].stdout
    assert "\\u009b31m" in outputs["replay"].stdout
    assert "]0;OWNED" in outputs["missing"].stderr
    # JSON output stays JSON and carries the exact text.
    rows = json.loads(outputs["list --json"].stdout)
    assert ESCAPES in [row["question"] for row in rows]
    # The log itself keeps exactly what was asked.
    logs = sorted((isolated_home / "logs").glob("*-req-refused.jsonl"))
    assert json.loads(logs[0].read_text().splitlines()[0])["question"] == ESCAPES


def test_the_ask_command_shows_control_characters_in_answers(sample_home: Path) -> None:
    result = cli(sample_home, "--no-log", "ask", f"What causes {ESCAPES} disease?")
    assert result.returncode == 1  # refused
    assert not any(control in result.stdout + result.stderr for control in RAW_CONTROLS)


# --- 4. pasted secrets are redacted in what is logged and echoed -----------------------------

SECRET_KEY = "sk-proj-abcdefghijklmnop0123456789"
BEARER = "eyJhbGciOiJIUzI1NiJ9.payload.signature"


def test_secrets_in_a_question_are_not_logged_or_echoed(isolated_home: Path) -> None:
    pipeline, retriever, _ = make_pipeline([ABCA1], "ABCA1 [1].")
    question = f"My key {SECRET_KEY} and Authorization: Bearer {BEARER}: what does ABCA1 do?"
    events = list(pipeline.stream(question, request_id="req-secret"))
    start = events[0]
    assert start.type == "start"
    echoed = start.data.model_dump_json()
    log_text = next((isolated_home / "logs").glob("*-req-secret.jsonl")).read_text()
    for text in (echoed, log_text):
        assert SECRET_KEY not in text
        assert BEARER not in text
        assert "[redacted]" in text
    # The search (and the model) still get the question as asked.
    assert retriever.queries == [question]


# --- 5. look-alike text is decided as the text it looks like -------------------------------


@pytest.mark.parametrize(
    "question",
    [
        "Should I st\u043ep taking my statins?",  # a Cyrillic o
        "Sh\u200bould I stop taking my statins?",  # a zero-width space
        "Should I stop taking my sta\u00adtins?",  # a soft hyphen
        "\uff33hould I stop taking my statins?",  # a full-width S
        # every letter it can be, a look-alike
        "\u0405\u04bb\u043eul\u0501 \u0406 \u0455t\u043e\u0440 "
        "t\u0430king my \u0455t\u0430tin\u0455?",
    ],
)
def test_look_alike_text_is_refused_like_the_plain_question(
    isolated_home: Path, question: str
) -> None:
    pipeline, retriever, _ = make_pipeline([ABCA1], "ABCA1 [1].")
    events = list(pipeline.stream(question, request_id="req-look-alike"))
    assert events[-1].type == "done"
    assert events[-1].data.state == "refused"
    assert "doctor" in events[-1].data.text
    assert retriever.queries == []
    header = json.loads(
        next((isolated_home / "logs").glob("*-req-look-alike.jsonl")).read_text().splitlines()[0]
    )
    assert header["question"] == question
    assert header["normalized_question"] == "Should I stop taking my statins?"


def test_retrieval_searches_the_normalized_question() -> None:
    pipeline, retriever, _ = make_pipeline([ABCA1], "ABCA1 [1].")
    list(pipeline.stream("What does \uff21\uff22\uff23\uff21\u200b1 do in Tang\u0456er disease?"))
    assert retriever.queries == ["What does ABCA1 do in Tangier disease?"]


# --- 7. every log ends with done, or is named incomplete ------------------------------------


def _logs_all_end_with_done(home: Path) -> bool:
    """Whether the home has logs and each one's last record is a done event."""
    logs = sorted((home / "logs").glob("*.jsonl"))
    for path in logs:
        lines = path.read_text(encoding="utf-8").splitlines()
        try:
            last = json.loads(lines[-1]) if lines else {}
        except ValueError:
            return False  # a line being written
        if last.get("kind") != "event" or last["event"]["type"] != "done":
            return False
    return bool(logs)


def test_a_client_gone_before_the_stream_starts_leaves_a_complete_log(
    sample_home: Path, isolated_home: Path
) -> None:
    home = isolated_home  # whose every log is replayed in the process when the test ends
    home.mkdir()
    for name in ("chroma", "keyword"):
        (home / name).symlink_to(sample_home / name)
    with serve_command(home) as served:
        for _ in range(30):  # connect, send, and leave before the first frame
            with socket.create_connection(address(served.base)) as s:
                body = json.dumps({"question": QUESTION}).encode()
                s.sendall(
                    b"POST /v1/answer/stream HTTP/1.1\r\nHost: x\r\nContent-Type: "
                    b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
                )
        # The server is stopped (gracefully) once what it started has been written out.
        wait_until(lambda: _logs_all_end_with_done(home), what="every log ending with done")
    logs = sorted((home / "logs").glob("*.jsonl"))
    assert logs
    # Every log is whole: each ends answered or failed (cancelled), none incomplete.
    summary = cli(home, "logs", "stats", "--json")
    assert summary.returncode == 0, summary.stderr
    stats = json.loads(summary.stdout)
    assert stats["logs"] == len(logs)
    assert stats["unreadable"] == 0
    assert set(stats["states"]) <= {"failed", "answered"}
    # And replays as recorded: the command on one here; every one is checked the same way
    # (in the process) when the test ends.
    check = cli(home, "replay", "--check", str(logs[-1]))
    assert check.returncode == 0, check.stdout + check.stderr


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


# --- 8. ids and file names are matched literally -------------------------------------------


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


# --- 9. absurd speeds and times in a log cannot overflow or stall a replay ------------------


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


# --- 10. odd files in the logs folder ------------------------------------------------------


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


# --- 6. ingesting into the home a server answers from ---------------------------------------


def _changed_corpus(target: Path) -> Path:
    """The sample corpus with one text changed in every collection, so an ingest of it makes
    a new version of each."""
    from pipelines.catalog import bundled_dir

    shutil.copytree(bundled_dir(), target)
    edits = {
        target / "reactome" / "pathway2summation.txt": ("normally", "usually"),
        target / "disease_variants" / "disease_variant_ewas_mapping.tsv": (
            "[plasma membrane]",
            "[cell membrane]",
        ),
        target / "userguide" / "index.md": ("\n", "\nThis page was revised.\n"),
    }
    for path, (old, new) in edits.items():
        text = path.read_text(encoding="utf-8")
        assert old in text, path
        path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return target


def _open_files(pid: int) -> list[str]:
    """What each of the process's open files is (a path, a socket, a pipe)."""
    found = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):  # closed since it was listed
            found.append(str(fd.readlink()))
    return sorted(found)


def _removed_files_open(pid: int, home: Path) -> list[str]:
    """The files of the home the process still holds although they were deleted: those of
    a removed collection version (its chunk table, its vector index)."""
    where = str(home.resolve())
    return [f for f in _open_files(pid) if f.startswith(where) and f.endswith(" (deleted)")]


def _added(before: list[str], after: list[str]) -> list[str]:
    left = list(after)
    for target in before:
        if target in left:
            left.remove(target)
    return left


def _index_folders(home: Path) -> int:
    return sum(1 for p in (home / "chroma").iterdir() if p.is_dir())


def test_ingests_under_load_fail_no_request_and_leave_nothing_behind(tmp_path: Path) -> None:
    from pipelines.catalog import bundled_dir

    home = tmp_path / "home"
    corpora = [_changed_corpus(tmp_path / "changed"), bundled_dir()]
    first = cli(home, "ingest", "--sample")
    assert first.returncode == 0, first.stderr
    # A request limit well beyond what an answer takes on a busy machine (up to 31 s seen at
    # a load of 8 to 10 on 2 cores, where 10 s failed answers with 504), yet short enough
    # that the retirement grace (limit + 15 s) can be waited for.
    env = {"REACTOME_ANSWERS_REQUEST_TIMEOUT_S": "60"}
    questions = [QUESTION, "What does IDH1 R132H do?", "How do I use the pathway browser?"]
    with serve_command(home, env=env) as served, httpx.Client(timeout=60) as client:
        url = f"{served.base}/v1/answer"

        def ask(question: str) -> dict[str, object]:
            response = client.post(url, json={"question": question})
            return {"status": response.status_code, **response.json()}

        results: list[dict[str, object]] = []
        durations: list[float] = []  # printed: what the request limit must stay well above
        ingesting = threading.Event()
        stop = threading.Event()

        def keep_asking(offset: int) -> None:
            number = offset
            while not stop.is_set():
                began = time.monotonic()
                result = ask(questions[number % len(questions)])
                durations.append(time.monotonic() - began)
                results.append({**result, "during_ingest": ingesting.is_set()})
                number += 1

        def under_load(ingests: int) -> None:
            """Six clients ask before, throughout and after ``ingests`` ingests (changed,
            sample, changed, sample). Counted, not timed: on a busy machine they only take
            longer."""
            stop.clear()
            asked_before = len(results)
            askers = [threading.Thread(target=keep_asking, args=(n,)) for n in range(6)]
            for thread in askers:
                thread.start()
            try:
                wait_until(lambda: len(results) >= asked_before + 6, what="six answers")
                for round_number in range(ingests):
                    corpus = corpora[round_number % 2]
                    ingesting.set()
                    ingested = cli(home, "ingest", "--from", str(corpus), timeout_s=600)
                    ingesting.clear()
                    assert ingested.returncode == 0, ingested.stderr
                asked_after = len(results)
                wait_until(lambda: len(results) >= asked_after + 6, what="six more answers")
            finally:
                stop.set()
                for thread in askers:
                    thread.join(timeout=120)

        def settled(files_at_most: int) -> bool:
            """Whether the retired versions are gone and their files closed (after the grace,
            housekeeping or the next ingest removes them; the next search lets go of them)."""
            for question in questions:
                assert ask(question)["state"] == "answered"
            return (
                _index_folders(home) == 3
                and not _removed_files_open(served.pid, home)
                and len(_open_files(served.pid)) <= files_at_most
            )

        def settle(files_at_most: int) -> None:
            # The grace is 75 s and housekeeping looks every 10 s; the bound is for a server
            # that never lets go, not for a slow machine.
            wait_until(
                lambda: settled(files_at_most),
                timeout_s=300,
                every_s=2,
                what="the retired versions removed and their files closed",
                state=lambda: (
                    _index_folders(home),
                    _removed_files_open(served.pid, home),
                    _added(files_before, _open_files(served.pid)),
                ),
            )

        # Warm: the same load through one ingest and its clean-up, so what the server holds
        # afterwards is its steady state, not its first allocations.
        files_before: list[str] = []
        under_load(ingests=1)
        settle(files_at_most=10_000)
        files_before, rss_before = _open_files(served.pid), rss_kb(served.pid)
        warm = len(results)
        under_load(ingests=4)
        failed = [r for r in results if r["status"] != 200 or r["state"] != "answered"]
        assert not failed, failed[:3]
        answered_during_ingests = sum(1 for r in results[warm:] if r["during_ingest"])
        assert answered_during_ingests >= 4, answered_during_ingests

        # Once no request can still read a retired version, the server removes it and lets
        # go of it: no removed version's file stays open, and files, memory and folders are
        # back where they were (two files of slack: a connection closing, a log).
        settle(files_at_most=len(files_before) + 2)
        assert _index_folders(home) == 3  # one vector index per live collection
        assert len(list((home / "keyword").iterdir())) == 3
        print(
            f"ingests under load: {len(results)} answers, {answered_during_ingests} during the "
            f"ingests, the slowest {max(durations):.1f} s; open files {len(files_before)} -> "
            f"{len(_open_files(served.pid))}, resident {rss_before} -> {rss_kb(served.pid)} KB"
        )
        # Not quite flat: each reopened Chroma client keeps about 3 MB (measured over 8
        # ingests in one process, after malloc_trim); the leak this replaces kept 8 open
        # files and about 6 MB per ingest, and the files never came back.
        assert rss_kb(served.pid) - rss_before < 4 * 12_000
    logs = sorted((home / "logs").glob("*.jsonl"))
    versions_per_log = [
        json.loads(path.read_text().splitlines()[0])["releases"] for path in logs[-20:]
    ]
    assert all(len(releases) == 3 for releases in versions_per_log)
