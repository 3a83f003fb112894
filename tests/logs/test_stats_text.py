"""`logs stats` as people read it (issue 37, 6): no Python values (None, dicts, lists), the
right singular or plural, first-token percentiles per state, and which answers each count
of references covers; --json keeps its keys. And the host a log's header names beside its
process, read back from new logs and old ones alike."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest

from app.cli import main as cli_main
from callbacks.feedback import write_feedback
from tests.support.fake_pipeline import ABCA1, CDK5, make_pipeline

# What --json gave before the text was rewritten: the text changed, these did not.
SUMMARY_KEYS = {
    "logs", "unreadable", "states", "gate", "first_token_ms", "first_token_ms_by_state",
    "by_citations", "refusals", "feedback", "references_per_answer", "evidence", "held_back",
}  # fmt: skip
ONE_LOG_KEYS = {
    "request_id", "question", "created_at", "state", "first_token_ms", "total_ms",
    "token_events", "answer_tokens", "citations_early", "citations_final",
    "last_citation_seq", "first_token_seq", "errors", "refusal_rule", "live_citations",
    "references_streamed", "held_back_chars", "held_back_ms", "evidence_items",
    "evidence_unsupported", "feedback",
}  # fmt: skip
# What Python prints for its own values, which a person should never have to read.
PYTHON_VALUES = re.compile(r"\bNone\b|\bTrue\b|\bFalse\b|\{'|\[\]|\['")


@pytest.fixture
def recorded(isolated_home: Path) -> Path:
    """One answer with two references, one live-numbered answer, a nothing-found and a rule
    refusal: four states and reference counts of 0 and 2, in one home."""
    answered, _, _ = make_pipeline([ABCA1, CDK5], "CDK5 [2] first, ABCA1 [1].")
    list(answered.stream("What does CDK5 do?", request_id="req-1"))
    list(answered.stream("And ABCA1?", request_id="req-live", live_citations=True))
    empty, _, _ = make_pipeline([], "unused")
    list(empty.stream("What is XYZ?", request_id="req-nothing"))
    list(answered.stream("x" * 3000, request_id="req-refused"))
    (log,) = (isolated_home / "logs").glob("*-req-1.jsonl")
    write_feedback(log, "req-1", "up", "clear and cited")
    return isolated_home


def _stats(home: Path, capsys: pytest.CaptureFixture[str], *arguments: str) -> str:
    assert cli_main(["--home", str(home), "logs", "stats", *arguments]) == 0
    return capsys.readouterr().out


def test_the_summary_reads_as_sentences(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _stats(recorded, capsys)
    assert not PYTHON_VALUES.search(out), out
    lines = out.splitlines()
    assert lines[0] == "4 logs (0 unreadable)"
    assert "states: answered 2, nothing_found 1, refused 1" in lines
    assert "citations before the first token: 2 of 2 answers with both" in lines
    # Per state, as docs/operations.md lists them: a state that streamed nothing says so.
    answered = next(line for line in lines if line.startswith("  answered (2 answers): "))
    assert re.fullmatch(r"  answered \(2 answers\): p50 [\d.,]+ ms, p90 [\d.,]+ ms, p99 [\d.,]+ ms",
                        answered)  # fmt: skip
    assert "  nothing_found (1 answer): no first token" in lines
    assert "  refused (1 answer): no first token" in lines
    # The rows by references count answers in every state, and say so; the references per
    # answer count answered ones only, and say so too.
    assert "first token by references (answers in every state):" in lines
    assert "  0 references: 2 answers, no first token" in lines
    assert any(line.startswith("  2 references: 2 answers, first token p50 ") for line in lines)
    assert "references per answered answer: 2 answers with 2 references" in lines
    assert "refusals by rule: too_long 1" in lines
    assert "feedback: 1 up, 0 down" in lines
    assert any(line.startswith("held back with live numbering (1 answer): ") for line in lines)


def test_one_answer_and_one_reference_are_singular(
    isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 exports cholesterol [1].")
    list(pipeline.stream("What does ABCA1 do?", request_id="req-one"))
    out = _stats(isolated_home, capsys)
    assert out.splitlines()[0] == "1 log (0 unreadable)"
    assert "citations before the first token: 1 of 1 answer with both" in out
    assert "  answered (1 answer): p50 " in out
    assert "  1 reference: 1 answer, first token p50 " in out
    assert "references per answered answer: 1 answer with 1 reference" in out
    assert not re.search(r"\b1 (answers|logs|references|citations)\b", out), out


def test_no_logs_at_all_reads_as_none(
    isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _stats(isolated_home, capsys)
    assert not PYTHON_VALUES.search(out), out
    assert "0 logs (0 unreadable)" in out
    assert "states: none" in out
    assert "first token: none was streamed" in out
    assert "references per answered answer: no answered answer" in out


def test_one_log_reads_as_labelled_lines(
    recorded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for request_id in ("req-1", "req-live", "req-nothing", "req-refused"):
        out = _stats(recorded, capsys, request_id)
        assert not PYTHON_VALUES.search(out), (request_id, out)
    answered = _stats(recorded, capsys, "req-1")
    assert re.search(r"^first token: +[\d.,]+ ms, event 4$", answered, re.MULTILINE)
    assert re.search(r"^citations: +2 citations sent, the last as event 3; 2 references in "
                     r"the answer$", answered, re.MULTILINE)  # fmt: skip
    assert re.search(r"^citation gate: +held", answered, re.MULTILINE)
    assert re.search(r"^feedback: +up \"clear and cited\" \(\d{4}-", answered, re.MULTILINE)
    assert re.search(r"^errors: +none$", answered, re.MULTILINE)
    refused = _stats(recorded, capsys, "req-refused")
    assert re.search(r"^refused by: +too_long$", refused, re.MULTILINE)
    assert re.search(r"^first token: +none: no answer text was streamed$", refused, re.MULTILINE)
    assert re.search(r"^feedback: +none$", refused, re.MULTILINE)
    live = _stats(recorded, capsys, "req-live")
    assert re.search(r"^live numbering: +2 reference events, text held back at most ",
                     live, re.MULTILINE)  # fmt: skip


def test_json_keeps_its_keys(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary: dict[str, Any] = json.loads(_stats(recorded, capsys, "--json"))
    assert set(summary) == SUMMARY_KEYS
    assert summary["references_per_answer"] == {"2": 2}  # answered answers only, as documented
    assert summary["by_citations"]["0"]["answers"] == 2  # every state: the refusal included
    one: dict[str, Any] = json.loads(_stats(recorded, capsys, "req-1", "--json"))
    assert set(one) == ONE_LOG_KEYS
    assert one["feedback"]["rating"] == "up"


def test_the_header_names_the_host_beside_the_process(
    recorded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (log,) = (recorded / "logs").glob("*-req-1.jsonl")
    header = json.loads(log.read_text(encoding="utf-8").splitlines()[0])
    assert header["host"] == socket.gethostname()
    keys = list(header)
    assert keys.index("host") + 1 == keys.index("process")
    out = _stats(recorded, capsys, "req-1")
    assert re.search(
        rf"^answered by: +{re.escape(socket.gethostname())}, process {header['process']}$",
        out,
        re.MULTILINE,
    )


def test_an_old_header_without_a_host_still_reads(
    recorded: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (log,) = (recorded / "logs").glob("*-req-1.jsonl")
    lines = log.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    del header["host"]
    old = tmp_path / "written-before-hosts.jsonl"
    old.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    out = _stats(recorded, capsys, str(old))
    assert re.search(rf"^answered by: +process {header['process']}$", out, re.MULTILINE)
    assert cli_main(["--home", str(recorded), "replay", "--check", str(old)]) == 0
    assert "replayed identically" in capsys.readouterr().out
