"""The installed ``reactome-answers`` command, run as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from callbacks.events import event_json_schema
from tests.support.cli import cli
from tests.support.fake_openai import fake_chat

pytestmark = pytest.mark.slow  # the installed command in a subprocess, per test

SCRIPT = Path(sys.executable).parent / "reactome-answers"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    assert SCRIPT.exists(), f"{SCRIPT} missing: install the project with 'make test'"
    return subprocess.run(
        [str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_help_explains_commands_and_settings() -> None:
    result = run("--help")
    assert result.returncode == 0
    for expected in ("schema", "config", "--home", "REACTOME_ANSWERS_HOME", "CHROMA_HOST"):
        assert expected in result.stdout


def test_version() -> None:
    result = run("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("reactome-answers 0.")


def test_schema_prints_the_event_schema() -> None:
    result = run("schema")
    assert result.returncode == 0
    printed = json.loads(result.stdout)
    assert printed == event_json_schema()
    jsonschema.Draft202012Validator.check_schema(printed)


def test_config_reflects_environment_and_options(isolated_home: Path, tmp_path: Path) -> None:
    shown = json.loads(run("config", env={"REACTOME_ANSWERS_LLM": "llamacpp"}).stdout)
    assert shown["home"] == str(isolated_home)
    assert shown["llm"] == "llamacpp"

    other = tmp_path / "other-home"
    before = json.loads(run("--home", str(other), "config", "--llm", "openai:m").stdout)
    assert (before["home"], before["llm"]) == (str(other), "openai:m")
    # An option given before the command survives the command's own (unset) copy of it.
    after = json.loads(run("--cite-urls", "config").stdout)
    assert after["cite_urls"] is True


def test_bad_setting_is_one_line_and_non_zero() -> None:
    result = run("config", env={"REACTOME_ANSWERS_LLM": "gpt-4"})
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("reactome-answers: error: ")
    assert "REACTOME_ANSWERS_LLM" in lines[0]


def test_unknown_command_is_a_usage_error() -> None:
    result = run("frobnicate")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


def test_missing_command_is_a_usage_error() -> None:
    result = run()
    assert result.returncode == 2
    assert "COMMAND" in result.stderr


def test_output_to_a_closed_pipe_or_full_disk_is_not_a_traceback() -> None:
    # `true` exits without reading, long before our process has imported enough to write.
    piped = subprocess.run(
        ["bash", "-c", f"'{SCRIPT}' schema | true; echo ${{PIPESTATUS[0]}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert piped.stdout.strip() == "1"
    assert piped.stderr == ""
    if Path("/dev/full").exists():
        with Path("/dev/full").open("w") as full:
            result = subprocess.run(
                [str(SCRIPT), "schema"], stdout=full, stderr=subprocess.PIPE, text=True, check=False
            )
        assert result.returncode == 1
        assert result.stderr.strip() == (
            "reactome-answers: error: cannot write the output (No space left on device)"
        )


def test_a_history_file_json_cannot_hold_is_a_one_line_error(tmp_path: Path) -> None:
    # JSON that parses nowhere sensible: nested past any parser's depth, or an integer too
    # long for Python to read; a file that never ends; bytes that are not UTF-8.
    files: dict[str, tuple[bytes, str]] = {
        "nested.json": (b"[" * 100_000, "nested too deeply"),
        "number.json": (b'[{"role": "user", "content": "x", "n": ' + b"9" * 5000 + b"}]", "4,300"),
        "latin1.json": (b'[{"role": "user", "content": "caf\xe9"}]', "not UTF-8"),
    }
    cases = [(Path("/dev/zero"), "over 8,388,608 bytes")] if Path("/dev/zero").exists() else []
    for name, (content, says) in files.items():
        path = tmp_path / name
        path.write_bytes(content)
        cases.append((path, says))
    for path, says in cases:
        result = run("--home", str(tmp_path / "home"), "ask", "--history", str(path), "Hi?")
        assert result.returncode == 1, result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith(f"reactome-answers: error: --history {path}: "), line
        assert says in line
        assert result.stdout == ""


QUESTION = "What causes Tangier disease?"


def sources_section(stdout: str) -> dict[int, list[str]]:
    """The lines under each ``[n]`` entry of the printed Sources list."""
    entries: dict[int, list[str]] = {}
    current: list[str] = []
    for line in stdout.split("\nSources:\n", 1)[1].splitlines():
        if line.startswith("["):
            current = entries.setdefault(int(line[1 : line.index("]")]), [])
        elif line.startswith("    "):
            current.append(line)
    return entries


def expected_lines(result: dict[str, Any]) -> dict[int, list[str]]:
    """What ``--evidence`` should print under each reference of the ``--json`` result."""
    lines: dict[int, list[str]] = {reference["n"]: [] for reference in result["references"]}
    for item in result["evidence"]:
        quote = f'"{" ".join(item["quote"].split())}"'
        if not item["supported"]:
            start, end = item["sentence"]
            sentence = " ".join(result["text"][start:end].split())
            lines[item["n"]] += [f"    unsupported: {quote}", f'      does not back: "{sentence}"']
        elif f"    {quote}" not in lines[item["n"]]:
            lines[item["n"]].append(f"    {quote}")
    return lines


def test_help_explains_evidence() -> None:
    shown = " ".join(run("ask", "--help").stdout.split())
    assert "--evidence" in shown
    assert "quotes" in shown
    assert "'unsupported:'" in shown


def test_ask_evidence_prints_the_quotes_under_each_source(sample_home: Path) -> None:
    result = json.loads(cli(sample_home, "ask", "--json", QUESTION).stdout)
    assert result["evidence"], "the --json result carries the evidence already"
    printed = cli(sample_home, "ask", "--evidence", QUESTION)
    assert printed.returncode == 0, printed.stderr
    shown = sources_section(printed.stdout)
    assert shown == expected_lines(result)
    assert all(shown.values()), "every source backs a sentence of the extractive answer"
    assert "unsupported:" not in printed.stdout
    # Without the option, the Sources list is as it was.
    assert not any(sources_section(cli(sample_home, "ask", QUESTION).stdout).values())

    unchecked = cli(
        sample_home, "ask", "--evidence", QUESTION, env={"REACTOME_ANSWERS_EVIDENCE": "off"}
    )
    assert not any(sources_section(unchecked.stdout).values())
    assert "the evidence check is off" in unchecked.stdout


def test_ask_evidence_marks_a_citation_its_source_does_not_back(sample_home: Path) -> None:
    with fake_chat("miscite") as fake:
        env = {"OPENAI_BASE_URL": fake.url, "OPENAI_API_KEY": "sk-test"}
        model = ("--llm", "openai:fake-model")
        result = json.loads(cli(sample_home, "ask", *model, "--json", QUESTION, env=env).stdout)
        printed = cli(sample_home, "ask", *model, "--evidence", QUESTION, env=env)
    assert printed.returncode == 0, printed.stderr
    assert {item["supported"] for item in result["evidence"]} == {True, False}
    assert sources_section(printed.stdout) == expected_lines(result)
