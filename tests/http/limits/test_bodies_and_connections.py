"""Request bodies and connections, through a real server on 127.0.0.1: the body size limit
whatever the framing, slow and idle clients cut off, the cap on connections, bodies that are
not JSON or cannot be read (each refused in its protocol's shape), empty questions, HEAD
/healthz, clients that leave before or during an answer, and an unhandled error as a JSON
500."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import openai
import pytest
from langchain_core.language_models import FakeListChatModel
from langchain_core.runnables import RunnableLambda

from app.http.factory import create_app
from callbacks.events import ErrorEvent
from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline
from tests.support.cli import cli
from tests.support.fake_pipeline import ABCA1, CDK5, make_pipeline
from tests.support.held_requests import answer_requests, model_server, raw_request, wait_for
from tests.support.keys import KEY, serve_with_key
from tests.support.logs import logs_asking
from tests.support.processes import rss_kb
from tests.support.servers import Served, serve, serve_command
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow  # `serve` subprocesses, slow, stalled and departing clients

QUESTION = "What does ABCA1 do in Tangier disease?"


# --- the body limit holds whatever the framing -----------------------------------------------


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


# --- slow clients are cut off; open connections are capped -----------------------------------


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


# --- empty and blank questions; content type; HEAD -------------------------------------------


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


# --- bodies that cannot be read are a 400 in each protocol's shape ---------------------------


NESTED = b"[" * 5_000 + b"]" * 5_000


LONG_NUMBER = b'{"messages": ' + b"1" * 5_000 + b"}"


@pytest.fixture(scope="module")
def keyed(sample_home: Path) -> Iterator[Served]:
    with serve_with_key(sample_home) as served:
        yield served


def _post(base: str, path: str, body: bytes, key: str | None = KEY) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.post(f"{base}{path}", content=body, headers=headers, timeout=30)


def _is_openai_error(response: httpx.Response) -> dict[str, object]:
    error: dict[str, object] = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    return error


def _is_our_error(response: httpx.Response) -> dict[str, object]:
    error: dict[str, object] = response.json()["error"]
    assert set(error) == {"code", "message"}, error
    return error


@pytest.mark.parametrize("body", [NESTED, LONG_NUMBER], ids=["nested", "long-number"])
def test_an_unreadable_body_is_a_400_in_each_protocols_shape(keyed: Served, body: bytes) -> None:
    openai_reply = _post(keyed.base, "/v1/chat/completions", body)
    assert openai_reply.status_code == 400
    assert _is_openai_error(openai_reply)["type"] == "invalid_request_error"
    for path in ("/api/chat", "/v1/answer", "/v1/answer/stream"):
        reply = _post(keyed.base, path, body)
        assert reply.status_code in (400, 422), (path, reply.text)
        assert _is_our_error(reply)["code"] == "bad_input"


def test_the_openai_routes_refuse_in_openais_shape(keyed: Served) -> None:
    question = json.dumps({"messages": [{"role": "user", "content": QUESTION}]}).encode()
    for refused in (
        _post(keyed.base, "/v1/chat/completions", question, key=None),
        _post(keyed.base, "/v1/chat/completions", question, key="wrong"),
        httpx.get(f"{keyed.base}/v1/models", timeout=30),
    ):
        assert refused.status_code == 401
        assert _is_openai_error(refused)["code"] == "unauthorized"
    too_large = _post(keyed.base, "/v1/chat/completions", b" " * 70_000)
    assert too_large.status_code == 413
    assert _is_openai_error(too_large)["code"] == "too_large"
    not_json = httpx.post(
        f"{keyed.base}/v1/chat/completions",
        content=question,
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "text/plain"},
        timeout=30,
    )
    assert not_json.status_code == 415
    assert _is_openai_error(not_json)["code"] == "bad_input"
    # The openai package reads it as what it is.
    client = openai.OpenAI(base_url=f"{keyed.base}/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as refused_by_sdk:
        client.models.list()
    assert refused_by_sdk.value.code == "unauthorized"
    # Our own routes keep our shape.
    assert _is_our_error(_post(keyed.base, "/v1/answer", question, key=None))


# --- clients that leave ----------------------------------------------------------------------


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


@pytest.mark.parametrize(
    ("path", "body_for"),
    [
        ("/v1/answer", lambda question: {"question": question}),
        (
            "/v1/chat/completions",
            lambda question: {"messages": [{"role": "user", "content": question}]},
        ),
    ],
)
def test_a_json_answer_is_cancelled_when_its_client_leaves(
    sample_home: Path, path: str, body_for: Callable[[str], dict[str, object]]
) -> None:
    question = f"What causes Tangier disease? (left {path})"
    with model_server("hang") as (fake, env):
        env["REACTOME_ANSWERS_MAX_CONCURRENT_ANSWERS"] = "1"
        with serve_command(sample_home, env=env) as served:
            body = json.dumps(body_for(question)).encode()
            with raw_request(served.base, path, body):
                wait_for(lambda: answer_requests(fake) == 1, "the answer reaching the model")
            # The client has gone: the answer ends as cancelled, and its log says so.
            wait_for(
                lambda: any(log.events and log.events[-1].type == "done"
                            for log in logs_asking(sample_home, question)),
                "the cancelled answer's done",
            )  # fmt: skip
            (log,) = logs_asking(sample_home, question)
            assert [e.data.code for e in log.events if isinstance(e, ErrorEvent)] == ["cancelled"]
            assert log.events[-1].data.state == "failed"  # type: ignore[union-attr]
            # Its slot is free again at once, not when the model would have timed out.
            fake.behaviour = "ok"
            again = httpx.post(f"{served.base}/v1/answer", json={"question": QUESTION}, timeout=60)
            assert again.status_code == 200, again.text
            metrics = httpx.get(f"{served.base}/metrics", timeout=30).text
            assert f'endpoint="{path}",state="failed",status="499"' in metrics


# --- an unhandled error is a 500 in our shape, and counted as one ----------------------------


def test_an_unhandled_error_is_a_json_500_and_counted_as_500(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken() -> object:
        raise RuntimeError("a bug")

    pipeline = AnswerPipeline(
        load_settings(event_logs=False),
        answer_model=FakeListChatModel(responses=["unused"]),
        expander_model=FakeListChatModel(responses=["{}"]),
        retriever=RunnableLambda(lambda _question: []),
    )
    monkeypatch.setattr(pipeline.operator, "store_client", broken)
    for base in serve(create_app(pipeline.settings, pipeline=pipeline)):
        reply = httpx.get(f"{base}/v1/collections", timeout=30)
        assert reply.status_code == 500
        assert _is_our_error(reply)["code"] == "internal"
        assert "a bug" not in reply.text
        metrics = httpx.get(f"{base}/metrics", timeout=30).text
        assert 'endpoint="/v1/collections",state="",status="500"} 1.0' in metrics
        assert 'status="0"' not in metrics
