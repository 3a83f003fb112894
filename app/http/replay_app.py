"""``replay LOG --serve PORT``: one recorded answer served as the live stream would be.

Every request to ``/v1/answer/stream`` (POST with any body, as the web client sends it, or GET
for curl and EventSource) replays the recorded events, with their recorded ids and pace, as
SSE with the same framing and headers as ``serve``. The web client is at ``/``, and the limits
it reads at ``/v1/limits`` (the settings'), so a front-end change can be checked against a
real past answer without a model or a store. Given the log's view, the log page is at
``/logs/{request_id}`` too (:mod:`app.http.routes.log_page`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
from fastapi import FastAPI

from app.http.deps import share
from app.http.errors import add_error_handlers
from app.http.factory import add_body_limits, add_cors
from app.http.routes.log_page import replay_log_router
from app.http.routes.native import KEEP_ALIVE_S, STREAM_HEADERS, limits_router
from app.http.routes.web import add_web_client
from app.http.settings import ServerSettings
from app.http.sse import EventStream
from callbacks.events import Event, to_sse
from callbacks.replay import paced
from pipelines.core.settings import Settings

__all__ = ["create_replay_app"]


def create_replay_app(
    events: Sequence[Event],
    *,
    speed: float | None,
    settings: Settings,
    server: ServerSettings,
    log_view: dict[str, Any] | None = None,
) -> FastAPI:
    """An app that streams ``events``; ``speed`` divides the recorded gaps, None is instant;
    with ``log_view`` (:func:`callbacks.log_view.log_view`), it serves the log page too."""
    app = FastAPI(title="reactome-answers replay", summary="One recorded answer, replayed.")
    share(app, settings, server)
    add_body_limits(app, server)
    add_cors(app, server)
    add_error_handlers(app)

    async def frames() -> AsyncIterator[bytes]:
        for pause, event in paced(events, speed):
            await anyio.sleep(pause)
            yield to_sse(event).encode()

    @app.api_route(
        "/v1/answer/stream", methods=["GET", "POST"], summary="The recorded answer as SSE"
    )
    async def answer_stream() -> EventStream:
        return EventStream(frames(), headers=STREAM_HEADERS, ping=KEEP_ALIVE_S)

    app.include_router(limits_router)
    if log_view is not None:
        app.include_router(replay_log_router(log_view))
    add_web_client(app)
    return app
