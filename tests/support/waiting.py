"""Waiting for a condition, not for a time: a loaded machine only makes the wait longer."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["wait_until"]

T = TypeVar("T")


def wait_until(
    check: Callable[[], T | None],
    *,
    timeout_s: float = 120,
    every_s: float = 0.2,
    what: str = "the condition",
    state: Callable[[], object] | None = None,
) -> T:
    """Call ``check`` until it returns something true, and return that; fail after
    ``timeout_s`` (a generous bound, hit only when the condition never comes), naming
    ``what`` was waited for and, when given, the last ``state()`` seen."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            seen = f"; last seen: {state()!r}" if state is not None else ""
            raise AssertionError(f"{what} did not happen within {timeout_s:.0f} s{seen}")
        time.sleep(every_s)
