"""What a route is given: the application's shared objects, as FastAPI dependencies.

:func:`share` stores them on ``app.state`` once, when the application is built; a route names
what it needs by annotation (``pipeline: PipelineDep``) and FastAPI passes it in. A route
module therefore holds no application of its own and can be included in any application
that shared what it asks for (``serve``'s, or ``replay --serve``'s, which shares only the
settings).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, FastAPI, Request

from app.http.middleware.metrics import ServerMetrics
from app.http.settings import ServerSettings
from pipelines.catalog.catalog import Catalog
from pipelines.core.settings import Settings
from pipelines.pipeline import AnswerPipeline

__all__ = [
    "CatalogDep",
    "MetricsDep",
    "PipelineDep",
    "ServerSettingsDep",
    "SettingsDep",
    "get_catalog",
    "get_metrics",
    "get_pipeline",
    "get_server_settings",
    "get_settings",
    "share",
]


def share(
    app: FastAPI,
    settings: Settings,
    server: ServerSettings,
    *,
    pipeline: AnswerPipeline | None = None,
    catalog: Catalog | None = None,
    metrics: ServerMetrics | None = None,
) -> None:
    """Give ``app``'s routes these objects; a route asking for one not given fails loudly."""
    app.state.settings = settings
    app.state.server_settings = server
    for name, shared in (("pipeline", pipeline), ("catalog", catalog), ("metrics", metrics)):
        if shared is not None:
            setattr(app.state, name, shared)


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_server_settings(request: Request) -> ServerSettings:
    server: ServerSettings = request.app.state.server_settings
    return server


def get_pipeline(request: Request) -> AnswerPipeline:
    pipeline: AnswerPipeline = request.app.state.pipeline
    return pipeline


def get_catalog(request: Request) -> Catalog:
    """The collections the pipeline accepts (its settings' catalog)."""
    catalog: Catalog = request.app.state.catalog
    return catalog


def get_metrics(request: Request) -> ServerMetrics:
    metrics: ServerMetrics = request.app.state.metrics
    return metrics


SettingsDep = Annotated[Settings, Depends(get_settings)]
ServerSettingsDep = Annotated[ServerSettings, Depends(get_server_settings)]
PipelineDep = Annotated[AnswerPipeline, Depends(get_pipeline)]
CatalogDep = Annotated[Catalog, Depends(get_catalog)]
MetricsDep = Annotated[ServerMetrics, Depends(get_metrics)]
