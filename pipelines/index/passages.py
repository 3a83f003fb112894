"""The sentences of a retrieved passage with their embeddings, found rather than worked out.

Both readers of a source's sentences, the extractive model and the evidence judge, need the
same things of each passage: where each sentence stands in the passage's own text (a quote
is copied from there), the sentence as it is scored (literature citations removed), its
paragraph, the units the extractive model may quote, and the embeddings of sentences and
units (:class:`~pipelines.index.chunk_sentences.PassageSentences`).

:class:`SentenceBank` finds them, in this order: among the passages it handed out lately;
in the chunk tables loaded in this process, where ingestion stored each chunk's (a source of
several chunks is assembled from theirs); and only then works them out, each sentence
embedded alone. Either way a passage has the same sentences, spans and units, so a quote is
the same text; the vectors of stored ones were pooled from their chunk's pass at ingest
(decision 0045), which a reader cannot repeat without the chunk. ``counts`` says how often
each way served.

:class:`RecentVectors` wraps the embedding model of the bank: it keeps the vectors of the
texts embedded or found lately, the retriever's among them (it embeds through
:meth:`RecentVectors.recording`), so the question the retriever embedded, and a quoted
sentence whose vector the bank found, are not embedded again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from pipelines.index.chunk_sentences import (
    PassageSentences,
    StoredSentences,
    embed,
    join,
    joinable,
    loaded_sentences,
    model_name,
    model_vectors,
    pieces_of,
    text_key,
    unit_rows,
    work_out,
)

__all__ = ["PassageSentences", "RecentVectors", "SentenceBank", "embed", "unit_rows"]

_Matrix = np.ndarray[Any, np.dtype[np.float32]]
# A group of pieces longer than this is no chunk (the splitter's are 1,000 characters at
# most): the search for a passage's chunks stops there.
_MAX_CHUNK_CHARS = 4000


class RecentVectors(Embeddings):
    """``embeddings``, keeping the vectors of the ``capacity`` texts used last: asked for a
    text it holds, it answers without running the model. The vectors are the model's own
    (float32), so a caller cannot tell the difference but by the time it takes."""

    def __init__(self, embeddings: Embeddings, capacity: int = 4096) -> None:
        self.embeddings = embeddings
        self.capacity = capacity
        self._kept: OrderedDict[str, _Matrix] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str | None:
        """The wrapped model's name (:func:`~pipelines.index.chunk_sentences.model_name`)."""
        return model_name(self.embeddings)

    @property
    def wrapped(self) -> Embeddings:
        """The model itself (:func:`~pipelines.index.chunk_sentences.pooling_model`)."""
        return self.embeddings

    def remember(self, texts: Sequence[str], vectors: _Matrix) -> None:
        """Keep ``vectors`` as the vectors of ``texts`` (the model's, found elsewhere)."""
        if not len(vectors) or vectors.shape[1] == 0:
            return
        with self._lock:
            for text, vector in zip(texts, vectors, strict=True):
                self._kept[text] = vector
                self._kept.move_to_end(text)
            self._trim()

    def _trim(self) -> None:
        while len(self._kept) > self.capacity:
            self._kept.popitem(last=False)

    def embed_array(self, texts: Sequence[str]) -> _Matrix:
        """The vectors of ``texts``, one float32 row each; only the texts not kept are run."""
        with self._lock:
            found = [self._kept.get(text) for text in texts]
            for text, vector in zip(texts, found, strict=True):
                if vector is not None:
                    self._kept.move_to_end(text)
        missing = list(dict.fromkeys(t for t, v in zip(texts, found, strict=True) if v is None))
        made: dict[str, _Matrix] = {}
        if missing:
            made = dict(zip(missing, model_vectors(self.embeddings, missing), strict=True))
            with self._lock:
                self._kept.update(made)
                self._trim()
        with self._lock:
            self.hits += len(texts) - sum(vector is None for vector in found)
            self.misses += len(missing)
        rows = [made[t] if v is None else v for t, v in zip(texts, found, strict=True)]
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack(rows)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = self.embed_array(texts).tolist()
        return vectors

    def embed_query(self, text: str) -> list[float]:
        # Queries and documents are embedded alike by our models (the retriever embeds its
        # queries as documents); a model that tells them apart is asked directly.
        vector: list[float] = self.embeddings.embed_query(text)
        return vector

    def recording(self) -> Embeddings:
        """The model as the retriever uses it: every text is embedded as before (a search
        takes the same time however often it is asked), and kept here for the answer model."""
        return _Recording(self)


class _Recording(Embeddings):
    """See :meth:`RecentVectors.recording`."""

    def __init__(self, recent: RecentVectors) -> None:
        self.recent = recent

    @property
    def name(self) -> str | None:
        return self.recent.name

    @property
    def wrapped(self) -> Embeddings:
        return self.recent.embeddings

    def embed_array(self, texts: Sequence[str]) -> _Matrix:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        vectors = model_vectors(self.recent.embeddings, texts).reshape(len(texts), -1)
        self.recent.remember(texts, vectors)
        return vectors

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = self.embed_array(texts).tolist()
        return vectors

    def embed_query(self, text: str) -> list[float]:
        vector: list[float] = self.recent.embeddings.embed_query(text)
        return vector


class SentenceBank:
    """Passages' sentences and vectors, found stored, or worked out (see the module
    docstring); the ``capacity`` passages used last are kept in memory."""

    def __init__(
        self,
        embeddings: Embeddings | None,
        # Passages are found stored, cheaply: a few hundred in memory are the ones asked
        # again and again, and with a large embedding model 4,096 would be hundreds of MB.
        capacity: int = 256,
        *,
        model: str | None = None,
    ) -> None:
        """``model`` names the embedding model whose stored vectors may be used (by default
        ``embeddings``' own name; a model without one finds nothing stored)."""
        self.embeddings = embeddings
        self.capacity = capacity
        self.model = model if model is not None else model_name(embeddings)
        self._kept: OrderedDict[str, PassageSentences] = OrderedDict()
        self._lock = threading.Lock()
        # How each passage asked for was served: kept in memory, assembled from the chunk
        # tables' stored sentences, or worked out here (split and embedded).
        self.counts = {"kept": 0, "stored": 0, "computed": 0}

    def of(self, text: str) -> PassageSentences:
        return self.many([text])[0]

    def many(self, texts: Sequence[str]) -> list[PassageSentences]:
        """Each passage's sentences; those neither kept nor stored are worked out together,
        their sentences embedded in one call."""
        with self._lock:
            found = {text: self._kept.get(text) for text in texts}
            for text, passage in found.items():
                if passage is not None:
                    self._kept.move_to_end(text)
            kept = sum(passage is not None for passage in found.values())
        stored_count = 0
        tables = loaded_sentences(self.model)
        if tables:
            for text, passage in found.items():
                if passage is None:
                    found[text] = _stored(tables, text)
                    stored_count += found[text] is not None
        missing = [text for text, passage in found.items() if passage is None]
        if missing:
            found.update(zip(missing, work_out(self.embeddings, missing), strict=True))
        with self._lock:
            for text in found:
                if text not in self._kept:
                    self._kept[text] = found[text]  # type: ignore[assignment]
            while len(self._kept) > self.capacity:
                self._kept.popitem(last=False)
            self.counts["kept"] += kept
            self.counts["stored"] += stored_count
            self.counts["computed"] += len(missing)
        if isinstance(self.embeddings, RecentVectors):
            # An extractive answer quotes these sentences: the judge finds their vectors.
            for passage in found.values():
                if passage is not None:
                    self.embeddings.remember(passage.texts, passage.vectors)
        return [found[text] for text in texts]  # type: ignore[misc]

    def question_vector(self, question: str) -> _Matrix | None:
        """The unit-length vector of ``question`` (the retriever's, when it embedded the
        same text lately), or None without an embedding model."""
        if self.embeddings is None:
            return None
        vectors = embed(self.embeddings, [question])
        return vectors[0] if len(vectors) else None


def _find(tables: Sequence[StoredSentences], text: str) -> PassageSentences | None:
    key = text_key(text)
    for table in tables:
        found = table.find(text, key)
        if found is not None:
            return found
    return None


def _stored(tables: Sequence[StoredSentences], text: str) -> PassageSentences | None:
    """``text``'s sentences from the stored chunks it is made of: one chunk, or several
    joined by blank lines (found by trying each run of its blank-line pieces, shortest
    first, as long as a chunk may be)."""
    whole = _find(tables, text)
    if whole is not None:
        return whole
    pieces = pieces_of(text)
    if len(pieces) < 2:
        return None
    # best[i]: the chunks that make pieces[:i], as (start, end) runs of pieces; found from
    # the left, each run ending where a chunk is known.
    best: list[list[tuple[int, int, PassageSentences]] | None] = [None] * (len(pieces) + 1)
    best[0] = []
    for start in range(len(pieces)):
        before = best[start]
        if before is None:
            continue
        length = -2
        for end in range(start + 1, len(pieces) + 1):
            length += len(pieces[end - 1]) + 2
            if length > _MAX_CHUNK_CHARS:
                break
            if best[end] is not None:
                continue
            found = _find(tables, "\n\n".join(pieces[start:end]))
            if found is not None:
                best[end] = [*before, (start, end, found)]
    runs = best[len(pieces)]
    if runs is None:
        return None
    parts = ["\n\n".join(pieces[start:end]) for start, end, _ in runs]
    if not joinable(parts):
        return None
    return join(parts, [found for _, _, found in runs])
