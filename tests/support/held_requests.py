"""Answers held in progress and requests on a socket of their own: a fake model server that
can hang, how many answers reached it, a POST whose body can be stalled or whose client can
leave, and a short poll for what must follow."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tests.support.fake_openai import FakeChat, fake_chat, serving_env
from tests.support.waiting import wait_until

__all__ = ["answer_requests", "model_server", "raw_request", "wait_for"]


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    """Poll ``condition`` every 50 ms until it holds; fail after ``timeout_s``, naming
    ``what`` was waited for."""
    wait_until(condition, timeout_s=timeout_s, every_s=0.05, what=what)


def raw_request(base: str, path: str, body: bytes, *, send_body: bool = True) -> socket.socket:
    """A POST sent over a socket of its own, so that a test can stall its body or leave."""
    host, port = base.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=60)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    sock.sendall(head + (body if send_body else b""))
    return sock


@contextmanager
def model_server(behaviour: str = "ok") -> Iterator[tuple[FakeChat, dict[str, str]]]:
    """The fake OpenAI-compatible model server doing ``behaviour``, and the environment that
    points `serve` at it."""
    with fake_chat() as fake:
        fake.behaviour = behaviour  # type: ignore[assignment]
        env = serving_env(fake)
        yield fake, env


def answer_requests(fake: FakeChat) -> int:
    """How many answer (not expander) requests the fake model has received."""
    return sum("prepare searches" not in json.dumps(r["messages"][0]) for r in fake.requests)
