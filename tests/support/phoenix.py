"""A real Arize Phoenix on 127.0.0.1 (SQLite in a temporary folder), and its own client.

Phoenix runs from a virtual environment of its own (``make install-phoenix``): its
dependencies are not ours, and its client's import (seconds) and pytest plugin stay out of
the test process. Spans are read back by ``phoenix.client.Client`` run in that environment,
which prints them as JSON. Phoenix binds its OTLP/gRPC port on every interface, which it
offers no setting for; nothing is sent to it.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.servers import free_port, wait_until_serving

__all__ = ["PHOENIX_VENV", "phoenix_server", "phoenix_spans"]


def _installed() -> Path:
    """The environment ``make install-phoenix`` made (the Makefile names it in
    ``REACTOME_TEST_PHOENIX_VENV``; run alone, pytest takes the newest one made)."""
    named = os.environ.get("REACTOME_TEST_PHOENIX_VENV")
    if named:
        return Path(named)
    made = sorted((Path.home() / ".cache" / "reactome-answers").glob("phoenix-venv-*"))
    return made[-1] if made else Path.home() / ".cache" / "reactome-answers" / "phoenix-venv-"


PHOENIX_VENV = _installed()

_READ = """
import json, sys
from phoenix.client import Client
spans = Client(base_url=sys.argv[1]).spans.get_spans(
    project_identifier="default", trace_ids=sys.argv[2:], limit=10000, timeout=60
)
print(json.dumps(spans, default=str))
"""


def _program(name: str) -> Path:
    program = PHOENIX_VENV / "bin" / name
    if not program.exists():
        raise AssertionError(
            f"no Phoenix at {program}: run 'make install-phoenix' (or set "
            "REACTOME_TEST_PHOENIX_VENV to a virtual environment with arize-phoenix)"
        )
    return program


@contextmanager
def phoenix_server() -> Iterator[str]:
    """Phoenix serving on 127.0.0.1; yields its base URL (OTLP/HTTP at ``/v1/traces``)."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="phoenix-") as folder:
        env = {
            **os.environ,
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(port),
            "PHOENIX_GRPC_PORT": str(free_port()),
            "PHOENIX_WORKING_DIR": folder,
        }
        log = Path(folder) / "phoenix.log"
        with log.open("wb") as output:
            process = subprocess.Popen(
                [str(_program("phoenix")), "serve"], env=env, stdout=output, stderr=output
            )
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until_serving(f"{base}/healthz", lambda: process.poll() is None, 180)
            yield base
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)


def phoenix_spans(base: str, trace_ids: list[str]) -> list[dict[str, Any]]:
    """The spans of ``trace_ids`` as Phoenix's own client returns them."""
    found = subprocess.run(
        [str(_program("python")), "-c", _READ, base, *trace_ids],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    spans: list[dict[str, Any]] = json.loads(found.stdout.strip().splitlines()[-1])
    return spans
