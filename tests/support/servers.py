"""Real servers on 127.0.0.1 for tests: uvicorn in a thread, or the `serve` command."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def serve(app: Any) -> Iterator[str]:
    """Run ``app`` under uvicorn in a thread; yields its base url, stops it afterwards."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def wait_until_serving(url: str, alive: Callable[[], bool], timeout_s: float = 90) -> None:
    """Poll ``url`` until it answers; fail if the server dies or takes too long."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.TransportError:
            if not alive():
                raise RuntimeError(f"the server for {url} exited before answering") from None
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not answer within {timeout_s:.0f} s") from None
            time.sleep(0.2)


@dataclass
class Served:
    base: str
    pid: int = 0
    stderr: str = ""  # what the command wrote, filled in when it has stopped


@contextmanager
def serve_command(
    home: Path,
    *extra: str,
    command: Sequence[str] = ("serve", "--port"),
    env: dict[str, str] | None = None,
) -> Iterator[Served]:
    """`reactome-answers --home HOME [EXTRA] serve --port N` as its own process, once it
    answers; ``command`` replaces ``serve --port`` (the port is appended to it); ``env`` adds
    environment variables."""
    port = free_port()
    argv = [str(Path(sys.executable).parent / "reactome-answers"), "--home", str(home),
            *extra, *command, str(port)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "REACTOME_ANSWERS_HOME"} | (env or {})
    # A file, not a pipe: uvicorn logs every request there, and a full pipe would stall it.
    with tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        served = Served(f"http://127.0.0.1:{port}", process.pid)
        try:
            wait_until_serving(f"{served.base}/", lambda: process.poll() is None)
            yield served
        finally:
            process.terminate()
            process.wait(timeout=30)
            stderr.seek(0)
            served.stderr = stderr.read().decode(errors="replace")


def start_chroma(folder: Path) -> tuple[subprocess.Popen[bytes], int]:
    """`chroma run` on 127.0.0.1 over ``folder``, once it answers; the caller stops it."""
    port = free_port()
    chroma = subprocess.Popen(
        [str(Path(sys.executable).parent / "chroma"), "run", "--path", str(folder),
         "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    wait_until_serving(f"http://127.0.0.1:{port}/api/v2/heartbeat", lambda: chroma.poll() is None)
    return chroma, port


@contextmanager
def chroma_server(folder: Path) -> Iterator[int]:
    """A Chroma server over ``folder`` for the block; yields its port."""
    chroma, port = start_chroma(folder)
    try:
        yield port
    finally:
        chroma.kill()
        chroma.wait(timeout=30)


@dataclass
class RedisServer:
    """Debian's ``redis-server`` on 127.0.0.1, without persistence, asking for ``password``
    if given; :meth:`stop` and :meth:`start` again keep its port (an outage and a recovery)."""

    port: int
    password: str | None = None
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        secret = f":{self.password}@" if self.password else ""
        return f"redis://{secret}127.0.0.1:{self.port}/0"

    def start(self) -> None:
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no"]  # fmt: skip
        if self.password:
            argv += ["--requirepass", self.password]
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        hello = (f"AUTH {self.password}\r\n" if self.password else "") + "PING\r\n"
        deadline = time.monotonic() + 30
        while not self._answers(hello.encode()):
            problem = None
            if self.process.poll() is not None:
                problem = "exited at start"
            elif time.monotonic() > deadline:
                problem = "did not answer in 30 s"
            if problem:
                self.stop()
                raise RuntimeError(f"redis-server on port {self.port} {problem}")
            time.sleep(0.05)

    def _answers(self, hello: bytes) -> bool:
        said = b""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(hello)
                while b"+PONG" not in said:
                    chunk = sock.recv(64)
                    if not chunk:
                        return False
                    said += chunk
        except OSError:
            return False
        return True

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=30)
            self.process = None


@contextmanager
def redis_server(password: str | None = None) -> Iterator[RedisServer]:
    """A fresh ``redis-server`` for the block."""
    server = RedisServer(free_port(), password)
    server.start()
    try:
        yield server
    finally:
        server.stop()
