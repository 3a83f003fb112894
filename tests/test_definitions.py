"""The collection definitions in collections/ agree with what the code ingests and cites."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines import store
from pipelines.definitions import load_definitions
from pipelines.errors import ConfigurationError
from pipelines.ingest import locate_sources, sample_dir
from pipelines.loaders.reactome import PATHWAYS_FILE, RELATION_FILE, SUMMATION_FILE
from pipelines.loaders.userguide import PAGE_SUFFIXES, SOURCES_FILE
from pipelines.loaders.variants import VARIANTS_FILE


def test_one_definition_per_collection() -> None:
    definitions = load_definitions(sample_dir())
    assert tuple(definitions) == tuple(sorted(store.COLLECTION_NAMES))
    assert all(len(d.description) > 40 for d in definitions.values())


def test_definitions_name_the_files_the_loaders_read() -> None:
    definitions = load_definitions(sample_dir())
    assert definitions["reactome"].files == (SUMMATION_FILE, PATHWAYS_FILE, RELATION_FILE)
    assert definitions["disease_variants"].files == (VARIANTS_FILE,)
    page_patterns = {f"*{suffix}" for suffix in PAGE_SUFFIXES}
    assert set(definitions["userguide"].files) - {SOURCES_FILE} <= page_patterns


def test_sample_documents_are_cited_as_their_definition_says() -> None:
    definitions = load_definitions(sample_dir())
    sources = locate_sources(sample_dir(), store.COLLECTION_NAMES, required=True)
    for name, collection_sources in sources.items():
        loaded = collection_sources.load()
        assert loaded.problems == []
        cited = {key for doc in loaded.documents for key in doc.citation if key != "display_name"}
        assert cited == {definitions[name].cited_as}, name


def test_sample_keeps_the_entities_the_demo_relies_on() -> None:
    sources = locate_sources(sample_dir(), store.COLLECTION_NAMES, required=True)
    reactome = {doc.key for doc in sources["reactome"].load().documents}
    assert {"R-HSA-5682113", "R-HSA-8862803"} <= reactome  # Tangier disease, CDK5/Alzheimer's
    variants = sources["disease_variants"].load().documents
    assert any(doc.citation.get("st_id") == "R-HSA-5682201" for doc in variants)  # ABCA1 W590S
    assert any(not doc.citation for doc in variants), "one context-only variant"
    assert len({doc.entity_key for doc in sources["userguide"].load().documents}) >= 6


def test_broken_definition_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "reactome").mkdir()
    (tmp_path / "reactome" / "collection.toml").write_text('name = "reactome"\n', encoding="utf-8")
    with pytest.raises(ConfigurationError, match="not a valid collection definition"):
        load_definitions(tmp_path)
