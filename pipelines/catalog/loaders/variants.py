"""The ``disease_variants`` collection from ``disease_variant_ewas_mapping.tsv``.

One document per variant entity. The embedded text is made of names only (gene, variant,
residue change, disease, reactions, pathways); identifiers stay in metadata. A variant is
cited by its own stable id, else by its disease pathway's, else it is context only.
"""

from __future__ import annotations

from pathlib import Path

from pipelines.catalog.loaders._common import (
    ST_ID_RE,
    LoadedDocument,
    LoadResult,
    read_lines,
    short_hash,
)

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


def _joined(cell: str) -> str:
    return ", ".join(_values(cell))


def _describe(title: str, gene: str, row: dict[str, str]) -> str:
    """The variant as a few whole sentences, each fact next to what it is about, so an answer
    can quote one sentence and still say something complete ("Field: value" pairs cannot)."""
    protein = row["referenceEntity_name"]
    lead = f"{title} is a variant of {gene or protein}"
    if protein not in ("", gene):
        lead += f" ({protein})"
    residue, kind = (
        _joined(row["hasModifiedResidue_displayName"]),
        _joined(row["modifiedResidue_class"]),
    )
    if residue:
        lead += f" in which {residue}"
    if kind:
        lead += f" (mutation class {kind})"
    sentences = [lead + "."]

    disease, pathway = _joined(row["disease"]), _joined(row[_PATHWAY_NAME])
    normal_pathway = _joined(row.get(_NORMAL_PATHWAY_NAME, ""))
    filed = f"filed under the disease pathway {pathway}" if pathway else ""
    if disease:
        sentences.append(
            f"It is annotated with {disease}" + (f" and {filed}" if filed else "") + "."
        )
    elif filed:
        sentences.append(f"It is {filed}.")
    if normal_pathway:
        sentences.append(f"The corresponding normal pathway is {normal_pathway}.")

    reaction = _joined(row.get(_REACTION_NAME, ""))
    status = _joined(row.get(_REACTION_STATUS, ""))
    normal_reaction = _joined(row.get(_NORMAL_REACTION_NAME, ""))
    if reaction:
        sentence = f"It takes part in the defective reaction {reaction}"
        if status:
            sentence += f", with functional status {status}"
        if normal_reaction:
            sentence += f"; the normal reaction is {normal_reaction}"
        sentences.append(sentence + ".")
    return " ".join(sentences)


def load_variants(variants: Path) -> LoadResult:
    """One document per variant row of ``variants`` (``disease_variant_ewas_mapping.tsv``)."""
    path = variants
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
            LoadedDocument(
                key=key,
                title=title,
                text=_describe(title, gene, row),
                origin=origin,
                citation=citation,
                metadata={k: v for k, v in metadata.items() if v != ""},
            )
        )
    return result
