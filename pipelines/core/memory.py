"""Handing memory back to the system after one-time work in a long-lived process."""

from __future__ import annotations

import ctypes
import functools

__all__ = ["give_back_freed_memory"]


@functools.cache
def _trim() -> ctypes._NamedFuncPointer | None:
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing kept back to give
        return None


def give_back_freed_memory() -> None:
    """Return to the system what glibc keeps of memory freed since: after a one-time load
    that builds and drops many small objects (a dictionary parsed, examples embedded), a
    server's resident memory otherwise keeps their size for good (decision 0037)."""
    trim = _trim()
    if trim is not None:
        trim(0)
