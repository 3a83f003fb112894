"""``POST /v1/answers/{request_id}/feedback``: a user rates an answer, up or down, with an
optional comment, stored beside that answer's event log (:mod:`callbacks.feedback`).

The answer is found by its request id in ``settings.logs_dir``, which several instances may
share: feedback sent to one instance reaches the log another wrote. A later rating replaces
the earlier. The route is behind the API keys and the rate limit as every other, but is no
answer, so it takes no answer slot (its router is a plain one).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from app._deps import MetricsDep, SettingsDep
from app._errors import answer_not_logged
from callbacks.feedback import MAX_COMMENT_CHARS, read_feedback, write_feedback
from callbacks.log import find_request_logs
from pipelines.core.settings import Settings

__all__ = ["FEEDBACK_PATH", "FeedbackRequest", "add_feedback", "rates_answers", "router"]

FEEDBACK_PATH = "/v1/answers/{request_id}/feedback"
router = APIRouter()


class FeedbackRequest(BaseModel):
    """A rating of one answer."""

    model_config = ConfigDict(extra="forbid")

    rating: Literal["up", "down"]
    comment: str | None = Field(
        default=None,
        max_length=MAX_COMMENT_CHARS,
        description="what was right or wrong; credentials in it are redacted",
    )


def _record(
    folder: Path, request_id: str, body: FeedbackRequest
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The feedback stored beside the answer's log, and what it replaced (None: nothing, or
    no such answer); off the event loop, since it lists a folder that may be shared, remote."""
    logs = find_request_logs(folder, request_id)
    if not logs:
        return None, None
    log = logs[-1]  # the newest, should an id have been logged twice
    earlier = read_feedback(log)
    return write_feedback(log, request_id, body.rating, body.comment), earlier


@router.post(
    FEEDBACK_PATH,
    summary="Rate an answer up or down, with an optional comment",
    status_code=201,
    responses={
        200: {"description": "the feedback stored, replacing an earlier rating"},
        404: {"description": "no answer with this request id is logged"},
    },
)
async def feedback(
    request_id: str, body: FeedbackRequest, settings: SettingsDep, metrics: MetricsDep
) -> Any:
    stored, earlier = await asyncio.to_thread(_record, settings.logs_dir, request_id, body)
    if stored is None:
        return answer_not_logged(request_id, "send the request_id of an answer's start event")
    # A rating counts once per answer, and again when it changes: a comment added to the
    # same rating (the web client sends the rating first, then the comment) is not another.
    if earlier is None or earlier["rating"] != stored["rating"]:
        metrics.feedback_given(stored["rating"])
    return JSONResponse(stored, status_code=201 if earlier is None else 200)


def add_feedback(app: FastAPI) -> None:
    """The feedback route on ``app``, and the mark GET /v1/limits reads (see
    :func:`rates_answers`)."""
    app.include_router(router)
    app.state.rates_answers = True


def rates_answers(app: FastAPI, settings: Settings) -> bool:
    """Whether ``app`` keeps ratings: it serves the route (a replay does not) and writes the
    logs they are kept beside."""
    return bool(getattr(app.state, "rates_answers", False)) and settings.event_logs
