"""What an operator's tools read: ``GET``/``HEAD /healthz`` (load balancers, uptime checks)
and ``GET /metrics`` (Prometheus)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from app._deps import CatalogDep, MetricsDep, PipelineDep, SettingsDep
from app._metrics import CONTENT_TYPE_LATEST
from pipelines.core.errors import ReactomeAnswersError
from pipelines.core.redaction import redact_secrets

__all__ = ["router"]

router = APIRouter()


# HEAD for load balancers and uptime checks that probe without reading a body.
@router.head("/healthz", include_in_schema=False)
@router.get("/healthz", summary="Store reachable, collections present, model configured")
async def healthz(
    pipeline: PipelineDep, settings: SettingsDep, catalog: CatalogDep
) -> JSONResponse:
    from pipelines.index import store

    report: dict[str, Any] = {"llm": settings.llm, "embeddings": settings.embeddings}
    try:
        infos = store.collection_infos(pipeline.operator.store_client(), catalog.names)
        report["store"] = "ok"
        report["collections"] = {info.name: info.documents for info in infos}
    except ReactomeAnswersError as error:
        report["store"] = redact_secrets(str(error))
        report["collections"] = {}
    missing = [name for name in catalog.names if name not in report["collections"]]
    report["missing"] = missing
    healthy = report["store"] == "ok" and len(missing) < len(catalog.names)
    # Answering, but not as well as it should: a collection ranked without its keyword
    # index (named, with why). Still 200: the instance answers, and a balancer that
    # took it out would leave fewer to answer.
    degraded = await asyncio.to_thread(pipeline.operator.degraded) if healthy else {}
    report["degraded"] = degraded
    report["status"] = ("degraded" if degraded else "ok") if healthy else "unavailable"
    return JSONResponse(report, status_code=200 if healthy else 503)


@router.get("/metrics", summary="Counters and histograms in the Prometheus text format")
async def prometheus_metrics(metrics: MetricsDep) -> Response:
    return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)
