"""Late chunking with the real model: each sentence's vector pooled from the pass that embeds
its chunk (decision 0045). The pass gives the chunk the vector it always had; a sentence's
pooled vector still reads as that sentence; what the model's truncation cuts off is embedded
alone; and ingestion copies a previous version's sentences only when they were pooled the
same way; an instance that builds its table from the store pools them as the ingesting
machine did."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from pipelines.core.settings import load_settings
from pipelines.index import store
from pipelines.index.chunk_sentences import VECTORS, pooling_model, work_out, work_out_pooled
from pipelines.index.chunk_table import ChunkTable, indexed_text
from pipelines.index.embeddings import MiniLMEmbeddings
from pipelines.index.ingestion import ingest, locate_files
from pipelines.index.passages import RecentVectors
from pipelines.index.version_index import build_from_store
from tests.support.unnamed import Unnamed

SENTENCES = [
    "Glycolysis splits one glucose molecule into two pyruvate molecules in the cytosol.",
    "The Pathway Browser shows the diagram of the chosen pathway in its middle panel.",
    "Calpain cuts p35 into p25, which lets CDK5 phosphorylate tau in neurons.",
]
HEADING = "Energy, software and neurons"


def _spans(text: str, parts: list[str]) -> list[tuple[int, int]]:
    spans = []
    for part in parts:
        start = text.index(part)
        spans.append((start, start + len(part)))
    return spans


def test_the_pooled_pass_gives_each_text_the_vector_it_is_embedded_with(
    minilm: MiniLMEmbeddings,
) -> None:
    texts = [" ".join(SENTENCES), SENTENCES[0], f"{HEADING}\n{SENTENCES[2]}"]

    vectors, pooled = minilm.embed_pooled(texts, [_spans(texts[0], SENTENCES), [], []])

    np.testing.assert_allclose(vectors, minilm.embed_array(texts), atol=1e-6)
    assert [rows.shape for rows in pooled] == [(3, 384), (0, 384), (0, 384)]
    np.testing.assert_allclose(np.linalg.norm(pooled[0], axis=1), 1.0, atol=1e-5)


def test_each_sentence_pooled_in_its_chunk_reads_as_that_sentence(
    minilm: MiniLMEmbeddings,
) -> None:
    chunk = " ".join(SENTENCES)

    _, (pooled,) = minilm.embed_pooled(
        [f"{HEADING}\n{chunk}"], [_spans(f"{HEADING}\n{chunk}", SENTENCES)]
    )

    alone = minilm.embed_array(SENTENCES)
    similarity = pooled @ alone.T
    # Each pooled sentence is nearest its own sentence embedded alone, though not the same
    # vector: it was read in its chunk's context.
    assert similarity.argmax(axis=1).tolist() == [0, 1, 2]
    assert not np.allclose(pooled, alone)


def test_a_sentence_past_the_models_truncation_is_embedded_alone(
    minilm: MiniLMEmbeddings,
) -> None:
    # Far more than the model's 256 tokens: the last sentences are cut off from the pass.
    filler = [
        f"Step {n} of the pathway moves a phosphate group onto substrate {n}." for n in range(60)
    ]
    text = " ".join([*filler, "Finally, ABCA1 carries cholesterol out of the cell."])
    whole = f"{HEADING}\n{text}"

    _, (found,) = work_out_pooled(minilm, [text], [whole])

    (alone,) = work_out(Unnamed(minilm), [text])
    assert found.texts == alone.texts
    assert found.texts[-1] == "Finally, ABCA1 carries cholesterol out of the cell."
    _, (raw,) = minilm.embed_pooled([whole], [[(len(whole) - 10, len(whole))]])
    assert np.isnan(raw).all()  # the pass never reached the end
    np.testing.assert_array_equal(found.vectors[-1], alone.vectors[-1])
    assert not np.array_equal(found.vectors[0], alone.vectors[0])  # pooled, inside the pass
    assert not np.isnan(found.vectors).any()
    assert not np.isnan(found.unit_vectors).any()
    # The sentence the truncation cuts in two is embedded alone too, not pooled from the
    # part the pass read; every sentence before it is pooled.
    shift = len(whole) - len(text)
    alone_rows = [
        index
        for index in range(len(found.texts))
        if np.array_equal(found.vectors[index], alone.vectors[index])
    ]
    cut = alone_rows[0]
    assert alone_rows == list(range(cut, len(found.texts)))
    start, _ = found.spans[cut]
    _, (read,) = minilm.embed_pooled([whole], [[(start + shift, start + shift + 4)]])
    assert not np.isnan(read).any()  # the pass read the cut sentence's start


def test_a_chunk_embedded_as_other_text_is_refused(minilm: MiniLMEmbeddings) -> None:
    with pytest.raises(ValueError, match="heading, then its text"):
        work_out_pooled(minilm, [SENTENCES[0]], [f"{HEADING}\n{SENTENCES[1]}"])


@pytest.mark.slow
@pytest.mark.parametrize("pooling", ["chunk", None])
def test_a_previous_versions_sentences_are_copied_only_if_pooled_the_same_way(
    tmp_path: Path, minilm: MiniLMEmbeddings, pooling: str | None
) -> None:
    from pipelines.catalog import bundled_dir

    corpus = Path(shutil.copytree(bundled_dir() / "userguide", tmp_path / "corpus" / "userguide"))
    settings = load_settings(home=tmp_path / "home", multilingual=False)
    sources = locate_files(corpus.parent, ["userguide"], required=True)
    ingest(settings, sources, embeddings=minilm)
    client = store.open_client(settings)
    first = store.active_version(client, "userguide")
    assert first is not None
    folder = store.keyword_index_dir(settings, first.name)
    # The first version's table as one made another way would be: other vectors, and (when
    # pooling is None) a description from before pooling.
    described = json.loads((folder / "chunk_table.json").read_text())
    assert described["sentences"]["pooling"] == "chunk"
    if pooling is None:
        del described["sentences"]["pooling"]
    (folder / "chunk_table.json").write_text(json.dumps(described))
    vectors = np.fromfile(folder / VECTORS, dtype=np.float32)
    (-vectors).tofile(folder / VECTORS)
    unchanged = ChunkTable.load(folder)
    assert unchanged is not None
    kept_text = unchanged.text(0)
    page = sorted(corpus.glob("*.md"))[-1]
    page.write_text(page.read_text(encoding="utf-8") + "\nOne more line.\n", encoding="utf-8")

    ingest(settings, sources, embeddings=minilm)

    second = store.active_version(client, "userguide")
    assert second is not None
    assert second.name != first.name
    table = ChunkTable.load(store.keyword_index_dir(settings, second.name))
    assert table is not None
    assert table.sentences is not None
    assert table.sentences.pooling == "chunk"
    row = next(row for row in range(len(table)) if table.text(row) == kept_text)
    found = table.sentences.find(kept_text)
    assert found is not None
    text, metadata = table.record(row)
    _, (pooled,) = work_out_pooled(minilm, [text], [indexed_text(text, metadata)])
    if pooling == "chunk":
        # Copied as they were: the same way, so not embedded again.
        np.testing.assert_array_equal(found.vectors, -pooled.vectors)
    else:
        np.testing.assert_array_equal(found.vectors, pooled.vectors)


@pytest.mark.slow
def test_ingestion_through_a_wrapper_pools_as_a_reader_would(
    tmp_path: Path, minilm: MiniLMEmbeddings
) -> None:
    # Readers unwrap their model to pool (pooling_model); ingestion given the same wrapper
    # must too, or the ingesting machine would store vectors embedded alone while instances
    # sharing its store pool theirs.
    from pipelines.catalog import bundled_dir

    settings = load_settings(home=tmp_path / "home", multilingual=False)
    sources = locate_files(bundled_dir(), ["userguide"], required=True)
    wrapped = RecentVectors(minilm)
    assert pooling_model(wrapped) is minilm

    ingest(settings, sources, embeddings=wrapped)

    version = store.active_version(store.open_client(settings), "userguide")
    assert version is not None
    table = ChunkTable.load(store.keyword_index_dir(settings, version.name))
    assert table is not None
    assert table.sentences is not None
    assert table.sentences.pooling == "chunk"
    for row in range(0, len(table), 17):
        text, metadata = table.record(row)
        found = table.sentences.find(text)
        assert found is not None
        _, (pooled,) = work_out_pooled(minilm, [text], [indexed_text(text, metadata)])
        np.testing.assert_allclose(found.vectors, pooled.vectors, atol=1e-6)


def test_a_table_built_from_the_store_holds_the_ingested_tables_sentences(
    sample_home: Path, tmp_path: Path, minilm: MiniLMEmbeddings
) -> None:
    # As an instance sharing only the store builds it (decision 0018), through the recording
    # wrapper its retriever embeds with.
    home = Path(shutil.copytree(sample_home, tmp_path / "copy"))
    settings = load_settings(home=home)
    version = store.active_version(store.open_client(settings), "userguide")
    assert version is not None
    ingested = ChunkTable.load(store.keyword_index_dir(settings, version.name))
    assert ingested is not None
    assert ingested.sentences is not None
    model = pooling_model(RecentVectors(minilm).recording())
    assert model is minilm

    built = build_from_store(
        version.collection, tmp_path / "built", lock=tmp_path / "lock", sentences=lambda: model
    ).table

    assert built is not None
    assert built.sentences is not None
    assert built.sentences.pooling == "chunk"
    for row in range(len(built)):
        text = built.text(row)
        found, wanted = built.sentences.find(text), ingested.sentences.find(text)
        assert found is not None
        assert wanted is not None
        assert found.spans == wanted.spans
        np.testing.assert_allclose(found.vectors, wanted.vectors, atol=1e-5)
    # A table built before it held sentences gets them when next looked up.
    without = tmp_path / "without"
    build_from_store(version.collection, without, lock=tmp_path / "lock")
    assert ChunkTable.load(without).sentences is None  # type: ignore[union-attr]
    again = build_from_store(
        version.collection, without, lock=tmp_path / "lock", sentences=lambda: model
    )
    assert again.table is not None
    assert again.table.sentences is not None
    assert again.table.sentences.pooling == "chunk"
