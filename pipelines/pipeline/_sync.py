"""Synchronous iteration over a pipeline's async event stream."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TypeVar

__all__ = ["SyncRunner"]

_T = TypeVar("_T")


class SyncRunner:
    """One event loop in a daemon thread for every synchronous call of one pipeline; a loop
    (and its thread pool) per call cost a few milliseconds before each answer."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()

                def run() -> None:
                    loop.run_forever()
                    loop.close()

                threading.Thread(target=run, name="reactome-answers-stream", daemon=True).start()
                self._loop = loop
            return self._loop

    def stop(self) -> None:
        """Let the loop's thread end (called when the pipeline is collected)."""
        with self._lock:
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._loop = None

    def iterate(
        self, items: Callable[[], AsyncIterator[_T]], *, last: Callable[[_T], bool]
    ) -> Iterator[_T]:
        """The items of ``items()``, run on the loop, up to the one ``last`` says ends it.

        Leaving early cancels the work at once, as a disconnecting client would, and waits
        until it has cleaned up."""
        delivered: queue.Queue[_T | BaseException] = queue.Queue()
        finished = threading.Event()

        async def pump() -> None:
            try:
                async for item in items():
                    delivered.put(item)
            except BaseException as error:  # delivered to the caller's thread
                delivered.put(error)
            finally:
                finished.set()

        work = asyncio.run_coroutine_threadsafe(pump(), self._running_loop())
        try:
            while True:
                item = delivered.get()
                if isinstance(item, asyncio.CancelledError):
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
                if last(item):
                    break
        finally:
            work.cancel()
            finished.wait()  # the cancelled work has cleaned up (its log is closed)
