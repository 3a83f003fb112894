"""A fourth collection declared in a folder of its own, outside the project: ingested, listed,
searched by name, routed to by its hints and cited, with no change to the project's code.

The glossary lives in a temporary folder (its ``collection.toml`` and sample) with a loader
module in another temporary folder on ``PYTHONPATH``: exactly what a newcomer adds."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.support.cli import cli
from tests.support.servers import serve_command

pytestmark = pytest.mark.slow  # the installed command with a fourth collection declared, per test

GLOSSARY_TOML = """\
name = "glossary"
label = "the glossary"
description = "Short definitions of terms in Reactome's summaries, each tied to its pathway."
order = 40
loader = "glossary_loader:load_terms"
cited_as = "st_id"

[files.terms]
name = "terms.tsv"
required = true
about = "term, the stable id of the pathway that explains it, and a definition"

[routing]
prompt = "what a term means"
hints = ['\\bglossary\\b', '\\bwhat (?:is|does) the term\\b']
"""

GLOSSARY_LOADER = """\
from pathlib import Path

from pipelines.catalog.loaders import LoadResult, LoadedDocument


def load_terms(terms: Path) -> LoadResult:
    result = LoadResult(files={terms.name: "sample"})
    for number, line in enumerate(terms.read_text(encoding="utf-8").splitlines(), start=1):
        term, st_id, definition = line.split("\\t")
        result.documents.append(
            LoadedDocument(
                key=f"term:{term}",
                title=f"Glossary: {term}",
                text=definition,
                origin=f"{terms.name}:{number}",
                citation={"st_id": st_id, "display_name": f"Glossary: {term}"},
            )
        )
    return result
"""

# Real stable ids and names of pathways in the sample; the definitions are our own words.
TERMS = [
    (
        "Tangier disease",
        "R-HSA-5682113",
        "In the glossary, Tangier disease is the inherited lack of HDL cholesterol that follows "
        "from losing both working copies of the ABCA1 transporter.",
    ),
    (
        "p25",
        "R-HSA-8862803",
        "In the glossary, p25 is the truncated fragment of the CDK5 activator p35 that keeps "
        "CDK5 switched on in stressed neurons.",
    ),
]


@pytest.fixture
def glossary(tmp_path: Path) -> dict[str, str]:
    """The environment that declares the glossary: its folder and its loader's folder."""
    folder = tmp_path / "more-collections" / "glossary"
    folder.mkdir(parents=True)
    (folder / "collection.toml").write_text(GLOSSARY_TOML, encoding="utf-8")
    (folder / "terms.tsv").write_text(
        "".join("\t".join(row) + "\n" for row in TERMS), encoding="utf-8"
    )
    loaders = tmp_path / "loaders"
    loaders.mkdir()
    (loaders / "glossary_loader.py").write_text(GLOSSARY_LOADER, encoding="utf-8")
    return {
        "REACTOME_ANSWERS_COLLECTIONS_PATH": str(folder.parent),
        "PYTHONPATH": os.pathsep.join([str(loaders), os.environ.get("PYTHONPATH", "")]),
    }


def run(home: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return cli(home, *args, env=env, timeout_s=300)


def cited(result: dict[str, object]) -> list[tuple[str, str]]:
    references = result["references"]
    assert isinstance(references, list)
    return [(ref["collection"], ref["st_id"]) for ref in references]


def test_a_declared_fourth_collection_works_everywhere(
    tmp_path: Path, glossary: dict[str, str]
) -> None:
    home = tmp_path / "home"
    ingested = run(home, glossary, "ingest", "--sample", "--json")
    assert ingested.returncode == 0, ingested.stderr
    summary = json.loads(ingested.stdout)
    assert list(summary) == ["reactome", "disease_variants", "userguide", "glossary"]
    assert summary["glossary"]["documents"] == len(TERMS)

    listed = json.loads(run(home, glossary, "collections", "--json").stdout)
    assert [info["name"] for info in listed][-1] == "glossary"

    # Named explicitly: only the glossary is searched, and its entries are cited.
    asked = run(home, glossary, "ask", "What is Tangier disease?", "--collections", "glossary",
                "--json")  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    answer = json.loads(asked.stdout)
    assert answer["state"] == "answered"
    assert cited(answer)
    assert {collection for collection, _ in cited(answer)} == {"glossary"}
    assert ("glossary", "R-HSA-5682113") in cited(answer)

    # Routed by its hints, beside the default collections; the glossary entry is cited.
    routed = json.loads(run(home, glossary, "ask", "What does the glossary say p25 is?",
                            "--json").stdout)  # fmt: skip
    assert ("glossary", "R-HSA-8862803") in cited(routed)
    # A question its hints do not match is not sent to it.
    plain = json.loads(run(home, glossary, "ask", "What does ABCA1 do?", "--json").stdout)
    assert plain["state"] == "answered"
    assert "glossary" not in {collection for collection, _ in cited(plain)}

    with serve_command(home, "--no-log", env=glossary) as served:
        names = [c["name"] for c in httpx.get(f"{served.base}/v1/collections", timeout=30).json()]
        assert "glossary" in names
        response = httpx.post(
            f"{served.base}/v1/answer",
            json={"question": "What is p25?", "collections": ["glossary"]},
            timeout=60,
        )
        assert response.status_code == 200, response.text
        assert ("glossary", "R-HSA-8862803") in cited(response.json())
        unknown = httpx.post(
            f"{served.base}/v1/answer",
            json={"question": "What is p25?", "collections": ["glossaries"]},
            timeout=60,
        )
        assert unknown.status_code == 422
        assert "collections" in unknown.json()["error"]["message"]
        schema = httpx.get(f"{served.base}/openapi.json", timeout=30).text
        assert '"glossary"' in schema  # the OpenAPI document lists the declared names


def test_without_the_declaration_the_glossary_is_unknown(tmp_path: Path) -> None:
    result = run(tmp_path / "home", {}, "ingest", "--sample", "--collections", "glossary")
    assert result.returncode == 2
    assert "unknown collection(s) glossary" in result.stderr
    assert "choose from reactome, disease_variants, userguide" in result.stderr


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (lambda toml: toml.replace("glossary_loader:load_terms", "no_such_module:load"), "loader"),
        (lambda toml: toml.replace("glossary_loader:load_terms", "glossary_loader:nope"), "loader"),
        (lambda toml: toml.replace('cited_as = "st_id"', 'cited_as = "doi"'), "cited_as"),
        (lambda toml: toml.replace('name = "terms.tsv"', "name = 3"), "files.terms.name"),
        (lambda toml: toml.replace("required = true", "required = 1"), "files.terms.required"),
        (lambda toml: toml.replace("[routing]", "[routing]\nhints_extra = []"), "hints_extra"),
        (lambda toml: toml.replace("'\\bglossary\\b'", "'(unclosed'"), "routing.hints"),
        (lambda toml: toml.replace('name = "glossary"', 'name = "other"'), "name"),
        (lambda toml: toml.replace('label = "the glossary"\n', ""), "label"),
        (lambda toml: toml + "\n[routing\n", "cannot be read as TOML"),
    ],
    ids=[
        "unknown-module",
        "unknown-function",
        "cited-as",
        "file-name",
        "required-flag",
        "unknown-key",
        "bad-regex",
        "folder-name",
        "missing-label",
        "not-toml",
    ],
)
def test_a_malformed_declaration_is_one_line_naming_the_file_and_the_key(
    tmp_path: Path, glossary: dict[str, str], change: object, key: str
) -> None:
    toml = Path(glossary["REACTOME_ANSWERS_COLLECTIONS_PATH"]) / "glossary" / "collection.toml"
    assert callable(change)
    toml.write_text(change(GLOSSARY_TOML), encoding="utf-8")
    result = run(tmp_path / "home", glossary, "ingest", "--sample")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(toml) in lines[0]
    assert key in lines[0]
    assert "Traceback" not in result.stderr


def test_a_collection_declared_twice_is_refused(tmp_path: Path, glossary: dict[str, str]) -> None:
    second = tmp_path / "again"
    (second / "glossary").mkdir(parents=True)
    (second / "glossary" / "collection.toml").write_text(GLOSSARY_TOML, encoding="utf-8")
    env = {
        **glossary,
        "REACTOME_ANSWERS_COLLECTIONS_PATH": os.pathsep.join(
            [glossary["REACTOME_ANSWERS_COLLECTIONS_PATH"], str(second)]
        ),
    }
    result = run(tmp_path / "home", env, "collections")
    assert result.returncode == 1
    assert "declared twice" in result.stderr


def test_a_loader_that_fails_to_import_is_one_line_naming_the_file(
    tmp_path: Path, glossary: dict[str, str]
) -> None:
    loader = Path(glossary["PYTHONPATH"].split(os.pathsep)[0]) / "glossary_loader.py"
    loader.write_text("def load_terms(terms:\n", encoding="utf-8")  # a syntax error
    result = run(tmp_path / "home", glossary, "collections")
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert "glossary/collection.toml: loader:" in line
    assert "SyntaxError" in line
