"""Each chunk's sentences, split and embedded once at ingest and kept with its chunk table.

The extractive answer model and the evidence judge read a retrieved source's sentences: where
each stands in the source's text, each as scored, its paragraph, the units the extractive
model may quote (:func:`pipelines.index.sentences.segment`) and a vector for each sentence and
unit. Worked out at answer time, that was nearly all the time between retrieval's end and the
answer's first token (issue 27); so ingestion works it out once per chunk and writes it
beside the chunk table. With a model that gives its token states (ours), each sentence's and
unit's vector is pooled from the pass that embeds the chunk (late chunking,
:func:`work_out_pooled`, decision 0045): the mean of its tokens' states, read in the
context of the chunk and its heading, at no cost beyond the chunk's vector. A reader that
does not find a passage stored falls back on :func:`work_out`, which embeds each sentence
alone: the same sentences and units, other vectors. With another model, ingestion stores
:func:`work_out`'s. The files, in the table's folder:

- ``sentence_keys.npy``: uint64, one per row: a hash of the chunk's text (:func:`text_key`),
  how a passage's text finds its row;
- ``sentence_rows.npy``: int64, rows + 1 by 3: where each row's sentences, units and vectors
  start in the three files below;
- ``sentence_spans.npy``: int32, one row per sentence: start, end (in its chunk's text) and
  paragraph number;
- ``sentence_units.npy``: int32, one row per quotable unit: its first and last sentence (a
  unit is the sentences from first to last that have a letter or digit once cleaned);
- ``sentence_vectors.f32``: float32 vectors, unit length: each row's sentence vectors, then
  the vectors of its units of more than one sentence (a one-sentence unit's is its
  sentence's).

The texts as scored are not stored: :func:`~pipelines.index.sentences.clean_sentence` of a
span is cheaper to redo than to read. The table's ``chunk_table.json`` names the embedding
model that made the vectors (a reader with another model finds nothing here) and, for pooled
ones, says so (``"pooling"``: :data:`POOLED`).

A retrieved source is one chunk or several joined by a blank line
(``pipelines.retrieval.retriever``); :func:`join` assembles the sentences of such a passage
from its chunks', with the sentences and units :func:`work_out` would find in the joined
text (and its chunks' vectors), when
:func:`joinable` says the join cannot change how the parts are read.
"""

from __future__ import annotations

import hashlib
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from pipelines.index.sentences import clean_sentence, has_words, segment

__all__ = [
    "FILES",
    "POOLED",
    "SEPARATOR",
    "PassageSentences",
    "SentenceWriter",
    "StoredSentences",
    "VectorMemo",
    "embed",
    "join",
    "joinable",
    "loaded_sentences",
    "model_name",
    "model_vectors",
    "pooling_model",
    "pools",
    "query_vectors",
    "text_key",
    "unit_rows",
    "work_out",
    "work_out_pooled",
]

_Matrix = np.ndarray[Any, np.dtype[np.float32]]

KEYS = "sentence_keys.npy"
ROWS = "sentence_rows.npy"
SPANS = "sentence_spans.npy"
UNITS = "sentence_units.npy"
VECTORS = "sentence_vectors.f32"
FILES = (KEYS, ROWS, SPANS, UNITS, VECTORS)
# How chunks are joined into one source's text (pipelines.retrieval.retriever).
SEPARATOR = "\n\n"
# What a table's "pooling" says of sentence vectors pooled from each chunk's own pass
# (work_out_pooled; decision 0045). Tables without it hold vectors embedded alone.
POOLED = "chunk"


def unit_rows(vectors: Any) -> _Matrix:
    """``vectors`` as float32 rows of unit length (a zero row stays zero), so a dot product
    is the cosine whatever embedding model made them."""
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2:
        return matrix.reshape(0, 0)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    normalized: _Matrix = (matrix / np.where(norms == 0, 1, norms)).astype(np.float32)
    return normalized


def model_vectors(embeddings: Embeddings, texts: Sequence[str]) -> _Matrix:
    """The model's own vectors of ``texts`` in one call, as float32 rows (the packaged
    model's array form when it has one: no detour through lists of floats)."""
    as_array = getattr(embeddings, "embed_array", None)
    raw = as_array(list(texts)) if callable(as_array) else embeddings.embed_documents(list(texts))
    return np.asarray(raw, dtype=np.float32)


def query_vectors(embeddings: Embeddings, texts: Sequence[str]) -> _Matrix:
    """The model's vectors of ``texts`` embedded as questions, as float32 rows: for a model
    that embeds a question unlike a passage (e5's "query: "), its array form when it has one."""
    as_array = getattr(embeddings, "embed_query_array", None)
    if callable(as_array):
        return np.asarray(as_array(list(texts)), dtype=np.float32)
    return np.asarray([embeddings.embed_query(text) for text in texts], dtype=np.float32)


def embed(embeddings: Embeddings, texts: Sequence[str]) -> _Matrix:
    """Unit-length vectors of ``texts`` in one call."""
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    return unit_rows(model_vectors(embeddings, texts))


def model_name(embeddings: Embeddings | None) -> str | None:
    """The embedding choice ``embeddings`` is, as the settings name it (``all-MiniLM-L6-v2-q8``,
    ``openai:MODEL``), or None for one we cannot name (a test's fake): vectors are stored and
    found under this name only."""
    if embeddings is None:
        return None
    name = getattr(embeddings, "name", None)
    if isinstance(name, str) and name:
        return name
    model = getattr(embeddings, "model", None)
    if type(embeddings).__name__ == "OpenAIEmbeddings" and isinstance(model, str):
        return f"openai:{model}"
    return None


def pools(embeddings: Embeddings | None) -> bool:
    """Whether ``embeddings`` itself pools each chunk's sentence vectors from the chunk's own
    pass (late chunking; decision 0045): a model we can name that gives its token states.
    Ingestion and readers look through wrappers with :func:`pooling_model`."""
    pooling = getattr(embeddings, "embed_pooled", None)
    return model_name(embeddings) is not None and callable(pooling)


def pooling_model(embeddings: Embeddings | None) -> Embeddings | None:
    """The model that pools sentence vectors as ingestion does: ``embeddings`` itself, or the
    model it wraps (its ``wrapped``, as :class:`~pipelines.index.passages.RecentVectors`
    gives); None when none pools."""
    model = embeddings
    while model is not None:
        if pools(model):
            return model
        model = getattr(model, "wrapped", None)
    return None


def text_key(text: str) -> int:
    """A chunk text's 64-bit key (a found row's text is compared too, so a collision costs a
    comparison, never a wrong passage)."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


@dataclass(frozen=True)
class PassageSentences:
    """One passage's sentences: ``spans`` into its text, ``texts`` as scored, one unit-length
    vector each (``vectors``; no columns without an embedding model), each one's paragraph
    number, the quotable ``units`` (sentence positions) and one vector each."""

    spans: tuple[tuple[int, int], ...]
    texts: tuple[str, ...]
    vectors: _Matrix
    paragraphs: tuple[int, ...] = ()
    units: tuple[tuple[int, ...], ...] = ()
    unit_vectors: _Matrix = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))

    def unit_text(self, unit: Sequence[int]) -> str:
        """A unit as it is scored: its sentences joined by a space."""
        return " ".join(self.texts[position] for position in unit)


class VectorMemo:
    """The vectors of the ``capacity`` texts embedded last (an ingest meets a sentence again
    where chunks overlap)."""

    def __init__(self, capacity: int = 8192) -> None:
        self.capacity = capacity
        self._kept: OrderedDict[str, _Matrix] = OrderedDict()

    def get(self, text: str) -> _Matrix | None:
        found = self._kept.get(text)
        if found is not None:
            self._kept.move_to_end(text)
        return found

    def put(self, text: str, vector: _Matrix) -> None:
        self._kept[text] = vector
        self._kept.move_to_end(text)
        while len(self._kept) > self.capacity:
            self._kept.popitem(last=False)


def _vectors_for(
    embeddings: Embeddings | None, texts: list[str], memo: VectorMemo | None
) -> _Matrix:
    if embeddings is None:
        return np.zeros((len(texts), 0), dtype=np.float32)
    known = [memo.get(text) if memo is not None else None for text in texts]
    missing = [text for text, vector in zip(texts, known, strict=True) if vector is None]
    fresh = embed(embeddings, missing)
    if not missing:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([vector for vector in known if vector is not None])
    width = fresh.shape[1]
    rows = np.empty((len(texts), width), dtype=np.float32)
    made = iter(fresh)
    for index, vector in enumerate(known):
        if vector is None:
            vector = next(made)
            if memo is not None:
                memo.put(texts[index], vector)
        rows[index] = vector
    return rows


def work_out(
    embeddings: Embeddings | None,
    texts: Sequence[str],
    *,
    known: Callable[[str], PassageSentences | None] | None = None,
    memo: VectorMemo | None = None,
) -> list[PassageSentences]:
    """Each text's sentences (:func:`~pipelines.index.sentences.segment`) and their vectors,
    all embedded in one call (each distinct sentence and unit once); ``known`` gives those
    found elsewhere (an earlier version's table), ``memo`` vectors embedded lately."""
    found: list[PassageSentences | None] = [known(text) if known else None for text in texts]
    pieces = {index: segment(text) for index, text in enumerate(texts) if found[index] is None}
    wanted: dict[str, int] = {}
    for parts in pieces.values():
        for sentence in parts.texts:
            wanted.setdefault(sentence, len(wanted))
        for unit in parts.units:
            if len(unit) > 1:
                wanted.setdefault(parts.unit_text(unit), len(wanted))
    vectors = _vectors_for(embeddings, list(wanted), memo)
    width = vectors.shape[1] if len(vectors) else 0
    for index, parts in pieces.items():
        # A passage without sentences has vectors of no columns, whatever the model.
        columns = width if parts.texts else 0
        sentence_vectors = _rows(vectors, [wanted[text] for text in parts.texts], columns)
        unit_vectors = _rows(
            vectors,
            [
                wanted[parts.texts[unit[0]] if len(unit) == 1 else parts.unit_text(unit)]
                for unit in parts.units
            ],
            columns,
        )
        found[index] = PassageSentences(
            parts.spans, parts.texts, sentence_vectors, parts.paragraphs, parts.units, unit_vectors
        )
    return [passage for passage in found if passage is not None]


def work_out_pooled(
    embeddings: Any,
    texts: Sequence[str],
    embedded_as: Sequence[str],
    *,
    memo: VectorMemo | None = None,
) -> tuple[_Matrix, list[PassageSentences]]:
    """Each chunk's vector and its sentences, from one pass of the model over each chunk as it
    is embedded (``embedded_as``: its heading, then its text): each sentence's and each
    unit's vector is the mean of the token states inside it (late chunking). A sentence or
    unit the model's truncation cuts, or that lies past it, is embedded on its own.
    ``embeddings`` must have ``embed_pooled``
    (:class:`~pipelines.index.embeddings.MiniLMEmbeddings`)."""
    pieces = [segment(text) for text in texts]
    names: list[list[str]] = []  # what each pooled row is the vector of
    spans: list[list[tuple[int, int]]] = []
    for text, whole, parts in zip(texts, embedded_as, pieces, strict=True):
        if not whole.endswith(text):
            raise ValueError("each chunk must be embedded as its heading, then its text")
        shift = len(whole) - len(text)
        multi = [unit for unit in parts.units if len(unit) > 1]
        names.append([*parts.texts, *(parts.unit_text(unit) for unit in multi)])
        spans.append(
            [(start + shift, end + shift) for start, end in parts.spans]
            + [(parts.spans[u[0]][0] + shift, parts.spans[u[-1]][1] + shift) for u in multi]
        )
    chunk_vectors, pooled = embeddings.embed_pooled(list(embedded_as), spans)
    # What the truncation cuts or lies past it, which the pass did not read whole: alone.
    alone = list(
        dict.fromkeys(
            name
            for mine, rows in zip(names, pooled, strict=True)
            for name, row in zip(mine, rows, strict=True)
            if np.isnan(row[0])
        )
    )
    if alone:
        alone_vectors = dict(zip(alone, _vectors_for(embeddings, alone, memo), strict=True))
        for mine, rows in zip(names, pooled, strict=True):
            for index, name in enumerate(mine):
                if np.isnan(rows[index, 0]):
                    rows[index] = alone_vectors[name]
    found = []
    for parts, rows in zip(pieces, pooled, strict=True):
        count = len(parts.texts)
        # A passage without sentences has vectors of no columns, as work_out gives them.
        sentence_vectors = rows[:count] if count else np.zeros((0, 0), dtype=np.float32)
        by_unit = iter(rows[count:])
        unit_vectors = np.zeros((len(parts.units), sentence_vectors.shape[1]), dtype=np.float32)
        for index, unit in enumerate(parts.units):
            unit_vectors[index] = sentence_vectors[unit[0]] if len(unit) == 1 else next(by_unit)
        found.append(
            PassageSentences(
                parts.spans,
                parts.texts,
                sentence_vectors,
                parts.paragraphs,
                parts.units,
                unit_vectors,
            )
        )
    return chunk_vectors, found


def _rows(vectors: _Matrix, rows: list[int], width: int) -> _Matrix:
    if not rows:
        return np.zeros((0, width), dtype=np.float32)
    picked: _Matrix = vectors[rows]
    return picked


# A part the next one is joined to must not end where the join would read differently: a
# list item's bullet at a line's start (the blank line would complete it) or a tag left open.
_OPEN_END_RE = re.compile(r"(?:\n[^\S\n]*(?:[-*+]|\d+[.)])|</?[A-Za-z]*)$")


def joinable(parts: Sequence[str]) -> bool:
    """Whether the sentences of ``SEPARATOR.join(parts)`` are exactly the parts' sentences,
    offsets shifted: each part has no spaces at its ends (the splitter's chunks have none)
    and none but the last ends open (see ``_OPEN_END_RE``). The paragraph breaks the segmenter
    reads are then the parts' own and the blank line between each two."""
    return all(part and part == part.strip() for part in parts) and not any(
        _OPEN_END_RE.search(part) for part in parts[:-1]
    )


def join(parts: Sequence[str], found: Sequence[PassageSentences]) -> PassageSentences:
    """The sentences of ``SEPARATOR.join(parts)`` from each part's ``found`` sentences (the
    parts must be :func:`joinable`): spans shifted by the text before, paragraphs and units
    numbered on."""
    spans: list[tuple[int, int]] = []
    texts: list[str] = []
    paragraphs: list[int] = []
    units: list[tuple[int, ...]] = []
    offset = 0
    first_paragraph = 0
    for text, passage in zip(parts, found, strict=True):
        base = len(spans)
        spans += [(start + offset, end + offset) for start, end in passage.spans]
        texts += passage.texts
        paragraphs += [number + first_paragraph for number in passage.paragraphs]
        units += [tuple(position + base for position in unit) for unit in passage.units]
        if passage.paragraphs:
            first_paragraph += passage.paragraphs[-1] + 1
        offset += len(text) + len(SEPARATOR)
    with_sentences = [passage for passage in found if passage.spans]
    width = with_sentences[0].vectors.shape[1] if with_sentences else 0
    vectors = _concatenate([p.vectors for p in with_sentences], width)
    unit_vectors = _concatenate([p.unit_vectors for p in found if p.units], width)
    return PassageSentences(
        tuple(spans), tuple(texts), vectors, tuple(paragraphs), tuple(units), unit_vectors
    )


def _concatenate(blocks: list[_Matrix], width: int) -> _Matrix:
    if not blocks:
        return np.zeros((0, width), dtype=np.float32)
    joined: _Matrix = np.concatenate(blocks).astype(np.float32, copy=False)
    return joined


def pieces_of(text: str) -> list[str]:
    """``text`` cut at each blank line the chunks of a source are joined by (a chunk may hold
    some of its own: which pieces make a chunk is for the reader to find)."""
    return text.split(SEPARATOR)


class SentenceWriter:
    """Writes the sentence files of a table of ``rows`` rows, row by row; vectors go straight
    to disk. :meth:`close` returns what ``chunk_table.json`` says of them."""

    def __init__(self, folder: Path, rows: int, model: str, *, pooled: bool = False) -> None:
        self._folder = folder
        self._model = model
        self._pooled = pooled
        self._keys = np.zeros(rows, dtype=np.uint64)
        self._rows = np.zeros((rows + 1, 3), dtype=np.int64)
        self._spans: list[np.ndarray[Any, np.dtype[np.int32]]] = []
        self._units: list[np.ndarray[Any, np.dtype[np.int32]]] = []
        self._vectors = (folder / VECTORS).open("wb")
        self._width: int | None = None
        self._written = 0

    def add(self, texts: Sequence[str], found: Sequence[PassageSentences]) -> None:
        """The next rows' sentences: one per chunk text."""
        if len(texts) != len(found):
            raise ValueError("a chunk table row needs its sentences")
        for text, passage in zip(texts, found, strict=True):
            row = self._written
            multi = [index for index, unit in enumerate(passage.units) if len(unit) > 1]
            blocks = [passage.vectors, passage.unit_vectors[multi]] if passage.spans else []
            for block in blocks:
                if len(block) and self._width is None:
                    self._width = block.shape[1]
                if len(block) and block.shape[1] != self._width:
                    raise ValueError("sentence vectors of different lengths in one table")
                self._vectors.write(np.ascontiguousarray(block, dtype=np.float32).tobytes())
            self._keys[row] = text_key(text)
            spans = np.array(
                [(s, e, p) for (s, e), p in zip(passage.spans, passage.paragraphs, strict=True)],
                dtype=np.int32,
            ).reshape(-1, 3)
            units = np.array(
                [(unit[0], unit[-1]) for unit in passage.units], dtype=np.int32
            ).reshape(-1, 2)
            self._spans.append(spans)
            self._units.append(units)
            vectors = len(passage.spans) + len(multi) if passage.spans else 0
            self._rows[row + 1] = self._rows[row] + (len(spans), len(units), vectors)
            self._written += 1

    def abort(self) -> None:
        self._vectors.close()

    def close(self) -> dict[str, Any]:
        self._vectors.close()
        if self._written != len(self._keys):
            raise ValueError(f"sentences for {self._written} of {len(self._keys)} rows")
        empty = np.zeros((0, 3), dtype=np.int32)
        np.save(self._folder / KEYS, self._keys)
        np.save(self._folder / ROWS, self._rows)
        np.save(self._folder / SPANS, np.concatenate([empty, *self._spans]))
        np.save(self._folder / UNITS, np.concatenate([empty[:, :2], *self._units]))
        meta: dict[str, Any] = {
            "model": self._model,
            "dimensions": self._width or 0,
            "vectors": int(self._rows[-1, 2]),
        }
        if self._pooled:
            meta["pooling"] = POOLED
        return meta


class StoredSentences:
    """The sentence files of one loaded table, memory-mapped; ``text_of(row)`` reads a row's
    chunk text (to confirm a key's match)."""

    def __init__(self, folder: Path, meta: dict[str, Any], text_of: Callable[[int], str]) -> None:
        self.model = str(meta["model"])
        self.pooling = meta.get("pooling")  # POOLED, or None: embedded alone
        self._text_of = text_of
        self._keys = np.load(folder / KEYS, mmap_mode="r")
        self._rows = np.load(folder / ROWS)
        self._spans = np.load(folder / SPANS)
        self._units = np.load(folder / UNITS)
        width, count = int(meta["dimensions"]), int(meta["vectors"])
        if count != int(self._rows[-1, 2]) or len(self._rows) != len(self._keys) + 1:
            raise ValueError(f"the sentence files in {folder} do not match")
        self._vectors: _Matrix = (
            np.memmap(folder / VECTORS, dtype=np.float32, mode="r", shape=(count, width))
            if count and width
            else np.zeros((0, width), dtype=np.float32)
        )
        self._width = width
        self._sorted: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]] | None = None

    def _candidates(self, key: int) -> Iterator[int]:
        if self._sorted is None:  # on first use: loading a table stays cheap
            order = np.argsort(self._keys, kind="stable")
            self._sorted = (np.asarray(self._keys)[order], order)
        keys, order = self._sorted
        wanted = np.uint64(key)
        index = int(np.searchsorted(keys, wanted))
        while index < len(keys) and keys[index] == wanted:
            yield int(order[index])
            index += 1

    def find(self, text: str, key: int | None = None) -> PassageSentences | None:
        """The stored sentences of the chunk whose text is ``text``, or None."""
        for row in self._candidates(text_key(text) if key is None else key):
            if self._text_of(row) == text:
                return self._passage(row, text)
        return None

    def _passage(self, row: int, text: str) -> PassageSentences:
        (s0, u0, v0), (s1, u1, v1) = self._rows[row].tolist(), self._rows[row + 1].tolist()
        rows = self._spans[s0:s1].tolist()
        spans = tuple((start, end) for start, end, _ in rows)
        texts = tuple(clean_sentence(text[start:end]) for start, end in spans)
        units = tuple(
            tuple(p for p in range(first, last + 1) if has_words(texts[p]))
            for first, last in self._units[u0:u1].tolist()
        )
        vectors = np.array(self._vectors[v0:v1], dtype=np.float32)  # a copy, off the map
        width = self._width if spans else 0
        sentence_vectors = vectors[: len(spans)].reshape(len(spans), width)
        multi = iter(vectors[len(spans) :])
        unit_vectors = np.zeros((len(units), width), dtype=np.float32)
        for index, unit in enumerate(units):
            unit_vectors[index] = sentence_vectors[unit[0]] if len(unit) == 1 else next(multi)
        return PassageSentences(
            spans,
            texts,
            sentence_vectors,
            tuple(paragraph for _, _, paragraph in rows),
            units,
            unit_vectors,
        )


# Every loaded table's sentences, for the readers of any passage (a table leaves this set
# when the version index holding it is let go).
_LOADED: weakref.WeakSet[StoredSentences] = weakref.WeakSet()
_LOADED_LOCK = threading.Lock()


def register(stored: StoredSentences) -> None:
    with _LOADED_LOCK:
        _LOADED.add(stored)


def loaded_sentences(model: str | None) -> list[StoredSentences]:
    """The sentences of every chunk table loaded in this process whose vectors ``model``
    made (none for a model that has no name)."""
    if model is None:
        return []
    with _LOADED_LOCK:
        return [stored for stored in _LOADED if stored.model == model]
