"""What an outside attack on `serve`, the logs and ingestion found, each through the real server
or the real command line: oversized and slow bodies, idle connections, terminal escapes,
pasted secrets, look-alike text, broken log folders, odd ids, speeds and ports."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import FakeListChatModel

from app.server import create_app
from pipelines.pipeline import AnswerPipeline
from pipelines.settings import load_settings
from tests.servers import serve, serve_command
from tests.test_event_logs import cli
from tests.test_stream_gating import ABCA1, CDK5, make_pipeline

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
        deadline = started + 6  # the limits are 1 s and 2 s: every one is gone well before
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
        try:
            time.sleep(0.3)
            refused = httpx.get(f"{served.base}/healthz", timeout=10)
            assert refused.status_code == 503
            assert refused.json()["error"]["code"] == "too_many_connections"
        finally:
            for sock in held:
                sock.close()
        time.sleep(0.3)
        assert httpx.get(f"{served.base}/healthz", timeout=10).status_code == 200


# --- 12. one behaviour for empty and blank questions; content type; HEAD --------------------


@pytest.fixture(scope="module")
def app_base(sample_home: Path, minilm: Embeddings) -> Iterator[str]:
    settings = load_settings(home=sample_home, event_logs=False)
    pipeline = AnswerPipeline(
        settings,
        embeddings=minilm,
        answer_model=FakeListChatModel(responses=["ABCA1 exports cholesterol [1]."]),
        expander_model=FakeListChatModel(responses=["{}"]),
    )
    yield from serve(create_app(settings, pipeline=pipeline))


@pytest.mark.parametrize("question", ["", "   ", "\n\t "])
@pytest.mark.parametrize("path", ["/v1/answer", "/v1/answer/stream"])
def test_empty_and_blank_questions_are_both_422(app_base: str, path: str, question: str) -> None:
    response = httpx.post(f"{app_base}{path}", json={"question": question}, timeout=30)
    assert response.status_code == 422
    assert response.json()["error"]["message"] == (
        "question: is empty or only white space; ask a question"
    )


def test_a_body_that_is_not_json_is_415_naming_the_content_type(app_base: str) -> None:
    body = json.dumps({"question": QUESTION})
    for headers, named in (
        ({"Content-Type": "text/plain"}, "'text/plain'"),
        ({"Content-Type": "application/x-www-form-urlencoded"}, "x-www-form-urlencoded"),
        ({}, "no Content-Type"),
    ):
        response = httpx.post(f"{app_base}/v1/answer", content=body, headers=headers, timeout=30)
        assert response.status_code == 415, response.text
        message = response.json()["error"]["message"]
        assert named in message
        assert "Content-Type: application/json" in message
    charset = {"Content-Type": "application/json; charset=utf-8"}
    ok = httpx.post(f"{app_base}/v1/answer", content=body, headers=charset, timeout=30)
    assert ok.status_code == 200


def test_head_healthz_answers_like_get_without_a_body(app_base: str) -> None:
    got = httpx.get(f"{app_base}/healthz", timeout=30)
    head = httpx.head(f"{app_base}/healthz", timeout=30)
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
