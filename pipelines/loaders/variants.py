"""The ``disease_variants`` collection from ``disease_variant_ewas_mapping.tsv``.

One document per variant entity. The embedded text is made of names only (gene, variant,
residue change, disease, reactions, pathways); identifiers stay in metadata. A variant is
cited by its own stable id, else by its disease pathway's, else it is context only.
"""

from __future__ import annotations

from pathlib import Path

from pipelines.loaders._common import ST_ID_RE, LoadResult, SourceDocument, read_lines, short_hash

__all__ = ["REQUIRED_COLUMNS", "VARIANTS_FILE", "load_variants"]

VARIANTS_FILE = "disease_variant_ewas_mapping.tsv"

_PREFIX = "entityWithAccessionedSequence_"
_PATHWAY_ID = f"{_PREFIX}pathway_stable_id"
_PATHWAY_NAME = f"{_PREFIX}pathway_displayName"
_REACTION_NAME = f"{_PREFIX}reactionLikeEvent_displayName"
_REACTION_STATUS = (
    f"{_PREFIX}reactionLikeEvent_entityFunctionalStatus_functionalStatus_"
    "functionalStatusType_displayName"
)
_NORMAL_REACTION_NAME = f"{_PREFIX}reactionLikeEvent_normalReaction_displayName"
_NORMAL_PATHWAY_NAME = f"{_PREFIX}pathway_normalPathway_displayName"

# The columns we read; the rest of the release file's 26 are carried by position only.
REQUIRED_COLUMNS = (
    "Genename",
    "displayName",
    "stable_id",
    "referenceEntity_name",
    "referenceEntity_id",
    "hasModifiedResidue_displayName",
    "modifiedResidue_class",
    "disease",
    "disease_identifier",
    _PATHWAY_ID,
    _PATHWAY_NAME,
)
_OPTIONAL_TEXT_COLUMNS = (
    _REACTION_NAME,
    _REACTION_STATUS,
    _NORMAL_REACTION_NAME,
    _NORMAL_PATHWAY_NAME,
)


def _values(cell: str) -> list[str]:
    return [value.strip() for value in cell.split("|") if value.strip()]


def _sentence(label: str, cell: str) -> str:
    values = _values(cell)
    return f"{label}: {', '.join(values)}." if values else ""


def load_variants(path: Path) -> LoadResult:
    result = LoadResult()
    lines = read_lines(path, result)
    header_line = next(lines, None)
    if header_line is None:
        result.error(f"{path.name}:1", "the file is empty; expected a header line")
        return result
    header = [name.strip() for name in header_line[1].split("\t")]
    missing = [name for name in REQUIRED_COLUMNS if name not in header]
    if missing:
        result.error(
            f"{path.name}:{header_line[0]}",
            f"header lacks column(s) {', '.join(missing)}; is this a Reactome {VARIANTS_FILE}?",
        )
        return result
    column = {name: index for index, name in enumerate(header)}

    keys_seen: dict[str, str] = {}
    # Rows of the shipped file can be identical where Reactome's distinguishing columns are
    # blank; they are still separate entities, told apart by their order of appearance.
    copies: dict[str, int] = {}
    for number, line in lines:
        origin = f"{path.name}:{number}"
        if not line.strip():
            continue
        cells = line.split("\t")
        if len(cells) != len(header):
            result.error(
                origin, f"expected {len(header)} columns as in the header, found {len(cells)}"
            )
            continue
        row = {name: cells[index].strip() for name, index in column.items()}
        gene, name = row["Genename"], row["displayName"]
        if not gene and not name:
            result.skip(origin, "row has neither Genename nor displayName")
            continue

        own_id = row["stable_id"]
        pathway_ids = _values(row[_PATHWAY_ID])
        bad = [value for value in [own_id, *pathway_ids] if value and not ST_ID_RE.fullmatch(value)]
        if bad:
            result.skip(origin, f"{bad[0]!r} is not a Reactome stable id (R-XXX-digits)")
            continue

        pathway_names = _values(row[_PATHWAY_NAME])
        citation: dict[str, str] = {}
        if own_id:
            citation = {"st_id": own_id, "display_name": name or gene}
        elif pathway_ids:
            citation = {
                "st_id": pathway_ids[0],
                "display_name": pathway_names[0] if pathway_names else pathway_ids[0],
            }

        residue = row["hasModifiedResidue_displayName"]
        if own_id:
            if own_id in keys_seen:
                result.skip(origin, f"{own_id} appears again (first at {keys_seen[own_id]})")
                continue
            keys_seen[own_id] = origin
            key = own_id
        else:
            content = short_hash(line)
            copies[content] = copies.get(content, 0) + 1
            key = f"variant-{content}-{copies[content]}"

        title = name or gene
        parts = [
            f"{title}: a variant of {gene or row['referenceEntity_name']}"
            + (
                f" ({row['referenceEntity_name']})"
                if row["referenceEntity_name"] not in ("", gene)
                else ""
            )
            + ".",
            _sentence("Residue change", residue),
            _sentence("Mutation class", row["modifiedResidue_class"]),
            _sentence("Disease", row["disease"]),
            _sentence("Defective reaction", row.get(_REACTION_NAME, "")),
            _sentence("Functional status", row.get(_REACTION_STATUS, "")),
            _sentence("Normal reaction", row.get(_NORMAL_REACTION_NAME, "")),
            _sentence("Disease pathway", row[_PATHWAY_NAME]),
            _sentence("Normal pathway", row.get(_NORMAL_PATHWAY_NAME, "")),
        ]
        metadata: dict[str, str | int | float | bool] = {
            "gene": gene,
            "variant": name,
            "uniprot": row["referenceEntity_id"],
            "disease_ids": "|".join(_values(row["disease_identifier"])),
            "pathway_st_ids": "|".join(pathway_ids),
        }
        if own_id:
            metadata["variant_st_id"] = own_id
        result.documents.append(
            SourceDocument(
                key=key,
                title=title,
                text=" ".join(part for part in parts if part),
                origin=origin,
                citation=citation,
                metadata={k: v for k, v in metadata.items() if v != ""},
            )
        )
    return result
