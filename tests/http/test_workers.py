"""`serve --workers N`: worker processes on one port, each with its own models, logging into
one folder (real processes on 127.0.0.1)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.support.servers import serve_command

pytestmark = pytest.mark.slow  # `serve --workers 2` in a subprocess, answering for real

QUESTION = "What causes Tangier disease?"


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def test_two_workers_share_the_port_and_the_logs_folder(sample_home: Path) -> None:
    logs_before = set((sample_home / "logs").glob("*.jsonl"))
    with serve_command(sample_home, command=("serve", "--workers", "2", "--port")) as served:
        # The supervisor's children spawned to serve (not multiprocessing's helpers).
        workers = [
            pid
            for pid in _children(served.pid)
            if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
        ]
        assert len(workers) == 2, workers

        def ask(_: int) -> dict[str, str]:
            response = httpx.post(
                f"{served.base}/v1/answer/stream", json={"question": QUESTION}, timeout=120
            )
            assert response.status_code == 200
            return {"text": response.text}

        with ThreadPoolExecutor(max_workers=24) as pool:
            replies = list(pool.map(ask, range(48)))
        assert all('"state":"answered"' in reply["text"] for reply in replies)
    new_logs = set((sample_home / "logs").glob("*.jsonl")) - logs_before
    # One log per answer, none lost or clashing, written by both workers.
    assert len(new_logs) == 48
    processes = {json.loads(path.read_text().splitlines()[0])["process"] for path in new_logs}
    assert processes == set(workers)
    assert "Traceback" not in served.stderr
