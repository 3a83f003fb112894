"""Waiting for a condition, not for a time: a loaded machine only makes the wait longer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["only_this_task_left", "wait_until"]

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


async def only_this_task_left(bound_s: float = 60.0) -> None:
    """Until no task but the caller's is left on the running loop (an answer's work has
    emitted all it will), within a generous bound."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bound_s
    while len(asyncio.all_tasks()) > 1:
        assert loop.time() < deadline, "the other tasks did not end"
        await asyncio.sleep(0.01)
