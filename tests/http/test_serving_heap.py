"""While the app serves, what the process held once loaded is out of the garbage collector's
walks and its youngest generation is larger (decision 0043); both are undone when it stops,
so that a process that goes on collects as before."""

from __future__ import annotations

import gc

import httpx

from app.http.factory import create_app
from app.http.heap import YOUNG_THRESHOLD
from pipelines.core.settings import load_settings
from tests.support.fake_pipeline import ABCA1, make_pipeline
from tests.support.servers import serve


def test_the_heap_is_frozen_while_serving_and_released_after() -> None:
    before = gc.get_threshold()
    pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 moves cholesterol [1].")
    servers = serve(create_app(load_settings(), pipeline=pipeline))
    base = next(servers)
    try:
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold()[0] >= YOUNG_THRESHOLD
        # and it answers as ever
        reply = httpx.post(f"{base}/v1/answer", json={"question": "What does ABCA1 do?"})
        assert [r["st_id"] for r in reply.json()["references"]] == ["R-HSA-5682113"]
    finally:
        next(servers, None)
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before
