"""Readers for Reactome's release files and user-guide pages, one module per collection."""

from pipelines.loaders._common import LoadResult, Problem, SourceDocument
from pipelines.loaders.reactome import load_reactome
from pipelines.loaders.userguide import load_userguide
from pipelines.loaders.variants import load_variants

__all__ = [
    "LoadResult",
    "Problem",
    "SourceDocument",
    "load_reactome",
    "load_userguide",
    "load_variants",
]
