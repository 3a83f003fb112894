"""A non-streamed answer stops when its client leaves, as a streamed one does.

A streamed response notices a disconnect when it next writes; a JSON answer writes nothing
until the end, so without a watch it would run to completion (or to
``REQUEST_TIMEOUT_S``) for nobody, holding its answer slot and the model server. Here the
request's events are collected while ``receive`` is watched for ``http.disconnect``; when it
comes, the collecting is cancelled, which cancels the model work, and the event log records
the answer as failed with a ``cancelled`` error, like a stream whose client left.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from starlette.types import Receive

from callbacks.events import Event

__all__ = ["CLIENT_LEFT_STATUS", "events_unless_client_leaves"]

# nginx's "client closed request": what the metrics count for an answer nobody waited for.
CLIENT_LEFT_STATUS = 499


async def _client_left(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass  # the body was read before the endpoint ran: nothing else is expected


async def events_unless_client_leaves(
    receive: Receive, events: AsyncGenerator[Event, None]
) -> list[Event] | None:
    """All of ``events``, or None when the client disconnected first (the generator is then
    closed, so the work behind it is cancelled and its log completed)."""
    collected: list[Event] = []

    async def collect() -> None:
        async for event in events:
            collected.append(event)

    # Plain tasks rather than an anyio task group: a cancelled anyio scope cancels every
    # await inside it again and again, which would interrupt the work's own clean-up (the
    # "cancelled" error it writes to the log); a task cancelled once runs its clean-up whole.
    collector = asyncio.ensure_future(collect())
    watcher = asyncio.ensure_future(_client_left(receive))
    try:
        await asyncio.wait({collector, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # this request itself is cancelled (the server is stopping)
        collector.cancel()
        raise
    finally:
        watcher.cancel()
    if collector.done():
        await asyncio.gather(watcher, return_exceptions=True)
        collector.result()  # a failure of the pipeline surfaces here, as it would unwatched
        return collected
    collector.cancel()
    await asyncio.gather(collector, watcher, return_exceptions=True)
    await events.aclose()
    return None
