"""Each chunk's sentences, split and embedded at ingest and kept with its chunk table: what a
reader finds there has the same spans, texts and units it would work out itself (so a quote
never depends on which way it came), for a source of one chunk or of several joined, and the
vectors ingestion made: with a model that pools (ours), each sentence's from its chunk's own
pass (decision 0045), otherwise the same vectors too; a table from before sentences were
stored still loads, and the next ingest adds them; and an answer over an ingested corpus
embeds no retrieved sentence."""

from __future__ import annotations

import json
import shutil
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from callbacks.events import DoneEvent
from pipelines.catalog import bundled_dir
from pipelines.catalog.catalog import COLLECTION_NAMES
from pipelines.core.settings import load_settings
from pipelines.index import store
from pipelines.index.chunk_sentences import (
    FILES,
    joinable,
    unit_rows,
    work_out,
    work_out_pooled,
)
from pipelines.index.chunk_table import ChunkTable, ChunkTableWriter, indexed_text
from pipelines.index.ingestion import ingest, locate_files
from pipelines.index.passages import PassageSentences, RecentVectors, SentenceBank
from pipelines.index.sentences import clean_sentence, sentence_spans
from pipelines.pipeline import AnswerPipeline
from tests.support.unnamed import Unnamed

CHUNKS = [
    "ABCA1 moves cholesterol and phospholipids out of cells onto apolipoprotein A-I "
    "(Oram et al. 2000). This transfer forms the nascent HDL particles found in plasma. "
    "Loss of both copies of ABCA1 causes Tangier disease (Brooks-Wilson et al. 1999).",
    "Neurons keep CDK5 at the membrane bound to its activator p35.\n\n"
    "In Alzheimer's disease, calpain cuts p35 into the smaller p25, which leaves the "
    "membrane for the nucleus. There, CDK5 bound to p25 can reach and phosphorylate tau, "
    "lamin A and PPARG. However, this happens only in some neurons of the cortex today.",
    "The Pathway Browser has three panels:\n- the hierarchy of pathways on the left side\n"
    "- the diagram of the chosen pathway in the middle\n<p>Details of the selected "
    "reaction appear in the panel below the diagram of each pathway.",
    "Glycolysis splits one glucose molecule into two pyruvate molecules in the cytosol.",
    "(Smith 2001).",
]


class CountingEmbeddings(Embeddings):
    """Vectors from word hashes (deterministic, no model), counting the texts it embeds; it
    has a name, as our models do, so its vectors can be stored."""

    name = "word-hash-test"

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.embedded += texts
        vectors = []
        for text in texts:
            vector = np.zeros(16)
            for word in text.lower().split():
                vector[zlib.crc32(word.encode()) % 16] += 1.0
            vectors.append(vector.tolist())
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def _same(found: PassageSentences, expected: PassageSentences) -> None:
    _same_sentences(found, expected)
    np.testing.assert_array_equal(found.vectors, expected.vectors)
    np.testing.assert_array_equal(found.unit_vectors, expected.unit_vectors)


def _same_sentences(found: PassageSentences, expected: PassageSentences) -> None:
    """The same sentences and units, whatever their vectors."""
    assert found.spans == expected.spans
    assert found.texts == expected.texts
    assert found.paragraphs == expected.paragraphs
    assert found.units == expected.units
    assert found.vectors.shape == expected.vectors.shape
    assert found.unit_vectors.shape == expected.unit_vectors.shape


def _write(
    folder: Path, texts: Sequence[str], embeddings: Embeddings | None, model: str | None
) -> ChunkTable:
    with ChunkTableWriter(folder, len(texts), sentences_model=model) as writer:
        half = len(texts) // 2  # in two steps, as ingest writes batches
        for rows in (range(half), range(half, len(texts))):
            part = [texts[row] for row in rows]
            writer.add(
                part,
                [{"row": row} for row in rows],
                np.eye(len(texts), 4, dtype=np.float32)[list(rows)],
                work_out(embeddings, part) if model else None,
            )
    table = ChunkTable.load(folder)
    assert table is not None
    return table


def test_the_sentences_are_the_splitters_spans_and_cleaned_texts() -> None:
    for text, found in zip(CHUNKS, work_out(None, CHUNKS), strict=True):
        assert list(found.spans) == sentence_spans(text)
        assert list(found.texts) == [clean_sentence(text[s:e]) for s, e in sentence_spans(text)]
    cdk5 = work_out(None, [CHUNKS[1]])[0]
    assert cdk5.paragraphs == (0, 1, 1, 1)
    # "There, ..." is quoted with the sentence it leans on; "However, this ..." with both.
    assert (1, 2) in cdk5.units
    assert (1, 2, 3) in cdk5.units
    assert all(0 not in unit or unit == (0,) for unit in cdk5.units)  # not across paragraphs


def test_a_table_gives_back_each_chunks_sentences_as_worked_out(tmp_path: Path) -> None:
    embeddings = CountingEmbeddings()
    table = _write(tmp_path, CHUNKS, embeddings, embeddings.name)
    assert table.format == 2
    assert table.sentences is not None
    assert table.sentences.model == "word-hash-test"
    expected = work_out(embeddings, CHUNKS)
    for text, passage in zip(CHUNKS, expected, strict=True):
        found = table.sentences.find(text)
        assert found is not None
        _same(found, passage)
    assert table.sentences.find("A text no chunk has.") is None
    # The chunk table itself reads as it did.
    assert [record.text for record in table.read([3, 0])] == [CHUNKS[3], CHUNKS[0]]


def test_the_bank_finds_stored_sentences_and_embeds_nothing(tmp_path: Path) -> None:
    embeddings = CountingEmbeddings()
    table = _write(tmp_path, CHUNKS, embeddings, embeddings.name)
    expected = work_out(embeddings, CHUNKS)
    embeddings.embedded.clear()
    bank = SentenceBank(embeddings)

    found = bank.many(CHUNKS)

    assert embeddings.embedded == []
    assert bank.counts == {"kept": 0, "stored": len(CHUNKS), "computed": 0}
    for passage, wanted in zip(found, expected, strict=True):
        _same(passage, wanted)
    bank.many(CHUNKS[:2])
    assert bank.counts["kept"] == 2
    del table


def test_a_source_of_several_chunks_is_assembled_from_theirs(tmp_path: Path) -> None:
    embeddings = CountingEmbeddings()
    table = _write(tmp_path, CHUNKS, embeddings, embeddings.name)
    # The retriever joins a source's chunks with a blank line; the second chunk holds one of
    # its own, so the passage's blank-line pieces are not its chunks one to one.
    sources = ["\n\n".join(CHUNKS[:2]), "\n\n".join([CHUNKS[1], CHUNKS[2], CHUNKS[0]])]
    expected = work_out(CountingEmbeddings(), sources)
    embeddings.embedded.clear()
    bank = SentenceBank(embeddings)

    found = bank.many(sources)

    assert embeddings.embedded == []
    assert bank.counts == {"kept": 0, "stored": 2, "computed": 0}
    for passage, wanted in zip(found, expected, strict=True):
        _same(passage, wanted)
    # An antecedent never comes from the chunk before.
    assert all(
        len({found[0].paragraphs[position] for position in unit}) == 1 for unit in found[0].units
    )
    del table


def test_what_is_not_stored_is_worked_out_the_same_way(tmp_path: Path) -> None:
    embeddings = CountingEmbeddings()
    table = _write(tmp_path, CHUNKS[:2], embeddings, embeddings.name)
    # A chunk no table holds, and a join that could read differently from its parts (a
    # bullet left at the end of one part would take the blank line as its space).
    ending_in_a_bullet = "Steps to take today are listed below in order:\n-"
    assert not joinable([ending_in_a_bullet, CHUNKS[0]])
    unknown = "A chunk that no table holds: pyruvate kinase makes pyruvate and ATP."
    texts = [unknown, "\n\n".join([CHUNKS[0], unknown]), f"{CHUNKS[0]}\n\n-"]
    bank = SentenceBank(embeddings)

    found = bank.many(texts)

    assert bank.counts == {"kept": 0, "stored": 0, "computed": 3}
    for passage, wanted in zip(found, work_out(CountingEmbeddings(), texts), strict=True):
        _same(passage, wanted)
    del table


def test_another_models_sentences_are_not_used(tmp_path: Path) -> None:
    texts = [f"{chunk} Written for this test alone." for chunk in CHUNKS[:2]]
    table = _write(tmp_path, texts, CountingEmbeddings(), "another-model")
    for bank in (SentenceBank(CountingEmbeddings()), SentenceBank(Unnamed(CountingEmbeddings()))):
        bank.many(texts)
        assert bank.counts == {"kept": 0, "stored": 0, "computed": 2}
    # Told the vectors are its model's, a bank uses them.
    trusting = SentenceBank(CountingEmbeddings(), model="another-model")
    trusting.many(texts)
    assert trusting.counts == {"kept": 0, "stored": 2, "computed": 0}
    del table


def test_a_table_from_before_sentences_loads_and_its_sentences_are_worked_out(
    tmp_path: Path,
) -> None:
    table = _write(tmp_path, CHUNKS, None, None)
    assert table.sentences is None
    # As a format 1 table was described, before the format had a number.
    (tmp_path / "chunk_table.json").write_text(json.dumps({"rows": len(CHUNKS)}))
    old = ChunkTable.load(tmp_path)
    assert old is not None
    assert (old.format, old.sentences) == (1, None)
    assert [record.text for record in old.read([1])] == [CHUNKS[1]]
    embeddings = CountingEmbeddings()
    bank = SentenceBank(embeddings)

    found = bank.many(CHUNKS[:2])

    assert bank.counts["computed"] == 2
    for passage, wanted in zip(found, work_out(CountingEmbeddings(), CHUNKS[:2]), strict=True):
        _same(passage, wanted)
    # A later format's sentences are not read as this one's: the table loads without them.
    described = {"format": 3, "rows": len(CHUNKS), "sentences": {"model": "word-hash-test"}}
    (tmp_path / "chunk_table.json").write_text(json.dumps(described))
    later = ChunkTable.load(tmp_path)
    assert later is not None
    assert later.sentences is None


def test_the_question_the_retriever_embedded_is_not_embedded_again() -> None:
    model = CountingEmbeddings()
    recent = RecentVectors(model)
    retriever_view = recent.recording()
    retriever_view.embed_documents(["What does ABCA1 do?", "ABCA1"])
    retriever_view.embed_documents(["What does ABCA1 do?"])
    # The retriever's own work is what it was: it embeds whatever it is asked to.
    assert model.embedded == ["What does ABCA1 do?", "ABCA1", "What does ABCA1 do?"]
    bank = SentenceBank(recent)

    vector = bank.question_vector("What does ABCA1 do?")

    assert len(model.embedded) == 3
    assert vector is not None
    np.testing.assert_array_equal(
        vector, unit_rows(CountingEmbeddings().embed_documents(["What does ABCA1 do?"]))[0]
    )
    assert bank.question_vector("Another question entirely?") is not None
    assert model.embedded[3:] == ["Another question entirely?"]


def _sample_folders(home: Path) -> list[Path]:
    settings = load_settings(home=home)
    client = store.open_client(settings)
    folders = []
    for name in COLLECTION_NAMES:
        version = store.active_version(client, name)
        assert version is not None
        folders.append(store.keyword_index_dir(settings, version.name))
    return folders


def _pooled(minilm: Embeddings, table: ChunkTable, rows: Sequence[int]) -> list[PassageSentences]:
    """The rows' sentences as ingestion pools them: from the pass over each chunk's heading
    and text."""
    records = [table.record(row) for row in rows]
    embedded_as = [indexed_text(text, metadata) for text, metadata in records]
    return work_out_pooled(minilm, [text for text, _ in records], embedded_as)[1]


def test_stored_sentences_are_pooled_from_their_chunks_pass_with_the_real_model(
    sample_home: Path, minilm: Embeddings
) -> None:
    tables = [ChunkTable.load(folder) for folder in _sample_folders(sample_home)]
    texts: list[str] = []
    pooled: list[PassageSentences] = []
    for table in tables:
        assert table is not None
        assert table.sentences is not None
        assert table.sentences.model == "all-MiniLM-L6-v2-q8"
        assert table.sentences.pooling == "chunk"
        rows = range(min(len(table), 12))
        texts += [table.text(row) for row in rows]
        pooled += _pooled(minilm, table, rows)
    joined = ["\n\n".join(texts[i : i + 2]) for i in range(0, len(texts) - 1, 5)]
    bank = SentenceBank(minilm)

    found = bank.many([*texts, *joined])

    assert bank.counts == {"kept": 0, "stored": len(texts) + len(joined), "computed": 0}
    for passage, wanted in zip(found[: len(texts)], pooled, strict=True):
        _same(passage, wanted)
    # A joined source reads as worked out whole, with its chunks' own vectors.
    alone = work_out(Unnamed(minilm), [*texts, *joined])
    for passage, wanted in zip(found, alone, strict=True):
        _same_sentences(passage, wanted)
    for number, passage in enumerate(found[len(texts) :]):
        first, second = pooled[5 * number], pooled[5 * number + 1]
        np.testing.assert_array_equal(passage.vectors, np.vstack([first.vectors, second.vectors]))
    # Pooled in context, not the sentences embedded alone: the reader falls back on those.
    assert not any(
        np.array_equal(a.vectors, b.vectors) for a, b in zip(found, alone, strict=True) if a.texts
    )


def _answer(pipeline: AnswerPipeline, question: str) -> Any:
    done = None
    for event in pipeline.stream(question):
        done = event
    assert isinstance(done, DoneEvent)
    return done.data


@pytest.mark.slow
def test_an_answer_embeds_no_retrieved_sentence(sample_home: Path, minilm: Embeddings) -> None:
    settings = load_settings(home=sample_home, event_logs=False)
    stored = AnswerPipeline(settings, embeddings=minilm)
    # The same model under no name: it cannot trust stored vectors, so it works out every
    # passage itself, as a pipeline did before ingestion stored sentences.
    computed = AnswerPipeline(settings, embeddings=Unnamed(minilm))
    questions = [
        "What causes Tangier disease, and what does ABCA1 do?",
        "What does p53 do after DNA damage?",
        "Which IDH1 variants are found in gliomas?",
        "What does CDK5 phosphorylate in Alzheimer's disease?",
    ]
    for question in questions:
        answer = _answer(stored, question)
        assert answer.state == "answered"
        assert answer.evidence, question
        assert stored.sentence_bank.counts["computed"] == 0, question
        # Worked out, the passages read other vectors, and the answer still stands on them.
        fallback = _answer(computed, question)
        assert fallback.state == "answered"
        assert fallback.evidence, question
    counts = stored.sentence_bank.counts
    assert counts["stored"] > 0
    assert computed.sentence_bank.counts["stored"] == 0
    assert computed.sentence_bank.counts["computed"] > 0
    # The question's vector was the retriever's: the answer model embedded nothing.
    assert stored.recent_vectors.hits >= len(questions)


@pytest.mark.slow
def test_the_next_ingest_gives_a_version_from_before_its_sentences(
    tmp_path: Path, sample_home: Path, minilm: Embeddings
) -> None:
    home = Path(shutil.copytree(sample_home, tmp_path / "copy"))
    folders = _sample_folders(home)
    for folder in folders:
        described = json.loads((folder / "chunk_table.json").read_text())
        (folder / "chunk_table.json").write_text(json.dumps({"rows": described["rows"]}))
        for name in FILES:
            (folder / name).unlink()
        table = ChunkTable.load(folder)
        assert table is not None
        assert table.sentences is None

    summaries = ingest(
        load_settings(home=home),
        locate_files(bundled_dir(), COLLECTION_NAMES, required=True),
        embeddings=minilm,
    )

    assert all(s.added == s.updated == s.deleted == 0 for s in summaries)
    assert _sample_folders(home) == folders  # the same versions, now with sentences
    for folder in folders:
        table = ChunkTable.load(folder)
        assert table is not None
        assert table.sentences is not None
        assert table.sentences.pooling == "chunk"
        text = table.text(0)
        found = table.sentences.find(text)
        assert found is not None
        _same(found, _pooled(minilm, table, [0])[0])
