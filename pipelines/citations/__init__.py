"""The citation contract: which retrieved documents are numbered sources (``sources``), the
finalizer that makes the markers and the Sources list agree (``finalize``), and the live
numbering that renumbers markers while the answer streams (``live``), and the removal of a
Sources section the model wrote itself (``model_sources``).
"""

from pipelines.citations.finalize import (
    cited_numbers,
    finalize_citations,
    strip_out_of_range_markers,
)
from pipelines.citations.live import LiveCitations
from pipelines.citations.model_sources import ModelSources, without_model_sources
from pipelines.citations.sources import Source, number_sources

__all__ = [
    "LiveCitations",
    "ModelSources",
    "Source",
    "cited_numbers",
    "finalize_citations",
    "number_sources",
    "strip_out_of_range_markers",
    "without_model_sources",
]
