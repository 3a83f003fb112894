"""The ``reactome`` collection from Reactome's pathway release files.

``pathway2summation.txt`` (stId, name, summation) gives the documents; the optional
``ReactomePathways.txt`` (stId, name, species) and ``ReactomePathwaysRelation.txt``
(parent, child) add species and the names of each pathway's top-level ancestors.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from pipelines.catalog.loaders._common import ST_ID_RE, LoadedDocument, LoadResult, read_lines

__all__ = ["PATHWAYS_FILE", "RELATION_FILE", "SUMMATION_FILE", "load_reactome"]

SUMMATION_FILE = "pathway2summation.txt"
PATHWAYS_FILE = "ReactomePathways.txt"
RELATION_FILE = "ReactomePathwaysRelation.txt"


def _rows(path: Path, width: int, result: LoadResult) -> list[tuple[str, list[str]]]:
    rows = []
    for number, line in read_lines(path, result):
        if not line.strip():
            continue
        cells = line.split("\t")
        if len(cells) != width:
            result.error(
                f"{path.name}:{number}",
                f"expected {width} tab-separated columns, found {len(cells)}",
            )
            continue
        rows.append((f"{path.name}:{number}", [cell.strip() for cell in cells]))
    return rows


def _top_levels(st_id: str, parents: dict[str, list[str]]) -> list[str]:
    """The roots above ``st_id``; a pathway with no parent row is its own root."""
    roots: list[str] = []
    seen = {st_id}
    frontier = [st_id]
    while frontier:
        current = frontier.pop()
        above = [parent for parent in parents.get(current, []) if parent not in seen]
        if not parents.get(current):
            roots.append(current)
        seen.update(above)
        frontier.extend(above)
    return sorted(set(roots))


def load_reactome(
    summation: Path, pathways: Path | None = None, relation: Path | None = None
) -> LoadResult:
    result = LoadResult()
    names: dict[str, str] = {}
    species: dict[str, str] = {}
    if pathways is not None:
        for _, (st_id, name, organism) in _rows(pathways, 3, result):
            names[st_id] = name
            species[st_id] = organism

    parents: dict[str, list[str]] = defaultdict(list)
    has_children: set[str] = set()
    if relation is not None:
        for _, (parent, child) in _rows(relation, 2, result):
            parents[child].append(parent)
            has_children.add(parent)

    first_seen: dict[str, str] = {}
    for origin, (st_id, name, summary) in _rows(summation, 3, result):
        if not ST_ID_RE.fullmatch(st_id):
            result.skip(origin, f"{st_id!r} is not a Reactome stable id (R-XXX-digits)")
            continue
        if st_id in first_seen:
            result.skip(origin, f"{st_id} appears again (first at {first_seen[st_id]})")
            continue
        first_seen[st_id] = origin
        if not summary:
            result.skip(origin, f"{st_id} has an empty summary")
            continue
        display_name = name or names.get(st_id, "")
        if not display_name:
            result.skip(origin, f"{st_id} has no name here or in {PATHWAYS_FILE}")
            continue
        metadata: dict[str, str | int | float | bool] = {}
        if st_id in species:
            metadata["species"] = species[st_id]
        if relation is not None and (st_id in parents or st_id in has_children):
            roots = _top_levels(st_id, parents)
            metadata["top_level"] = "; ".join(names.get(root, root) for root in roots)
        result.documents.append(
            LoadedDocument(
                key=st_id,
                title=display_name,
                text=summary,
                origin=origin,
                citation={"st_id": st_id, "display_name": display_name},
                metadata=metadata,
            )
        )
    return result
