"""Chunk tables: the retriever's second stage reads text, metadata and vectors from a local
copy written by ingest, which must hold exactly what Chroma holds; exhaustive search over its
vectors must find what Chroma's index finds; and versions without a table keep working."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from pipelines.catalog import bundled_dir
from pipelines.catalog.catalog import COLLECTION_NAMES
from pipelines.core.settings import Settings, load_settings
from pipelines.index import store
from pipelines.index.chunk_table import ChunkTable, ChunkTableWriter
from pipelines.index.ingestion import ingest, locate_files
from pipelines.index.keyword_index import KeywordIndex
from pipelines.pipeline import AnswerPipeline
from pipelines.retrieval.retriever import ReactomeRetriever

QUESTIONS = [
    "What causes Tangier disease, and what does ABCA1 do?",
    "Which IDH1 variants are found in gliomas?",
    "How do I export a pathway diagram?",
    "What does p53 do after DNA damage?",
]


@pytest.fixture
def home(tmp_path: Path, sample_home: Path) -> Path:
    """A copy of the sample home that a test may change."""
    return Path(shutil.copytree(sample_home, tmp_path / "copy"))


def _table_folders(settings: Settings) -> dict[str, Path]:
    client = store.open_client(settings)
    folders = {}
    for name in COLLECTION_NAMES:
        version = store.active_version(client, name)
        assert version is not None
        folders[name] = store.keyword_index_dir(settings, version.name)
    return folders


def _assert_table_matches_chroma(settings: Settings) -> None:
    client = store.open_client(settings)
    for name, folder in _table_folders(settings).items():
        version = store.active_version(client, name)
        assert version is not None
        table = ChunkTable.load(folder)
        assert table is not None, f"{name} has no chunk table"
        ids = KeywordIndex.load(folder).chunk_ids
        assert len(table) == len(ids) == version.collection.count()
        got: Any = version.collection.get(ids=ids, include=["documents", "metadatas", "embeddings"])
        held = {
            chunk_id: (text, metadata, vector)
            for chunk_id, text, metadata, vector in zip(
                got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True
            )
        }
        for chunk_id, record in zip(ids, table.read(range(len(ids))), strict=True):
            text, metadata, vector = held[chunk_id]
            assert record.text == text
            assert record.metadata == metadata
            # Chroma re-normalizes what it stores for cosine search (a last-bit difference).
            np.testing.assert_allclose(record.vector, vector, rtol=0, atol=1e-6)


def _answers(settings: Settings, minilm: Embeddings, **options: Any) -> list[list[tuple[str, str]]]:
    pipeline = AnswerPipeline(settings, embeddings=minilm)
    retriever = ReactomeRetriever(
        settings=settings, embeddings=minilm, expander=pipeline.models[1], **options
    )
    found = []
    for question in QUESTIONS:
        documents = retriever.invoke(question)
        found.append([(str(d.id), d.page_content) for d in documents])
    return found


def test_ingest_writes_a_table_holding_what_chroma_holds(sample_home: Path) -> None:
    _assert_table_matches_chroma(load_settings(home=sample_home))


def test_a_version_from_before_tables_gets_one_on_the_next_ingest(
    home: Path, minilm: Embeddings
) -> None:
    settings = load_settings(home=home)
    for folder in _table_folders(settings).values():
        for name in ("chunk_table.json", "vectors.npy", "records.bin", "record_offsets.npy"):
            (folder / name).unlink()
        assert ChunkTable.load(folder) is None
    versions = set(_table_folders(settings).values())

    summaries = ingest(
        settings,
        locate_files(bundled_dir(), COLLECTION_NAMES, required=True),
        embeddings=minilm,
    )

    assert all(s.added == s.updated == s.deleted == 0 for s in summaries)
    assert set(_table_folders(settings).values()) == versions  # no new version: same content
    _assert_table_matches_chroma(settings)


def test_answers_are_the_same_with_a_table_without_one_and_through_chroma_search(
    home: Path, minilm: Embeddings
) -> None:
    settings = load_settings(home=home)
    with_table = _answers(settings, minilm)
    through_chroma = _answers(settings, minilm, exact_search_max_chunks=0)
    assert all(with_table), "every question finds sources"
    assert through_chroma == with_table

    # A table cut short by a crash (no completion marker) is ignored, not half read.
    for folder in _table_folders(settings).values():
        (folder / "chunk_table.json").unlink()
    assert _answers(settings, minilm) == with_table


def _table(folder: Path, vectors: np.ndarray[Any, Any]) -> ChunkTable:
    with ChunkTableWriter(folder, len(vectors)) as writer:
        half = len(vectors) // 2  # written in two steps, as ingest writes batches
        for rows in (range(half), range(half, len(vectors))):
            if rows:
                texts = [f"chunk {n} é" for n in rows]
                writer.add(texts, [{"n": n} for n in rows], vectors[list(rows)])
    table = ChunkTable.load(folder)
    assert table is not None
    return table


def test_exhaustive_search_finds_the_most_similar_rows_in_order(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(50, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    table = _table(tmp_path, vectors)
    queries = vectors[[3, 17]] + rng.normal(scale=0.05, size=(2, 8)).astype(np.float32)

    found = table.nearest(queries, 5)

    for query, rows in zip(queries, found, strict=True):
        expected = np.argsort(-(vectors @ query), kind="stable")[:5]
        assert rows == expected.tolist()
    assert [rows[0] for rows in found] == [3, 17]
    assert [len(rows) for rows in table.nearest(queries, 80)] == [50, 50]


def test_records_come_back_in_the_order_asked_and_a_table_may_be_empty(tmp_path: Path) -> None:
    vectors = np.eye(4, dtype=np.float32)
    table = _table(tmp_path / "four", vectors)
    records = table.read([2, 0, 3])
    assert [r.text for r in records] == ["chunk 2 é", "chunk 0 é", "chunk 3 é"]
    assert [r.metadata for r in records] == [{"n": 2}, {"n": 0}, {"n": 3}]
    np.testing.assert_array_equal(records[0].vector, vectors[2])

    empty = _table(tmp_path / "empty", np.zeros((0, 4), dtype=np.float32))
    assert len(empty) == 0
    assert empty.nearest(vectors[:2], 3) == [[], []]


def test_a_writer_given_too_few_or_too_many_rows_leaves_no_table(tmp_path: Path) -> None:
    with (
        pytest.raises(ValueError, match="3 rows got 1"),
        ChunkTableWriter(tmp_path / "short", 3) as writer,
    ):
        writer.add(["a"], [{}], np.ones((1, 4)))
    assert ChunkTable.load(tmp_path / "short") is None
    with (
        pytest.raises(ValueError, match="1 rows was given 2"),
        ChunkTableWriter(tmp_path / "long", 1) as writer,
    ):
        writer.add(["a", "b"], [{}, {}], np.ones((2, 4)))
    assert ChunkTable.load(tmp_path / "long") is None
