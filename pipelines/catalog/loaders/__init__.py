"""Readers for Reactome's release files and user-guide pages, one module per collection."""

from pipelines.catalog.loaders._common import LoadedDocument, LoadResult, Problem
from pipelines.catalog.loaders.reactome import load_reactome
from pipelines.catalog.loaders.userguide import load_userguide
from pipelines.catalog.loaders.variants import load_variants

__all__ = [
    "LoadResult",
    "LoadedDocument",
    "Problem",
    "load_reactome",
    "load_userguide",
    "load_variants",
]
