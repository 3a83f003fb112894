"""Each loader on small fixture files, including every kind of bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.catalog.loaders import LoadResult, load_reactome, load_userguide, load_variants
from pipelines.catalog.loaders.variants import REQUIRED_COLUMNS

ABCA1 = "R-HSA-5682113\tDefective ABCA1 causes TGD\tABCA1 moves cholesterol out of cells."
CDK5 = "R-HSA-8862803\tDeregulated CDK5 in Alzheimer's disease\tp25 keeps CDK5 switched on."


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def problems(result: LoadResult) -> list[str]:
    return [f"{p.kind}: {p}" for p in result.problems]


# --- reactome -------------------------------------------------------------------------


def test_reactome_documents_carry_ids_names_species_and_top_levels(tmp_path: Path) -> None:
    summation = write(tmp_path / "pathway2summation.txt", f"{ABCA1}\n{CDK5}\n")
    pathways = write(
        tmp_path / "ReactomePathways.txt",
        "R-HSA-1643685\tDisease\tHomo sapiens\n"
        "R-HSA-5682113\tDefective ABCA1 causes TGD\tHomo sapiens\n"
        "R-HSA-8862803\tDeregulated CDK5 in Alzheimer's disease\tHomo sapiens\n"
        "R-HSA-5668914\tDiseases of metabolism\tHomo sapiens\n",
    )
    relation = write(
        tmp_path / "ReactomePathwaysRelation.txt",
        "R-HSA-1643685\tR-HSA-5668914\nR-HSA-5668914\tR-HSA-5682113\n",
    )
    result = load_reactome(summation, pathways, relation)
    assert problems(result) == []
    abca1, cdk5 = result.documents
    assert abca1.citation == {
        "st_id": "R-HSA-5682113",
        "display_name": "Defective ABCA1 causes TGD",
    }
    assert abca1.metadata == {"species": "Homo sapiens", "top_level": "Disease"}
    assert abca1.text == "ABCA1 moves cholesterol out of cells."
    # CDK5 has no row in the hierarchy file: no invented ancestry.
    assert "top_level" not in cdk5.metadata
    assert set(result.files) == {summation.name, pathways.name, relation.name}


def test_reactome_bad_rows_are_counted_with_file_and_line(tmp_path: Path) -> None:
    summation = write(
        tmp_path / "pathway2summation.txt",
        ABCA1.encode()
        + b"\n"
        + b"HSA-123\tNot an id\tSomething.\n"
        + b"R-HSA-2\tEmpty summary\t\n"
        + b"R-HSA-3\tonly two columns\n"
        + b"R-HSA-4\tLatin-1 \xe9\tBroken bytes.\n"
        + ABCA1.encode()
        + b"\n"
        + b"\n"
        + CDK5.encode()
        + b"\n",
    )
    result = load_reactome(summation)
    assert [doc.key for doc in result.documents] == ["R-HSA-5682113", "R-HSA-8862803"]
    assert problems(result) == [
        "error: pathway2summation.txt:4: expected 3 tab-separated columns, found 2",
        "error: pathway2summation.txt:5: not UTF-8 (byte 0xe9 at column 17); "
        "re-save the file as UTF-8",
        "skipped: pathway2summation.txt:2: 'HSA-123' is not a Reactome stable id (R-XXX-digits)",
        "skipped: pathway2summation.txt:3: R-HSA-2 has an empty summary",
        "skipped: pathway2summation.txt:6: R-HSA-5682113 appears again "
        "(first at pathway2summation.txt:1)",
    ]


def test_reactome_name_falls_back_to_the_pathways_file(tmp_path: Path) -> None:
    summation = write(tmp_path / "pathway2summation.txt", "R-HSA-9\t\tA summary.\nR-HSA-8\t\tB.\n")
    pathways = write(tmp_path / "ReactomePathways.txt", "R-HSA-9\tNamed elsewhere\tHomo sapiens\n")
    result = load_reactome(summation, pathways)
    assert [doc.title for doc in result.documents] == ["Named elsewhere"]
    assert problems(result) == [
        "skipped: pathway2summation.txt:2: R-HSA-8 has no name here or in ReactomePathways.txt"
    ]


# --- disease variants -------------------------------------------------------------------

HEADER = [
    *REQUIRED_COLUMNS,
    "entityWithAccessionedSequence_reactionLikeEvent_displayName",
    "entityWithAccessionedSequence_reactionLikeEvent_normalReaction_displayName",
]


def variant_row(**cells: str) -> str:
    return "\t".join(cells.get(name, "") for name in HEADER)


def variants_file(tmp_path: Path, *rows: str, header: list[str] = HEADER) -> Path:
    return write(
        tmp_path / "disease_variant_ewas_mapping.tsv",
        "\t".join(header) + "\n" + "".join(row + "\n" for row in rows),
    )


def test_variant_cited_by_own_id_else_pathway_else_context_only(tmp_path: Path) -> None:
    path = variants_file(
        tmp_path,
        variant_row(
            Genename="ABCA1",
            displayName="ABCA1 W590S [plasma membrane]",
            stable_id="R-HSA-5682201",
            referenceEntity_id="UniProt:O95477",
            hasModifiedResidue_displayName="L-tryptophan 590 replaced with L-serine",
            disease="Tangier disease",
            entityWithAccessionedSequence_pathway_stable_id="R-HSA-5682113",
            entityWithAccessionedSequence_pathway_displayName="Defective ABCA1 causes TGD",
        ),
        variant_row(
            Genename="IDH1",
            displayName="IDH1 R132H [cytosol]",
            entityWithAccessionedSequence_pathway_stable_id="R-HSA-2978092",
            entityWithAccessionedSequence_pathway_displayName="Abnormal conversion of 2-OG",
        ),
        variant_row(Genename="MAP2K2", displayName="MAP2K2 Y134C [cytosol]"),
    )
    result = load_variants(path)
    assert problems(result) == []
    own, by_pathway, context = result.documents
    assert own.citation == {
        "st_id": "R-HSA-5682201",
        "display_name": "ABCA1 W590S [plasma membrane]",
    }
    assert by_pathway.citation == {
        "st_id": "R-HSA-2978092",
        "display_name": "Abnormal conversion of 2-OG",
    }
    assert context.citation == {}
    # Identifiers stay in metadata, out of the embedded text.
    assert "R-HSA" not in own.text
    assert "UniProt" not in own.text
    assert "Tangier disease" in own.text
    assert "L-tryptophan 590 replaced with L-serine" in own.text
    assert own.metadata["uniprot"] == "UniProt:O95477"


def test_variant_file_with_missing_columns_is_one_clear_error(tmp_path: Path) -> None:
    path = variants_file(tmp_path, "ABCA1\tx", header=["Genename", "displayName"])
    result = load_variants(path)
    assert result.documents == []
    (problem,) = problems(result)
    assert problem.startswith("error: disease_variant_ewas_mapping.tsv:1: header lacks column(s)")
    assert "stable_id" in problem


def test_variant_bad_rows(tmp_path: Path) -> None:
    path = variants_file(
        tmp_path,
        variant_row(Genename="A", displayName="A X1Y", stable_id="R-HSA-55.x"),
        "too\tfew",
        variant_row(disease="A disease but no gene"),
        variant_row(Genename="B", displayName="B Q2R", stable_id="R-HSA-77"),
        variant_row(Genename="B", displayName="B Q2R again", stable_id="R-HSA-77"),
    )
    result = load_variants(path)
    assert [doc.key for doc in result.documents] == ["R-HSA-77"]
    assert problems(result) == [
        "skipped: disease_variant_ewas_mapping.tsv:2: 'R-HSA-55.x' is not a Reactome stable id "
        "(R-XXX-digits)",
        f"error: disease_variant_ewas_mapping.tsv:3: expected {len(HEADER)} columns as in the "
        "header, found 2",
        "skipped: disease_variant_ewas_mapping.tsv:4: row has neither Genename nor displayName",
        "skipped: disease_variant_ewas_mapping.tsv:6: R-HSA-77 appears again "
        "(first at disease_variant_ewas_mapping.tsv:5)",
    ]


def test_identical_variant_rows_stay_separate_entities(tmp_path: Path) -> None:
    row = variant_row(Genename="F12", displayName="F12 T328K", disease="HAE")
    result = load_variants(variants_file(tmp_path, row, row))
    assert len({doc.key for doc in result.documents}) == 2


def test_empty_variants_file(tmp_path: Path) -> None:
    result = load_variants(write(tmp_path / "disease_variant_ewas_mapping.tsv", ""))
    assert problems(result) == [
        "error: disease_variant_ewas_mapping.tsv:1: the file is empty; expected a header line"
    ]


# --- user guide ---------------------------------------------------------------------------

PAGE = """---
title: Pathway Browser
url: /userguide/pathway-browser
---
import Callout from '../components/Callout'

Intro words about [the browser](</userguide/pathway-browser>) and more.

![Overview picture](/uploads/overview.png)

## Zooming

<Callout type="info">Scroll to **zoom** the diagram.</Callout>
<Video src="/uploads/zoom.mp4" />

```
## not a heading inside code
```

### Searching

Type a gene name in the search box.
"""


def test_userguide_page_is_cleaned_and_split_by_heading(tmp_path: Path) -> None:
    write(tmp_path / "pathway-browser.mdx", PAGE)
    result = load_userguide(tmp_path)
    assert problems(result) == []
    sections = {doc.metadata["section"]: doc for doc in result.documents}
    assert list(sections) == ["Pathway Browser", "Zooming", "Searching"]
    intro = sections["Pathway Browser"].text
    assert intro == "Intro words about the browser and more."
    zooming = sections["Zooming"].text
    assert "Scroll to zoom the diagram." in zooming
    assert "Callout" not in zooming
    assert "Video" not in zooming
    assert "## not a heading inside code" in zooming
    for doc in result.documents:
        assert doc.citation == {
            "url": "/userguide/pathway-browser",
            "display_name": "Pathway Browser",
        }
        assert doc.entity_key == "/userguide/pathway-browser"
        assert "uploads" not in doc.text


def test_userguide_url_from_sources_tsv_then_file_name(tmp_path: Path) -> None:
    write(tmp_path / "userguide_analysis.mdx", "---\ntitle: Analysis\n---\nRun it.\n")
    write(tmp_path / "faq-ids.md", "# Identifiers\nUse UniProt.\n")
    write(tmp_path / "details-panel.md", "# Details\nBelow the diagram.\n")
    write(tmp_path / "index.md", "# User guide\nStart here.\n")
    write(
        tmp_path / "SOURCES.tsv",
        "url_path\tfile\n/userguide/analysis\t\n/documentation/faq/201-identifiers\tfaq-ids.md\n",
    )
    result = load_userguide(tmp_path)
    urls = {doc.origin.split(":")[0]: doc.citation["url"] for doc in result.documents}
    assert urls == {
        "userguide_analysis.mdx": "/userguide/analysis",  # the site path with "/" as "_"
        "faq-ids.md": "/documentation/faq/201-identifiers",  # named in the file column
        "details-panel.md": "/userguide/details-panel",  # from the file name
        "index.md": "/userguide",
    }
    assert {doc.title for doc in result.documents} >= {"Analysis", "Identifiers"}


def test_userguide_html_page(tmp_path: Path) -> None:
    write(
        tmp_path / "userguide_diseases.html",
        "<html><head><title>Diseases</title><script>var x = 1;</script></head><body>"
        "<nav>menu</nav><h1>Diseases</h1><p>Disease pathways are shown in red.</p>"
        "<h2>Variants</h2><p>Each variant links to its reaction.</p></body></html>",
    )
    result = load_userguide(tmp_path)
    texts = {doc.metadata["section"]: doc.text for doc in result.documents}
    assert texts == {
        "Diseases": "Disease pathways are shown in red.",
        "Variants": "Each variant links to its reaction.",
    }
    assert result.documents[0].citation["url"] == "/userguide/diseases"


def test_userguide_bad_pages_are_reported_not_ingested(tmp_path: Path) -> None:
    write(tmp_path / "broken.md", b"# Title\nCaf\xe9 text\n")
    write(tmp_path / "bad-yaml.mdx", "---\ntitle: [unclosed\n---\nBody.\n")
    write(tmp_path / "local.md", "---\nurl: C:\\pages\\local.md\n---\n# X\nText.\n")
    write(tmp_path / "empty.md", "---\ntitle: Nothing\n---\n![only](/uploads/a.png)\n")
    write(tmp_path / "good.md", "# Good\nFine.\n")
    result = load_userguide(tmp_path)
    assert [doc.origin for doc in result.documents] == ["good.md:1"]
    reported = problems(result)
    assert reported[0].startswith("error: bad-yaml.mdx:1: front matter is not valid YAML")
    assert reported[1:] == [
        "error: broken.md:2: not UTF-8 (byte 0xe9 at column 4); re-save the file as UTF-8",
        "skipped: empty.md:1: page has no text after cleaning",
        "skipped: local.md:1: front matter url is neither a site path nor https URL",
    ]


@pytest.mark.parametrize("suffix", [".mdx", ".md", ".html"])
def test_every_page_format_is_read(tmp_path: Path, suffix: str) -> None:
    body = "<h1>T</h1><p>Words.</p>" if suffix == ".html" else "# T\nWords.\n"
    write(tmp_path / f"page{suffix}", body)
    assert [doc.text for doc in load_userguide(tmp_path).documents] == ["Words."]
