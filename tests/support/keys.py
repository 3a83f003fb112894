"""API keys for tests of a server that asks for one: the keys, the header that carries one,
and `serve` over a home that takes one key."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.servers import Served, serve_command

__all__ = ["KEY", "KEYS", "bearer", "serve_with_key"]

KEY = "only-key-5c81e0"
KEYS = ["first-key-7f3a9c", "second-key-41be02"]


def bearer(key: str) -> dict[str, str]:
    """The header that sends ``key``."""
    return {"Authorization": f"Bearer {key}"}


@contextmanager
def serve_with_key(home: Path) -> Iterator[Served]:
    """`serve` over ``home`` taking only :data:`KEY`, with wrong keys never slowed (the tests
    that use it send them on purpose; slowing them is tested on its own). Once it has
    stopped, its output must hold no traceback."""
    env = {"REACTOME_ANSWERS_API_KEYS": KEY, "REACTOME_ANSWERS_AUTH_FAILURES_PER_MINUTE": "1000"}
    with serve_command(home, env=env) as served:
        yield served
    assert "Traceback" not in served.stderr
    assert "RecursionError" not in served.stderr
