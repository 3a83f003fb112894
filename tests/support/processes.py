"""What a running process holds, read from Linux's /proc: its resident memory."""

from __future__ import annotations

from pathlib import Path

__all__ = ["rss_kb"]


def rss_kb(pid: int) -> int:
    """The resident memory of process ``pid``, in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")
