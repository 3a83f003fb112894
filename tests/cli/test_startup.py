"""The command line starts at once: reading its arguments, ``--help`` and the commands that
only read logs load none of the heavy libraries the answering commands need.

Each command runs in a fresh interpreter (so nothing the test suite imported counts), through
the command line's ``main`` as the installed command calls it, and then reports which of
those libraries ended up in ``sys.modules``. How long it takes is measured by
``python -m tests.benchmarks.bench_startup``, not here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from callbacks.log_header import LogHeader
from tests.support.logs import refused_log

# The command line in subprocesses, as the slow marker's definition says.
pytestmark = pytest.mark.slow

# The libraries an answer needs and a look at the logs does not.
HEAVY = ("chromadb", "onnxruntime", "langchain", "langchain_core", "fastapi", "uvicorn", "mcp")

_REPORT = """
import contextlib, io, json, sys
from app.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exit:
        code = exit.code
heavy = sorted({name.split(".")[0] for name in sys.modules} & set(json.loads(HEAVY)))
print(json.dumps({"code": code, "heavy": heavy, "output": out.getvalue()}))
"""


def _loaded(home: Path, *argv: str) -> dict[str, Any]:
    """Run the command line on ``argv`` in a fresh interpreter: its exit code, its output
    and the heavy libraries it loaded."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REACTOME_ANSWERS_")}
    completed = subprocess.run(
        [sys.executable, "-c", _REPORT.replace("HEAVY", repr(json.dumps(HEAVY))), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=env | {"REACTOME_ANSWERS_HOME": str(home)},
    )
    report: dict[str, Any] = json.loads(completed.stdout.splitlines()[-1])
    return report


@pytest.fixture
def logged_home(tmp_path: Path) -> tuple[Path, str]:
    """A home holding one refused answer's log, written as a request writes it."""
    request_id = "startup-1"
    question = "Should I double my statin dose?"
    refused_log(tmp_path / "logs", LogHeader(request_id=request_id, question=question))
    return tmp_path, request_id


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["logs", "--help"],
        ["ask", "--help"],
        ["logs", "list"],
        ["logs", "list", "--json"],
        ["logs", "show", "REQUEST"],
        ["logs", "stats"],
        ["logs", "stats", "REQUEST", "--json"],
    ],
)
def test_reading_logs_and_help_load_no_heavy_library(
    logged_home: tuple[Path, str], argv: list[str]
) -> None:
    home, request_id = logged_home
    report = _loaded(home, *[request_id if arg == "REQUEST" else arg for arg in argv])
    assert report["code"] == 0, report
    assert report["heavy"] == [], f"{' '.join(argv)} loaded {report['heavy']}"
    # The command did its work: the log was read, not skipped.
    if argv[0] == "logs" and argv[1] != "--help":
        assert "refused" in str(report["output"])


def test_an_answering_command_still_loads_what_it_needs(logged_home: tuple[Path, str]) -> None:
    """The check above can fail: a command that answers imports the pipeline."""
    home, _ = logged_home
    report = _loaded(home, "ask", "What does ABCA1 do?")
    assert "langchain_core" in report["heavy"]
    assert "chromadb" in report["heavy"]
