"""The response every SSE stream of ours goes out in: sse-starlette's, with its keep-alive
comments, its watch for a client that leaves and for the server's shutdown, less the cancel
scope it opens around each send when no send timeout is set (we set none: a stalled client
is the disconnect watch's and the request timeout's business). At a hosted model's pace that
scope was about a twentieth of a token event's CPU on the server (issue 41)."""

from __future__ import annotations

from sse_starlette import EventSourceResponse
from starlette.types import Message, Send

__all__ = ["EventStream"]


class EventStream(EventSourceResponse):
    """:class:`sse_starlette.EventSourceResponse`, each send made directly when there is no
    ``send_timeout`` (with one, as the base class makes it)."""

    async def _send_with_timeout(self, send: Send, message: Message) -> None:
        if self.send_timeout is not None:
            await super()._send_with_timeout(send, message)
            return
        try:
            await send(message)
        except BaseException:
            # As the base class marks it: the transport's state is unknown, and the closing
            # body is not attempted.
            self._send_interrupted = True
            raise
