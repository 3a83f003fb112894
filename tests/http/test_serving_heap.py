"""While the app serves, what the process held once loaded is out of the garbage collector's
walks and its youngest generation is larger (decision 0043); both are undone when it stops,
so that a process that goes on collects as before."""

from __future__ import annotations

import gc
import weakref

import httpx

from app.http.factory import create_app
from app.http.heap import YOUNG_THRESHOLD, refreeze, serving_heap
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


def test_overlapping_apps_keep_the_heap_frozen_until_the_last_stops() -> None:
    before = gc.get_threshold()
    first, second = serving_heap(), serving_heap()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # stops first: the second still serves
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold()[0] >= YOUNG_THRESHOLD
    second.__exit__(None, None, None)
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only a collection frees it


def test_a_refreeze_frees_what_was_frozen_and_has_become_garbage() -> None:
    with serving_heap():
        node = _Node()
        refreeze()  # node is alive: frozen with the rest
        gone = weakref.ref(node)
        del node
        gc.collect()
        assert gone() is not None  # frozen garbage: no collection sees it
        refreeze()  # as after an ingest swaps the versions that answer
        assert gone() is None


def test_a_hosts_own_freeze_is_kept() -> None:
    gc.freeze()  # as a host that freezes before forking its workers
    try:
        hosts = gc.get_freeze_count()
        with serving_heap():
            assert gc.get_freeze_count() >= hosts
        assert gc.get_freeze_count() >= hosts  # not lifted: it was the host's
    finally:
        gc.unfreeze()
