"""What an operator's tools read: ``GET``/``HEAD /healthz`` (load balancers, uptime checks)
and ``GET /metrics`` (Prometheus)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from app.http.deps import CatalogDep, MetricsDep, PipelineDep, ServerSettingsDep, SettingsDep
from app.http.middleware.access import KEY_ACCEPTED
from app.http.middleware.metrics import CONTENT_TYPE_LATEST
from app.http.middleware.shared_limits import SharedLimits
from pipelines.core.errors import ReactomeAnswersError
from pipelines.core.redaction import redact_secrets

__all__ = ["router"]

router = APIRouter(tags=["operations"])
_DETAILS_NEED_A_KEY = "send 'Authorization: Bearer KEY' for the details"


# HEAD for load balancers and uptime checks that probe without reading a body.
@router.head("/healthz", include_in_schema=False)
@router.get("/healthz", summary="Store reachable, collections present, model configured")
async def healthz(
    pipeline: PipelineDep,
    settings: SettingsDep,
    server: ServerSettingsDep,
    catalog: CatalogDep,
    request: Request,
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
    # How the answer cap and the rate limits are counted; a Redis they cannot reach leaves
    # the instance answering (or refusing, as the operator chose) alike with every other,
    # so it is degraded, not taken out of the pool.
    limits: SharedLimits | None = request.app.state.shared_limits
    if limits is None:
        report["limits"] = {"counted": "per-process"}
    else:
        if limits.down_why is None:
            # Fresh, not the last request's news; while Redis is down the worker's own probe
            # asks every second, and a health check must not wait on an unreachable host.
            await limits.probe()
        report["limits"] = limits.describe()
    limits_degraded = "degraded" in report["limits"]
    status = "degraded" if degraded or limits_degraded else "ok"
    report["status"] = status if healthy else "unavailable"
    code = 200 if healthy else 503
    # The details name hosts (Redis, the Chroma server) and repeat their errors: for the
    # operator, who holds a key, not for anyone who can reach a server that asks for keys.
    # A balancer needs only the status.
    if server.api_keys is not None and request.scope.get(KEY_ACCEPTED) is not True:
        return JSONResponse({"status": report["status"], "details": _DETAILS_NEED_A_KEY}, code)
    return JSONResponse(report, status_code=code)


@router.get("/metrics", summary="Counters and histograms in the Prometheus text format")
async def prometheus_metrics(metrics: MetricsDep) -> Response:
    return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)
