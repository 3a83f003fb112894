"""Ingestion into a real Chroma folder with the real offline embeddings."""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings

from pipelines.catalog import bundled_dir
from pipelines.catalog.catalog import COLLECTION_NAMES
from pipelines.core.errors import ConfigurationError, InputError, NotIngestedError
from pipelines.core.settings import Settings, load_settings
from pipelines.index import store
from pipelines.index.ingestion import CollectionSummary, ingest, locate_files
from pipelines.index.keyword_index import KeywordIndex

# Each test ingests the whole sample into a real Chroma folder with the real models (6 to 7 s
# each on 2 cores): a system test, as the marker says.
pytestmark = pytest.mark.slow


@pytest.fixture
def settings() -> Settings:
    return load_settings()


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A writable copy of the sample corpus, so tests can change it between runs."""
    return Path(shutil.copytree(bundled_dir(), tmp_path / "corpus"))


def run(
    settings: Settings, directory: Path, embeddings: Embeddings
) -> dict[str, CollectionSummary]:
    sources = locate_files(directory, COLLECTION_NAMES, required=False)
    summaries = ingest(settings, sources, release="test", embeddings=embeddings)
    return {summary.name: summary for summary in summaries}


def counts(summary: CollectionSummary) -> tuple[int, int, int, int]:
    return summary.added, summary.updated, summary.deleted, summary.unchanged


def test_sample_ingests_every_collection(
    settings: Settings, corpus: Path, minilm: Embeddings
) -> None:
    first = run(settings, corpus, minilm)
    assert set(first) == set(COLLECTION_NAMES)
    assert first["reactome"].documents >= 40
    assert first["disease_variants"].documents >= 15
    assert first["userguide"].documents >= 6
    for summary in first.values():
        assert (summary.skipped, summary.errors, summary.failure) == (0, 0, None)
        assert summary.added == summary.documents

    client = store.open_client(settings)
    reactome = store.active_version(client, "reactome")
    assert reactome is not None
    assert reactome.metadata[store.MODEL] == "all-MiniLM-L6-v2-q8"
    found = reactome.collection.get(ids=["reactome:R-HSA-5682113:0"], include=["metadatas"])
    assert found["metadatas"] is not None
    assert found["metadatas"][0]["st_id"] == "R-HSA-5682113"
    assert found["metadatas"][0]["citable"] is True

    # The real vectors put Tangier disease next to ABCA1.
    vector: Sequence[float] = minilm.embed_query("What goes wrong in Tangier disease?")
    hits = reactome.collection.query(query_embeddings=[vector], n_results=3)
    assert "reactome:R-HSA-5682113:0" in hits["ids"][0]


def test_second_identical_run_changes_nothing(
    settings: Settings, corpus: Path, minilm: Embeddings
) -> None:
    run(settings, corpus, minilm)
    client = store.open_client(settings)
    versions = {name: store.active_version(client, name) for name in COLLECTION_NAMES}
    again = run(settings, corpus, minilm)
    for name, summary in again.items():
        assert counts(summary) == (0, 0, 0, summary.documents)
        current = store.active_version(client, name)
        assert current is not None
        previous = versions[name]
        assert previous is not None
        assert current.name == previous.name  # nothing rewritten at all


def test_changed_summary_is_updated_and_vanished_one_deleted(
    settings: Settings, corpus: Path, minilm: Embeddings
) -> None:
    run(settings, corpus, minilm)
    summation = corpus / "reactome" / "pathway2summation.txt"
    lines = summation.read_text(encoding="utf-8").splitlines()
    abca1 = next(i for i, line in enumerate(lines) if line.startswith("R-HSA-5682113\t"))
    lines[abca1] += " Patients have almost no HDL in their blood."
    removed = lines.pop(-1).split("\t")[0]
    summation.write_text("\n".join(lines) + "\n", encoding="utf-8")

    after = run(settings, corpus, minilm)
    reactome = after["reactome"]
    assert counts(reactome) == (0, 1, 1, reactome.documents - 1)
    assert counts(after["userguide"])[:3] == (0, 0, 0)

    client = store.open_client(settings)
    version = store.active_version(client, "reactome")
    assert version is not None
    got = version.collection.get(where={"st_id": removed})
    assert got["ids"] == []
    text = version.collection.get(ids=["reactome:R-HSA-5682113:0"])["documents"]
    assert text is not None
    assert text[0].endswith("almost no HDL in their blood.")
    # The old version is retired, not deleted: requests already reading it finish on it.
    (old,) = store.stale_versions(client, "reactome", keep=version.name)
    assert isinstance(old.metadata[store.RETIRED], float)
    assert store.keyword_index_dir(settings, old.name).is_dir()
    assert store.remove_retired_versions(client, settings) == []  # too recent to go
    # Once no request can still be reading it, it goes, with its index and its folder.
    later = time.time() + store.retirement_grace_s(settings) + 1
    assert store.remove_retired_versions(client, settings, now=later) == [old.name]
    assert store.stale_versions(client, "reactome", keep=version.name) == []
    assert not store.keyword_index_dir(settings, old.name).exists()
    folders = [p for p in settings.chroma_path.iterdir() if p.is_dir()]
    assert len(folders) == len(store.collection_infos(client))  # one index folder each


class _FailingEmbeddings(Embeddings):
    """Real vectors for a while, then a crash, as a model server dying mid-run would."""

    def __init__(self, inner: Embeddings, calls_before_failure: int) -> None:
        self.inner = inner
        self.calls_left = calls_before_failure

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if self.calls_left <= 0:
            raise RuntimeError("embedding server went away")
        self.calls_left -= 1
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def test_failed_run_leaves_previous_collection_intact(
    settings: Settings, corpus: Path, minilm: Embeddings
) -> None:
    run(settings, corpus, minilm)
    client = store.open_client(settings)
    before = store.active_version(client, "reactome")
    assert before is not None
    before_ids = sorted(before.collection.get()["ids"])

    summation = corpus / "reactome" / "pathway2summation.txt"
    text = summation.read_text(encoding="utf-8").replace("\t", "\tCHANGED ", 1)
    summation.write_text(text, encoding="utf-8")
    sources = locate_files(corpus, ["reactome"], required=True)
    with pytest.raises(RuntimeError, match="went away"):
        ingest(settings, sources, embeddings=_FailingEmbeddings(minilm, 0))

    after = store.active_version(client, "reactome")
    assert after is not None
    assert after.name == before.name
    assert sorted(after.collection.get()["ids"]) == before_ids
    # The half-built version was removed, not left for readers to trip over.
    assert store.stale_versions(client, "reactome", keep=before.name) == []


def test_keyword_index_is_saved_beside_the_collection(
    settings: Settings, corpus: Path, minilm: Embeddings
) -> None:
    run(settings, corpus, minilm)
    version = store.active_version(store.open_client(settings), "disease_variants")
    assert version is not None
    index = KeywordIndex.load(store.keyword_index_dir(settings, version.name))
    best, _ = index.search("IDH1 R132H", k=3)[0]
    got = version.collection.get(ids=[best], include=["metadatas"])
    assert got["metadatas"] is not None
    assert got["metadatas"][0]["gene"] == "IDH1"


def test_querying_with_another_embedding_model_is_refused(
    settings: Settings, corpus: Path, minilm: Embeddings
) -> None:
    client = store.open_client(settings)
    with pytest.raises(NotIngestedError, match="ingest --sample"):
        store.check_embedding_model(client, "reactome", settings)
    run(settings, corpus, minilm)
    assert store.check_embedding_model(client, "reactome", settings).name
    other = load_settings(embeddings="openai:text-embedding-3-small")
    with pytest.raises(ConfigurationError, match="was embedded with 'all-MiniLM-L6-v2-q8'"):
        store.check_embedding_model(client, "reactome", other)


def test_collection_with_unreadable_source_keeps_the_previous_version(
    settings: Settings, corpus: Path, minilm: Embeddings
) -> None:
    run(settings, corpus, minilm)
    variants = corpus / "disease_variants" / "disease_variant_ewas_mapping.tsv"
    variants.write_text("Genename\tdisplayName\nABCA1\tx\n", encoding="utf-8")
    after = run(settings, corpus, minilm)
    failed = after["disease_variants"]
    assert failed.failure is not None
    assert "header lacks column(s)" in failed.failure
    assert "previous collection is kept" in failed.failure
    assert failed.errors == 1
    assert after["reactome"].failure is None
    info = {i.name: i for i in store.collection_infos(store.open_client(settings))}
    assert info["disease_variants"].documents >= 15


def test_locate_sources_explains_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is not a folder"):
        locate_files(tmp_path / "nowhere", ["reactome"], required=False)
    with pytest.raises(InputError, match=r"pathway2summation\.txt"):
        locate_files(tmp_path, ["reactome", "userguide"], required=False)
    (tmp_path / "userguide").mkdir()
    (tmp_path / "userguide" / "a.md").write_text("# A\nText.\n", encoding="utf-8")
    found = locate_files(tmp_path, ["reactome", "userguide"], required=False)
    assert list(found) == ["userguide"]
    with pytest.raises(InputError, match="reactome"):
        locate_files(tmp_path, ["reactome", "userguide"], required=True)
