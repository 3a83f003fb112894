"""The sentences of a retrieved passage with their embeddings, worked out once per passage.

Both readers of a source's sentences, the extractive model and the evidence judge, need the
same three things of each passage: where each sentence stands in the passage's own text (a
quote is copied from there), the sentence as it is scored (literature citations removed), and
its embedding. :class:`SentenceBank` keeps them per passage text, so a source that comes back
question after question is split and embedded once per process.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from pipelines.answering.sentences import clean_sentence, sentence_spans

__all__ = ["PassageSentences", "SentenceBank", "unit_rows"]

_Matrix = np.ndarray[Any, np.dtype[np.float32]]


def unit_rows(vectors: Any) -> _Matrix:
    """``vectors`` as float32 rows of unit length (a zero row stays zero), so a dot product
    is the cosine whatever embedding model made them."""
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2:
        return matrix.reshape(0, 0)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    normalized: _Matrix = (matrix / np.where(norms == 0, 1, norms)).astype(np.float32)
    return normalized


@dataclass(frozen=True)
class PassageSentences:
    """One passage's sentences: ``spans`` into its text, ``texts`` as scored, one vector each."""

    spans: tuple[tuple[int, int], ...]
    texts: tuple[str, ...]
    vectors: _Matrix


def embed(embeddings: Embeddings, texts: Sequence[str]) -> _Matrix:
    """Unit-length vectors of ``texts`` in one call (the packaged model's array form when it
    has one: no detour through lists of floats)."""
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    as_array = getattr(embeddings, "embed_array", None)
    raw = as_array(list(texts)) if callable(as_array) else embeddings.embed_documents(list(texts))
    return unit_rows(raw)


class SentenceBank:
    """Passages' sentences and vectors, kept for the ``capacity`` passages used last."""

    def __init__(self, embeddings: Embeddings | None, capacity: int = 4096) -> None:
        self.embeddings = embeddings
        self.capacity = capacity
        self._kept: OrderedDict[str, PassageSentences] = OrderedDict()
        self._lock = threading.Lock()

    def of(self, text: str) -> PassageSentences:
        return self.many([text])[0]

    def many(self, texts: Sequence[str]) -> list[PassageSentences]:
        """Each passage's sentences; those not kept yet are embedded together, in one call."""
        with self._lock:
            found = {text: self._kept.get(text) for text in texts}
            for text, passage in found.items():
                if passage is not None:
                    self._kept.move_to_end(text)
        missing = [text for text, passage in found.items() if passage is None]
        if missing:
            split = [sentence_spans(text) for text in missing]
            cleaned = [
                tuple(clean_sentence(text[start:end]) for start, end in spans)
                for text, spans in zip(missing, split, strict=True)
            ]
            flat = [sentence for sentences in cleaned for sentence in sentences]
            vectors = (
                embed(self.embeddings, flat)
                if self.embeddings is not None
                else np.zeros((len(flat), 0), dtype=np.float32)
            )
            row = 0
            with self._lock:
                for text, spans, sentences in zip(missing, split, cleaned, strict=True):
                    passage = PassageSentences(
                        tuple(spans), sentences, vectors[row : row + len(sentences)]
                    )
                    row += len(sentences)
                    found[text] = passage
                    self._kept[text] = passage
                while len(self._kept) > self.capacity:
                    self._kept.popitem(last=False)
        return [found[text] for text in texts]  # type: ignore[misc]
