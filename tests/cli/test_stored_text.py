"""Whatever text a request or a log holds, every command shows it and exits cleanly.

A client can send a lone surrogate (the JSON escape ``\\ud800``); an older version wrote it
into the log's header as that escape, and from then on ``logs list`` ended in a
``UnicodeEncodeError`` for every operator. Logs now hold U+FFFD; logs from before, or altered
by hand (lone surrogate escapes, raw control characters, bytes that are not UTF-8), are read
and shown, also on a terminal that takes only ASCII.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from pipelines.core.tokens import count_tokens
from tests.support.cli import cli
from tests.support.servers import serve_command

pytestmark = pytest.mark.slow  # the installed command and `serve` over odd text, each encoding

QUESTION = "What causes \ufffd Tangier disease?"
ASCII = {"PYTHONIOENCODING": "ascii"}


def _clean(result: subprocess.CompletedProcess[str], code: int = 0) -> str:
    """The command's stdout, once it exited with ``code`` and no traceback."""
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == code, result.stderr
    return result.stdout


def test_a_lone_surrogate_sent_to_the_chat_adapter_is_logged_as_u_fffd(sample_home: Path) -> None:
    # Exactly the reported request: the escape as the client wrote it, never decoded here.
    body = (
        '{"model":"reactome-answers","messages":[{"role":"user",'
        '"content":"What causes \\ud800 Tangier disease?"}]}'
    )
    with serve_command(sample_home) as served:
        response = httpx.post(
            f"{served.base}/v1/chat/completions",
            content=body.encode(),
            headers={"content-type": "application/json"},
            timeout=60,
        )
    assert response.status_code == 200, response.text
    request_id = response.json()["id"].removeprefix("chatcmpl-")
    (log,) = (sample_home / "logs").glob(f"*-{request_id}.jsonl")
    text = log.read_bytes().decode("utf-8")  # strict: every byte is UTF-8
    assert "\\ud800" not in text
    header = json.loads(text.splitlines()[0])
    assert header["question"] == QUESTION

    listed = _clean(cli(sample_home, "logs", "list"))
    (line,) = [line for line in listed.splitlines() if request_id in line]
    assert QUESTION in line
    assert json.loads(_clean(cli(sample_home, "logs", "show", request_id)).splitlines()[0])
    stats = _clean(cli(sample_home, "logs", "stats", request_id)).splitlines()
    assert [line.split(":", 1)[1].strip() for line in stats if line.startswith("question:")] == [
        QUESTION
    ]
    assert "replayed identically" in _clean(cli(sample_home, "replay", request_id, "--check"))


# --- a log written before the fix, or altered by hand ------------------------------------------

RID = "old-style"
NAME = f"20200101T000000000000-{RID}.jsonl"
# Bytes that are not UTF-8 and a raw ESC, inside strings, as no version of ours writes them.
BAD_BYTES = b"\xff\xfe\x80"
ESC = b"\x1b[2J"


def _line(record: dict[str, Any]) -> bytes:
    # ensure_ascii: the lone surrogate goes in as the escape "\ud800", as the old version wrote.
    return json.dumps({"schema": 1, **record} if record["kind"] == "header" else record).encode()


def _old_style_log() -> bytes:
    question = "What causes \ud800 Tangier disease?"
    options = {"llm": "extractive", "cite_urls": False, "live_citations": True}
    answer = "Refused BAD and ESC."
    event = {"request_id": RID}
    lines = [
        _line({"kind": "header", "request_id": RID, "question": question,
               "history": [{"role": "user", "content": "earlier BAD ESC"}],
               "collections": ["auto"], "options": options}),
        _line({"kind": "callback", "hook": "start", "question": question,
               "collections": ["auto"], "options": options}),
        _line({"kind": "event", "event": {**event, "seq": 1, "type": "start", "t_ms": 0.1,
               "data": {"question": question, "collections": ["auto"], "options": options}}}),
        _line({"kind": "callback", "hook": "custom_event", "name": "reactome-answers:expansion",
               "run_id": "456b63ea-d257-402b-9671-a1447c8ca84a",
               "data": {"queries": ["Tangier \udcff BAD"]}}),
        _line({"kind": "callback", "hook": "finish", "state": "refused", "text": answer}),
        _line({"kind": "event", "event": {**event, "seq": 2, "type": "done", "t_ms": 2.0,
               "data": {"state": "refused", "text": answer, "references": [],
                        "timings": {"total_ms": 2.0}, "usage": {"answer_tokens": "TOKENS"}}}}),
    ]  # fmt: skip
    raw = b"\n".join(lines) + b"\n"
    raw = raw.replace(b"BAD", BAD_BYTES).replace(b"ESC", ESC)
    # The answer's token count as the handler counts it, so the log replays identically.
    read = raw.decode(errors="replace").replace("\x1b", "\\u001b")
    (finish,) = [json.loads(line) for line in read.splitlines() if '"finish"' in line]
    return raw.replace(b'"TOKENS"', str(count_tokens(finish["text"])).encode())


@pytest.fixture
def old_log(isolated_home: Path) -> Path:
    """The log in the home's folder (the home's teardown replays it too)."""
    path = isolated_home / "logs" / NAME
    path.parent.mkdir(parents=True)
    path.write_bytes(_old_style_log())
    return path


COMMANDS = {
    "logs list": ["logs", "list"],
    "logs list --json": ["logs", "list", "--json"],
    "logs show": ["logs", "show", RID],
    "logs stats": ["logs", "stats", RID],
    "logs stats --json": ["logs", "stats", RID, "--json"],
    "logs prune": ["logs", "prune", "--keep", "1", "--dry-run"],
    "replay": ["replay", RID, "--instant"],
    "replay --jsonl": ["replay", RID, "--jsonl", "--instant"],
    "replay --check": ["replay", RID, "--check"],
}


@pytest.mark.parametrize("env", [{}, ASCII], ids=["utf-8", "ascii"])
@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.usefixtures("old_log")
def test_every_logs_command_shows_an_old_style_log(
    isolated_home: Path, command: str, env: dict[str, str]
) -> None:
    out = _clean(cli(isolated_home, *COMMANDS[command], env=env))
    if command != "logs prune":
        assert out.strip()
    if env:  # what an ASCII terminal cannot show comes as escapes, never as an error
        out.encode("ascii")
    if command.endswith(("--json", "show", "--jsonl")):  # and JSON stays JSON
        documents = [out] if command.endswith("--json") else out.splitlines()
        parsed = [json.loads(document) for document in documents]
        assert QUESTION in json.dumps(parsed, ensure_ascii=False)
    elif command in ("logs list", "logs stats"):
        assert (QUESTION.replace("\ufffd", "\\ufffd") if env else QUESTION) in out
    if command == "replay":
        # The history's bytes read as U+FFFD; its ESC is shown, not obeyed.
        earlier = "earlier " + "\ufffd" * len(BAD_BYTES) + " \\u001b[2J"
        assert (earlier.replace("\ufffd", "\\ufffd") if env else earlier) in out
        assert "[searched for] Tangier" in out


@pytest.mark.usefixtures("old_log")
def test_the_replay_server_serves_an_old_style_log(isolated_home: Path) -> None:
    command = ("replay", RID, "--instant", "--serve")
    with serve_command(isolated_home, command=command) as served:
        stream = httpx.get(f"{served.base}/v1/answer/stream", timeout=60)
    assert stream.status_code == 200
    frames = [line for line in stream.text.splitlines() if line.startswith("data: ")]
    start, done = (json.loads(frame.removeprefix("data: ")) for frame in frames)
    assert start["data"]["question"] == QUESTION
    assert done["data"]["state"] == "refused"
    assert "Traceback" not in served.stderr


# --- what a user types: arguments and standard input ------------------------------------------


def _run_bytes(home: Path, *args: str, stdin: bytes, env: dict[str, str]) -> tuple[int, str]:
    """The command fed raw bytes (``cli`` feeds text); its exit code and standard error."""
    script = Path(sys.executable).parent / "reactome-answers"
    inherited = {k: v for k, v in os.environ.items() if k != "REACTOME_ANSWERS_HOME"}
    result = subprocess.run(
        [str(script), "--home", str(home), *args],
        input=stdin, capture_output=True, timeout=120, check=False, env=inherited | env,
    )  # fmt: skip
    return result.returncode, result.stderr.decode(errors="replace")


@pytest.mark.parametrize("env", [{}, ASCII], ids=["utf-8", "ascii"])
def test_ask_chat_and_collections_survive_odd_text(sample_home: Path, env: dict[str, str]) -> None:
    # An argument with a byte that is not UTF-8 reaches Python as a lone surrogate.
    refused = cli(sample_home, "ask", "What causes \udcff Tangier disease?", env=env)
    assert _clean(refused, code=1).strip()  # refused (a control character), and says so
    answered = _clean(cli(sample_home, "ask", "What causes Tangier disease?", env=env))
    assert "Sources:" in answered
    assert _clean(cli(sample_home, "collections", env=env)).strip()
    code, stderr = _run_bytes(
        sample_home, "chat", stdin=b"What causes \xff Tangier disease?\nWhat is ABCA1?\n", env=env
    )
    assert "Traceback" not in stderr
    assert code == 0, stderr
