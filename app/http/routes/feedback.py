"""``POST /v1/answers/{request_id}/feedback``: a user rates an answer, up or down, with an
optional comment, stored beside that answer's event log (:mod:`callbacks.feedback`).

The answer is found by its request id in ``settings.logs_dir``, which several instances may share:
feedback sent to one instance reaches the log another wrote. Only an answer's log is rated
(:func:`app.http.routes.log_page.newest_answer_log`): anything else named like one, a FIFO, a link
or a stray file, is a 404 as an unknown id is. A later rating replaces the earlier, read and written
under the folder's lock (:func:`callbacks.feedback.rate_answer`), so the metrics move each answer
from one count to the other exactly once per change. The route is behind the API keys and the rate
limit as every other, but is no answer, so it takes no answer slot (its router is a plain one).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from app.http.deps import MetricsDep, SettingsDep
from app.http.errors import answer_not_logged
from app.http.routes.log_page import (
    LogsFolderUnreadableError,
    logs_folder_unreadable,
    newest_answer_log,
)
from callbacks.feedback import MAX_COMMENT_CHARS, rate_answer
from pipelines.core.settings import Settings

__all__ = ["FEEDBACK_PATH", "FeedbackRequest", "rates_answers", "router"]

FEEDBACK_PATH = "/v1/answers/{request_id}/feedback"
router = APIRouter(tags=["feedback"])


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
    no such answer); off the event loop, since it lists a folder that may be shared, remote,
    and may wait for another writer's turn."""
    found = newest_answer_log(folder, request_id, callbacks=False)
    if found is None:
        return None, None
    return rate_answer(found[0], request_id, body.rating, body.comment)


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
    try:
        stored, earlier = await asyncio.to_thread(_record, settings.logs_dir, request_id, body)
    except LogsFolderUnreadableError:
        return logs_folder_unreadable()
    if stored is None:
        return answer_not_logged(request_id, "send the request_id of an answer's start event")
    # An answer counts once, under its latest rating: a change moves it to the other count,
    # and a comment added to the same rating (the web client sends the rating first, then
    # the comment) moves nothing.
    metrics.feedback_given(stored["rating"], None if earlier is None else earlier["rating"])
    return JSONResponse(stored, status_code=201 if earlier is None else 200)


def rates_answers(app: FastAPI, settings: Settings) -> bool:
    """Whether ``app`` keeps ratings: it serves the route (a replay does not) and writes the
    logs they are kept beside."""
    return bool(getattr(app.state, "rates_answers", False)) and settings.event_logs
