"""The loader of the benchmarks' ``reactions`` collection (``collections/reactions/``)."""

from __future__ import annotations

import csv
from pathlib import Path

from pipelines.loaders import LoadResult, SourceDocument
from pipelines.loaders._common import sha256_of


def load_reactions(reactions: Path) -> LoadResult:
    """One document per row of ``reaction_summations.tsv`` (stId, pathway_stId, summation)."""
    result = LoadResult(files={reactions.name: sha256_of(reactions)})
    with reactions.open(encoding="utf-8", newline="") as stream:
        for number, row in enumerate(csv.DictReader(stream, delimiter="\t"), start=2):
            result.documents.append(
                SourceDocument(
                    key=row["stId"],
                    title=f"Reaction {row['stId']} in {row['pathway_stId']}",
                    text=row["summation"],
                    origin=f"{reactions.name}:{number}",
                    citation={"st_id": row["stId"], "display_name": row["stId"]},
                )
            )
    return result
