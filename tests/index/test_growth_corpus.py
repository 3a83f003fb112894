"""The growth benchmark's corpus: copies of the reaction summaries are new entities (ids of
their own, never a real Reactome id) whose vectors are their originals', not re-embedded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from langchain_core.embeddings import Embeddings

from pipelines.index.ingestion import chunk_documents
from tests.benchmarks._reactions import (
    COPY_STRIDE,
    load_reactions,
    load_reactions_x3,
    original_text,
)
from tests.benchmarks.bench_growth import _KnownVectors

ROWS = [
    ("R-HSA-1791173", "R-HSA-380994", "The ATF3 gene is transcribed (Chen et al. 2004)."),
    ("R-HSA-9707051", "R-HSA-9700206", "A second reaction's summary."),
]


class _Counting(Embeddings):
    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        return [[float(len(text)), 1.0] for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def _tsv(tmp_path: Path) -> Path:
    path = tmp_path / "reaction_summations.tsv"
    lines = ["stId\tpathway_stId\tsummation", *("\t".join(row) for row in ROWS)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_copies_are_new_entities_with_the_same_text(tmp_path: Path) -> None:
    originals = load_reactions(_tsv(tmp_path)).documents
    tripled = load_reactions_x3(_tsv(tmp_path)).documents

    assert len(tripled) == 3 * len(originals)
    ids = [document.citation["st_id"] for document in tripled]
    assert len(set(ids)) == len(ids)
    assert ids[:2] == ["R-HSA-1791173", "R-HSA-9707051"]
    assert ids[2] == f"R-HSA-{1791173 + COPY_STRIDE}"
    for copy in tripled[2:]:
        number = int(copy.citation["st_id"].rsplit("-", 1)[1])
        assert number > COPY_STRIDE  # beyond any Reactome id
        original = originals[(tripled.index(copy)) % len(originals)]
        assert copy.text == original.text
        assert original_text(copy.title) == original.title
        assert copy.key != original.key


def test_a_copys_vector_is_its_originals_and_nothing_is_embedded_twice(tmp_path: Path) -> None:
    originals = chunk_documents("reactions", load_reactions(_tsv(tmp_path)).documents)
    known = {chunk.embed_text: np.array([float(n), 0.5]) for n, chunk in enumerate(originals)}
    model = _Counting()
    vectors = _KnownVectors(dict(known), model)

    copies = chunk_documents("reactions_x3", load_reactions_x3(_tsv(tmp_path)).documents)
    got = vectors.embed_documents([chunk.embed_text for chunk in copies])

    # Each copy gets the vector of the original with its text (chunks are in id order, so
    # copies and originals interleave).
    number_of = {chunk.text: float(n) for n, chunk in enumerate(originals)}
    assert len(number_of) == len(originals) == 2
    assert [vector[0] for vector in got] == [number_of[chunk.text] for chunk in copies]
    assert sorted(vector[0] for vector in got) == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    assert model.texts == []
    assert vectors.embedded == 0
    assert vectors.embed_query("something else") == [14.0, 1.0]
    assert model.texts == ["something else"]
    assert vectors.embedded == 1
