"""Which release and version of each collection answers now, for the event log's header."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["ReleaseCache"]

Releases = dict[str, dict[str, str]]


class ReleaseCache:
    """``read()`` at most every ``ttl_s`` seconds (an ingest may switch versions under a
    running server); empty when the store cannot say: a log header is never worth failing a
    request."""

    def __init__(self, read: Callable[[], Releases], ttl_s: float = 10.0) -> None:
        self._read = read
        self._ttl_s = ttl_s
        self._cached: tuple[float, Releases] | None = None

    def get(self) -> Releases:
        now = time.monotonic()
        if self._cached is not None and now - self._cached[0] < self._ttl_s:
            return self._cached[1]
        try:
            releases = self._read()
        except Exception:
            releases = {}
        self._cached = (now, releases)
        return releases
