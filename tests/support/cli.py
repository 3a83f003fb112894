"""The installed ``reactome-answers`` command, run as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["cli"]


def cli(
    home: Path,
    *args: str,
    env: dict[str, str] | None = None,
    timeout_s: float = 120,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """`reactome-answers --home HOME ARGS...` in a subprocess, without the test's own home;
    ``env`` adds environment variables, ``stdin`` is what it reads (else nothing)."""
    inherited = {k: v for k, v in os.environ.items() if k != "REACTOME_ANSWERS_HOME"}
    script = Path(sys.executable).parent / "reactome-answers"
    return subprocess.run(
        [str(script), "--home", str(home), *args],
        capture_output=True, text=True, timeout=timeout_s, check=False,
        input=stdin if stdin is not None else "",
        env=inherited | (env or {}),
    )  # fmt: skip
