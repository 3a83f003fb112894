"""What the command line does with input from outside, run as a user runs it: escape sequences
in a question, an answer or a log id are shown, never obeyed by the terminal; secrets pasted
into a question are neither logged nor echoed; ports out of range are a usage error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import cli
from tests.support.fake_pipeline import ABCA1, make_pipeline

pytestmark = pytest.mark.slow  # the installed command


# --- nothing from a request reaches the terminal as a control sequence -----------------------


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


# --- pasted secrets are redacted in what is logged and echoed --------------------------------


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


# --- ports outside 1-65535 are usage errors --------------------------------------------------


@pytest.mark.parametrize("port", ["70000", "0", "-1", "99999", "http"])
def test_ports_outside_the_range_are_a_usage_error(isolated_home: Path, port: str) -> None:
    served = cli(isolated_home, "serve", "--port", port)
    assert served.returncode == 2
    assert "give a number from 1 to 65535" in served.stderr
    replayed = cli(isolated_home, "replay", "any-log", "--serve", port)
    assert replayed.returncode == 2
    assert "give a number from 1 to 65535" in replayed.stderr
