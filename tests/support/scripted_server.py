"""A real server on 127.0.0.1 (uvicorn in a thread) over a scripted pipeline, and the samples
of one metric its `/metrics` reports."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from app.http.factory import create_app
from app.http.settings import load_server_settings
from tests.support.fake_pipeline import ABCA1, CDK5, make_pipeline
from tests.support.servers import serve

__all__ = ["metric_samples", "served"]


@contextmanager
def served(home: Path | None = None, *, logged: bool = True, **server: Any) -> Iterator[str]:
    """A real server on 127.0.0.1 over a scripted pipeline that logs (unless not ``logged``)
    into the test's home, or ``home``, whose store it reports on; ``server`` are the HTTP
    server's settings."""
    options: dict[str, Any] = {"event_logs": logged}
    if home is not None:
        options["home"] = home
    pipeline, _, _ = make_pipeline([ABCA1, CDK5], "ABCA1 exports cholesterol [1].", **options)
    app = create_app(pipeline.settings, pipeline=pipeline, server=load_server_settings(**server))
    yield from serve(app)


def metric_samples(base: str, name: str, headers: dict[str, str] | None = None) -> dict[str, float]:
    """The samples of metric ``name`` at ``base``'s `/metrics`, by their labels' values
    joined with "/"."""
    text = httpx.get(f"{base}/metrics", headers=headers, timeout=30).text
    return {
        "/".join(sample.labels.values()): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }
