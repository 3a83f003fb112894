"""The collection definitions in collections/ agree with what the code ingests and cites."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.documents import Document

from pipelines.catalog import bundled_dir
from pipelines.catalog.catalog import (
    COLLECTION_NAMES,
    catalog_for,
    catalog_from_path,
    load_definitions,
)
from pipelines.catalog.loaders.reactome import PATHWAYS_FILE, RELATION_FILE, SUMMATION_FILE
from pipelines.catalog.loaders.userguide import PAGE_SUFFIXES, SOURCES_FILE
from pipelines.catalog.loaders.variants import VARIANTS_FILE
from pipelines.citations.sources import number_sources
from pipelines.core.settings import load_settings
from pipelines.index.ingestion import chunk_documents, locate_files, sample_files


def test_one_definition_per_collection() -> None:
    definitions = load_definitions(bundled_dir())
    assert tuple(sorted(definitions)) == tuple(sorted(COLLECTION_NAMES))
    assert all(len(d.description) > 40 for d in definitions.values())
    # Declared order, not the folders' alphabetical order, is the order of ingest and listing.
    assert COLLECTION_NAMES == ("reactome", "disease_variants", "userguide")


def test_definitions_name_the_files_the_loaders_read() -> None:
    definitions = load_definitions(bundled_dir())
    reactome = {spec.role: spec for spec in definitions["reactome"].files}
    assert [spec.name for spec in reactome.values()] == [
        SUMMATION_FILE,
        PATHWAYS_FILE,
        RELATION_FILE,
    ]
    assert [spec.required for spec in reactome.values()] == [True, False, False]
    assert [spec.name for spec in definitions["disease_variants"].files] == [VARIANTS_FILE]
    (pages,) = definitions["userguide"].files
    assert set(pages.patterns) == {f"*{suffix}" for suffix in PAGE_SUFFIXES}
    assert SOURCES_FILE in pages.about


def test_sample_documents_are_cited_as_their_definition_says() -> None:
    definitions = load_definitions(bundled_dir())
    sources = locate_files(bundled_dir(), COLLECTION_NAMES, required=True)
    for name, collection_sources in sources.items():
        loaded = collection_sources.load()
        assert loaded.problems == []
        cited = {key for doc in loaded.documents for key in doc.citation if key != "display_name"}
        assert cited == {definitions[name].cited_as}, name


def test_sample_keeps_the_entities_the_demo_relies_on() -> None:
    sources = locate_files(bundled_dir(), COLLECTION_NAMES, required=True)
    reactome = {doc.key for doc in sources["reactome"].load().documents}
    assert {"R-HSA-5682113", "R-HSA-8862803"} <= reactome  # Tangier disease, CDK5/Alzheimer's
    variants = sources["disease_variants"].load().documents
    assert any(doc.citation.get("st_id") == "R-HSA-5682201" for doc in variants)  # ABCA1 W590S
    assert any(not doc.citation for doc in variants), "one context-only variant"
    assert len({doc.entity_key for doc in sources["userguide"].load().documents}) >= 6


def copy_collection(folder: Path, shipped: str, name: str, **changes: str) -> Path:
    """The bundled collection ``shipped`` (declaration and sample) under ``folder/name``, its
    declaration renamed and each ``key = value`` of ``changes`` set."""
    target = folder / name
    target.mkdir(parents=True)
    for path in (bundled_dir() / shipped).iterdir():
        (target / path.name).write_bytes(path.read_bytes())
    declared = (target / "collection.toml").read_text(encoding="utf-8")
    declared = declared.replace(f'name = "{shipped}"', f'name = "{name}"')
    for key, value in changes.items():
        declared = re.sub(rf"(?m)^{key} = .*$", f'{key} = "{value}"', declared)
    (target / "collection.toml").write_text(declared, encoding="utf-8")
    return target


def test_a_collection_declared_context_only_is_never_cited(tmp_path: Path) -> None:
    """``cited_as`` is enforced at ingestion, whatever the loader puts in a citation."""
    copy_collection(tmp_path, "disease_variants", "variants_context", cited_as="context")
    catalog = catalog_from_path(str(tmp_path))
    assert catalog["variants_context"].cited_as == "context"
    sources = sample_files(["variants_context"], required=True, catalog=catalog)
    documents = sources["variants_context"].load().documents
    assert documents
    assert all(doc.citation == {} for doc in documents)
    # The same loader under the shipped declaration cites by stable id.
    shipped = sample_files(["disease_variants"], required=True)["disease_variants"].load()
    assert any("st_id" in doc.citation for doc in shipped.documents)


def test_cited_as_holds_whatever_the_loader_puts_in_metadata(tmp_path: Path) -> None:
    """The user-guide loader puts each page's url in its metadata too; a collection that
    reads pages but is declared context-only still never cites them, url citations on."""
    copy_collection(tmp_path, "userguide", "pages_context", cited_as="context")
    catalog = catalog_from_path(str(tmp_path))
    sources = sample_files(["pages_context"], required=True, catalog=catalog)
    chunks = chunk_documents("pages_context", sources["pages_context"].load().documents)
    assert chunks
    assert not any("url" in chunk.metadata or "st_id" in chunk.metadata for chunk in chunks)
    documents = [Document(chunk.text, metadata=chunk.metadata) for chunk in chunks]
    numbered, context = number_sources(documents, cite_urls=True)
    assert numbered == []
    assert len(context) == len(documents)


def test_the_environment_is_read_as_the_settings_read_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy_collection(tmp_path, "disease_variants", "variants_copy")
    # pydantic-settings matches variable names whatever their case; so does the catalog.
    monkeypatch.setenv("reactome_answers_collections_path", str(tmp_path))
    assert load_settings().collections_path == str(tmp_path)
    assert "variants_copy" in catalog_for().names


def test_importing_the_code_reads_no_collection_declaration() -> None:
    """Importing any layer reads no collection.toml and runs no loader: a declaration that
    cannot be read fails the command that needs it, not every import (a broken extra
    collection must not stop `reactome-answers --help` or `logs list`)."""
    probe = (
        "import app.cli, app.http.factory, pipelines.pipeline, pipelines.index.store, "
        "pipelines.index.ingestion, pipelines.retrieval, callbacks.replay\n"
        "from pipelines.catalog import catalog\n"
        "print(catalog._catalog.cache_info().misses, catalog._catalog_for_path.cache_info().misses)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=300
    )
    assert done.stdout.split() == ["0", "0"], done.stderr
