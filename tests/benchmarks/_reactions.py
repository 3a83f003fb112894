"""The loaders of the benchmarks' reaction collections (``collections/reactions/`` and, for
the growth measurement, ``growth_collections/``)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

from pipelines.catalog.loaders import LoadedDocument, LoadResult
from pipelines.catalog.loaders._common import sha256_of

# A copy's stable id is the original's number plus this times the copy's number: larger than
# any Reactome id, so a copy can never be mistaken for a real entity, and reversible.
COPY_STRIDE = 100_000_000
_COPY_ID = re.compile(r"R-HSA-(\d{9,})")


def load_reactions(reactions: Path) -> LoadResult:
    """One document per row of ``reaction_summations.tsv`` (stId, pathway_stId, summation)."""
    return _replicated(reactions, 1)


def load_reactions_x3(reactions: Path) -> LoadResult:
    """The reaction summaries three times over, each copy with ids of its own."""
    return _replicated(reactions, 3)


def load_reactions_x10(reactions: Path) -> LoadResult:
    """The reaction summaries ten times over, each copy with ids of its own."""
    return _replicated(reactions, 10)


def original_text(text: str) -> str:
    """``text`` with every copy's stable id put back to the original's."""
    return _COPY_ID.sub(lambda found: f"R-HSA-{int(found[1]) % COPY_STRIDE}", text)


def _copy_id(st_id: str, copy: int) -> str:
    prefix, _, number = st_id.rpartition("-")
    return f"{prefix}-{int(number) + copy * COPY_STRIDE}" if copy else st_id


def _replicated(reactions: Path, times: int) -> LoadResult:
    result = LoadResult(files={reactions.name: sha256_of(reactions)})
    with reactions.open(encoding="utf-8", newline="") as stream:
        rows = list(csv.DictReader(stream, delimiter="\t"))
    for copy in range(times):
        for number, row in enumerate(rows, start=2):
            st_id = _copy_id(row["stId"], copy)
            result.documents.append(
                LoadedDocument(
                    key=st_id,
                    title=f"Reaction {st_id} in {row['pathway_stId']}",
                    text=row["summation"],
                    origin=f"{reactions.name}:{number}" + (f"#copy{copy}" if copy else ""),
                    citation={"st_id": st_id, "display_name": st_id},
                )
            )
    return result
