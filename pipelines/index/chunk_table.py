"""What the retriever's second stage reads of each chunk, saved beside the keyword index.

After ranking, the retriever needs the text, metadata and vector of its best hundred chunks.
Asking Chroma for them was over half of a question's retrieval time (its ``get`` goes through
SQLite and the vector segment for every call); here they sit in three memory-mapped files
whose rows are the keyword index's rows, so reading a hundred is a few slices:

- ``vectors.npy``: the embeddings, float32, one row per chunk;
- ``records.bin``: each chunk's text and metadata as one JSON object, back to back;
- ``record_offsets.npy``: where each row's JSON starts and ends in ``records.bin``.

Chroma stays the store of record; this is a read-only copy written once per collection
version, by the same ingest, before the version is marked complete.

Format 2 (``chunk_table.json`` says ``"format": 2``) may also hold each chunk's sentences,
split and embedded at ingest (``pipelines.index.chunk_sentences``; ``"sentences"`` in
``chunk_table.json`` names their embedding model). A table of format 1 (no ``"format"``: from
before) or without sentences loads all the same; its readers work the sentences out when
they need them, and the next ingest adds them (:func:`add_sentences`).

A table may also hold a second vector per chunk from a multilingual model
(``multilingual.npy``; ``"multilingual"`` in ``chunk_table.json`` names the model and how
many tokens of each chunk it read), so a question in another language is searched through
it (decision 0037). A table without them is searched by its own vectors alone; the next
ingest, or an instance building the table from the store, adds them
(:func:`add_multilingual`).
"""

from __future__ import annotations

import functools
import json
import mmap
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from threadpoolctl import ThreadpoolController

from pipelines.index import chunk_sentences
from pipelines.index.chunk_sentences import (
    PassageSentences,
    SentenceWriter,
    StoredSentences,
    VectorMemo,
    model_name,
    model_vectors,
    pooling_model,
    work_out,
    work_out_pooled,
)

__all__ = [
    "FORMAT",
    "ChunkRecord",
    "ChunkTable",
    "ChunkTableWriter",
    "MultilingualVectors",
    "add_multilingual",
    "add_sentences",
    "chunk_heading",
    "indexed_text",
]

_VECTORS = "vectors.npy"
_RECORDS = "records.bin"
_OFFSETS = "record_offsets.npy"
_MULTILINGUAL = "multilingual.npy"
# Written last: a folder without it holds no table (an ingest from before tables existed, or
# one that stopped while writing).
_DONE = "chunk_table.json"
# What this code writes: 2 may hold sentences (none before it wrote "format" at all).
FORMAT = 2

_Vectors = np.ndarray[Any, np.dtype[np.float32]]


def chunk_heading(title: str, section: object) -> str:
    """What a chunk's indexed text starts with: its document's title, and its section when
    it has one of its own."""
    if isinstance(section, str) and section and section != title:
        return f"{title}: {section}"
    return title


def indexed_text(text: str, metadata: Mapping[str, Any]) -> str:
    """The text a chunk is embedded and keyword-indexed as: its heading, then the chunk (the
    store keeps the chunk alone, and the heading's parts in its metadata)."""
    return f"{chunk_heading(str(metadata.get('title', '')), metadata.get('section'))}\n{text}"


@dataclass(frozen=True)
class ChunkRecord:
    text: str
    metadata: dict[str, Any]
    vector: _Vectors
    # The multilingual model's vector, when the table holds them.
    multilingual: _Vectors | None = None


@dataclass(frozen=True)
class MultilingualVectors:
    """A table's second vector per row, from ``model`` over each chunk's first ``max_tokens``
    tokens (``pipelines.index.multilingual``)."""

    model: str
    max_tokens: int
    derivation: int
    vectors: _Vectors

    def describe(self) -> dict[str, Any]:
        return {"model": self.model, "max_tokens": self.max_tokens, "derivation": self.derivation}


def multilingual_key(embeddings: Embeddings) -> dict[str, Any]:
    """What a table records of the multilingual ``embeddings`` its vectors come from: a
    reader uses them only with a model that matches."""
    return {
        "model": str(getattr(embeddings, "name", "")),
        "max_tokens": _max_tokens(embeddings),
        "derivation": int(getattr(embeddings, "derivation", 0)),
    }


def _max_tokens(embeddings: Embeddings) -> int:
    return int(getattr(embeddings, "max_tokens", 0))


@functools.cache
def _blas() -> ThreadpoolController:
    return ThreadpoolController()


class ChunkTableWriter:
    """Writes a table row by row, in the keyword index's order; vectors go straight to disk,
    so an ingest holds no more of them than it did before. Use it as a context manager: the
    table is finished when the block ends normally, and left unreadable when it raises.

    With ``sentences_model`` (the embedding model's name) every :meth:`add` gives each row's
    sentences too, and the table holds them. With ``multilingual`` (a multilingual model) each
    row also gets that model's vector of its indexed text (``indexed`` in :meth:`add`)."""

    def __init__(
        self,
        folder: Path,
        rows: int,
        *,
        sentences_model: str | None = None,
        multilingual: Embeddings | None = None,
        pooled: bool = False,
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._folder = folder
        self._rows = rows
        self._vectors: np.memmap[Any, np.dtype[np.float32]] | None = None  # on the first add
        self._records = (folder / _RECORDS).open("wb")
        self._offsets = np.zeros(rows + 1, dtype=np.int64)
        self._written = 0
        self._sentences = (
            SentenceWriter(folder, rows, sentences_model, pooled=pooled)
            if sentences_model is not None
            else None
        )
        self._multilingual = multilingual
        self._second: np.memmap[Any, np.dtype[np.float32]] | None = None  # on the first add

    def __enter__(self) -> ChunkTableWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None:
            self.close()
        else:
            self._records.close()
            self._vectors = None
            self._second = None
            if self._sentences is not None:
                self._sentences.abort()

    def add(
        self,
        texts: Sequence[str],
        metadatas: Sequence[dict[str, Any]],
        vectors: Any,
        sentences: Sequence[PassageSentences] | None = None,
        indexed: Sequence[str] | None = None,
        multilingual: Any = None,
    ) -> None:
        """The next rows: one text, metadata and vector each, and their sentences when the
        table holds them. A table with a multilingual model embeds each row's ``indexed``
        text (heading and chunk, as the keyword index holds it) with it, unless its
        ``multilingual`` vectors are given."""
        block = np.asarray(vectors, dtype=np.float32)
        if not len(texts) == len(metadatas) == len(block):
            raise ValueError("a chunk table row needs one text, metadata and vector each")
        end = self._written + len(texts)
        if end > self._rows:
            raise ValueError(f"a chunk table of {self._rows} rows was given {end}")
        if (sentences is None) != (self._sentences is None):
            raise ValueError("a table holds every row's sentences or none")
        if self._sentences is not None and sentences is not None:
            self._sentences.add(texts, sentences)
        if self._vectors is None:
            self._vectors = _rows_file(self._folder / _VECTORS, self._rows, block)
        self._vectors[self._written : end] = block
        if self._multilingual is not None:
            if multilingual is None:
                if indexed is None or len(indexed) != len(texts):
                    raise ValueError("a table with multilingual vectors needs each row's text")
                multilingual = model_vectors(self._multilingual, indexed)
            second = np.asarray(multilingual, dtype=np.float32)
            if self._second is None:
                self._second = _rows_file(self._folder / _MULTILINGUAL, self._rows, second)
            self._second[self._written : end] = second
        position = int(self._offsets[self._written])
        for row, (text, metadata) in enumerate(zip(texts, metadatas, strict=True)):
            encoded = json.dumps({"t": text, "m": metadata}, ensure_ascii=False).encode()
            self._records.write(encoded)
            position += len(encoded)
            self._offsets[self._written + row + 1] = position
        self._written = end

    def close(self) -> None:
        """Finish the table; it is readable only once every row was added."""
        self._records.close()
        if self._written != self._rows:
            if self._sentences is not None:
                self._sentences.abort()
            raise ValueError(f"a chunk table of {self._rows} rows got {self._written}")
        if self._vectors is None:  # no rows at all
            np.save(self._folder / _VECTORS, np.zeros((0, 0), dtype=np.float32))
        else:
            self._vectors.flush()
            self._vectors = None
        np.save(self._folder / _OFFSETS, self._offsets)
        done: dict[str, Any] = {"format": FORMAT, "rows": self._rows}
        if self._sentences is not None:
            done["sentences"] = self._sentences.close()
        if self._multilingual is not None and self._second is not None:
            self._second.flush()
            self._second = None
            done["multilingual"] = multilingual_key(self._multilingual)
        _write_done(self._folder, done)


def _rows_file(path: Path, rows: int, block: _Vectors) -> np.memmap[Any, np.dtype[np.float32]]:
    """A float32 .npy file of ``rows`` rows as wide as ``block``'s, mapped for writing (rows
    go straight to disk, not held in memory)."""
    return np.lib.format.open_memmap(
        path, mode="w+", dtype=np.float32, shape=(rows, block.shape[1])
    )


def _write_done(folder: Path, done: dict[str, Any]) -> None:
    # Replaced whole: a reader sees the old description or the new one, never half of one.
    partial = folder / f".{_DONE}.{os.getpid()}"
    partial.write_text(json.dumps(done), encoding="utf-8")
    partial.replace(folder / _DONE)


class ChunkTable:
    """A saved table, memory-mapped: opening it reads nothing but its offsets."""

    def __init__(self, vectors: _Vectors, records: mmap.mmap | bytes, offsets: list[int]) -> None:
        self.vectors = vectors
        self._records = records
        self._offsets = offsets
        # Each chunk's sentences, when the table holds them (format 2, written by an ingest).
        self.sentences: StoredSentences | None = None
        self.multilingual: MultilingualVectors | None = None
        self.format = 1

    def __len__(self) -> int:
        return len(self.vectors)

    @classmethod
    def load(cls, folder: Path) -> ChunkTable | None:
        """The table saved in ``folder``, or None when there is none (a version ingested
        before chunk tables existed: the retriever reads those chunks from Chroma)."""
        try:
            done = json.loads((folder / _DONE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        vectors = np.load(folder / _VECTORS, mmap_mode="r")
        offsets = np.load(folder / _OFFSETS).tolist()  # ints: they slice bytes
        with (folder / _RECORDS).open("rb") as stream:
            # An empty file cannot be memory-mapped; an empty table has no records to read.
            records = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) if offsets[-1] else b""
        table = cls(vectors, records, offsets)
        table.format = int(done.get("format", 1)) if isinstance(done, dict) else 1
        sentences = done.get("sentences") if isinstance(done, dict) else None
        table.multilingual = _load_multilingual(folder, done, len(vectors))
        if table.format == FORMAT and isinstance(sentences, dict):
            try:
                # Reading a row's text without holding the table: a table let go is freed
                # at once (with its maps), not when a cycle is collected.
                text_of = functools.partial(_record_text, records, offsets)
                table.sentences = StoredSentences(folder, sentences, text_of)
            except (OSError, ValueError, KeyError, TypeError):
                table.sentences = None  # unreadable: worked out when needed, as without
            else:
                chunk_sentences.register(table.sentences)
        return table

    def text(self, row: int) -> str:
        """The text of one row."""
        return _record_text(self._records, self._offsets, row)

    def nearest(self, queries: _Vectors, k: int, *, multilingual: bool = False) -> list[list[int]]:
        """For each query vector, the rows of the ``k`` most similar vectors, best first, by
        exhaustive search (vectors are unit length, so the dot product is the cosine); with
        ``multilingual``, among the multilingual model's vectors (the queries are its)."""
        matrix = self.vectors
        if multilingual:
            if self.multilingual is None:
                raise ValueError("this chunk table holds no multilingual vectors")
            matrix = self.multilingual.vectors
        if not len(matrix):
            return [[] for _ in queries]
        # On one thread: OpenBLAS's own threads keep spinning after a product and take the
        # cores from the embedding model's next run (about 5 ms a question, measured).
        with _blas().limit(limits=1, user_api="blas"):
            scores = matrix @ np.asarray(queries, dtype=np.float32).T  # rows x queries
        k = min(k, len(matrix))
        found = []
        for column in scores.T:
            best = np.argpartition(-column, k - 1)[:k] if k < len(column) else np.arange(k)
            found.append([int(row) for row in best[np.argsort(-column[best], kind="stable")]])
        return found

    def read(self, rows: Sequence[int], *, multilingual: bool = False) -> list[ChunkRecord]:
        """The records of ``rows``, in that order; with ``multilingual``, each with its
        multilingual vector when the table holds them (only a search through that model
        reads them)."""
        wanted = np.asarray(rows, dtype=np.int64)
        vectors = np.asarray(self.vectors[wanted])
        held = self.multilingual if multilingual else None
        second = np.asarray(held.vectors[wanted]) if held is not None else None
        found = []
        for position, row in enumerate(rows):
            record = json.loads(self._records[self._offsets[row] : self._offsets[row + 1]])
            found.append(
                ChunkRecord(
                    record["t"],
                    record["m"],
                    vectors[position],
                    second[position] if second is not None else None,
                )
            )
        return found

    def record(self, row: int) -> tuple[str, dict[str, Any]]:
        """The text and metadata of one row."""
        record = json.loads(self._records[self._offsets[row] : self._offsets[row + 1]])
        return record["t"], record["m"]


def _load_multilingual(folder: Path, done: Any, rows: int) -> MultilingualVectors | None:
    described = done.get("multilingual") if isinstance(done, dict) else None
    if not isinstance(described, dict):
        return None
    try:
        vectors = np.load(folder / _MULTILINGUAL, mmap_mode="r")
        model, max_tokens = str(described["model"]), int(described["max_tokens"])
        derivation = int(described.get("derivation", 0))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # unreadable: searched by its own vectors alone, as a table without
    if vectors.ndim != 2 or len(vectors) != rows:
        return None
    return MultilingualVectors(model, max_tokens, derivation, vectors)


def _record_text(records: mmap.mmap | bytes, offsets: list[int], row: int) -> str:
    text: str = json.loads(records[offsets[row] : offsets[row + 1]])["t"]
    return text


# Rows worked out and written at a time when sentences are added to an existing table.
_SENTENCE_BATCH = 2000


def add_sentences(folder: Path, embeddings: Embeddings) -> bool:
    """Give the table in ``folder`` its chunks' sentences, if it has none (a version ingested
    before tables held them); whether it wrote them. The table's own
    files are untouched and ``chunk_table.json`` is replaced last, whole, so a reader of the
    table meanwhile is not disturbed."""
    model = model_name(embeddings)
    table = ChunkTable.load(folder)
    if model is None or table is None:
        return False
    done = json.loads((folder / _DONE).read_text(encoding="utf-8"))
    if "sentences" in done:
        # Written already (by this model: a version's model never changes). Files a reader
        # may have mapped are never rewritten.
        return False
    pooler = pooling_model(embeddings)
    writer = SentenceWriter(folder, len(table), model, pooled=pooler is not None)
    memo = VectorMemo()
    try:
        for start in range(0, len(table), _SENTENCE_BATCH):
            rows = range(start, min(start + _SENTENCE_BATCH, len(table)))
            if pooler is not None:
                # The chunk's pass again, as ingestion ran it: over its heading and text.
                records = [table.record(row) for row in rows]
                texts = [text for text, _ in records]
                embedded_as = [indexed_text(text, metadata) for text, metadata in records]
                _, found = work_out_pooled(pooler, texts, embedded_as, memo=memo)
            else:
                texts = [table.text(row) for row in rows]
                found = work_out(embeddings, texts, memo=memo)
            writer.add(texts, found)
        meta = writer.close()
    except BaseException:
        writer.abort()
        raise
    _write_done(folder, {**done, "format": FORMAT, "sentences": meta})
    return True


# Rows embedded and written at a time when multilingual vectors are added to a table.
_MULTILINGUAL_BATCH = 256


def add_multilingual(folder: Path, embeddings: Embeddings) -> bool:
    """Give the table in ``folder`` the multilingual ``embeddings``' vector of each row, if
    it has none from that model; whether it wrote them. As :func:`add_sentences`, the
    table's other files are untouched and ``chunk_table.json`` is replaced last."""
    table = ChunkTable.load(folder)
    if table is None:
        return False
    key = multilingual_key(embeddings)
    if table.multilingual is not None and table.multilingual.describe() == key:
        return False
    done = json.loads((folder / _DONE).read_text(encoding="utf-8"))
    # A new file under a new name: a reader may have the old one mapped.
    partial = folder / f".{_MULTILINGUAL}.{os.getpid()}"
    try:
        second = None  # opened once the first rows give the vectors' width
        for start in range(0, len(table), _MULTILINGUAL_BATCH):
            rows = range(start, min(start + _MULTILINGUAL_BATCH, len(table)))
            block = model_vectors(embeddings, [indexed_text(*table.record(row)) for row in rows])
            if second is None:
                second = _rows_file(partial, len(table), block)
            second[start : start + len(block)] = block
        if second is None:  # no rows at all
            with partial.open("wb") as empty:
                np.save(empty, np.zeros((0, 0), dtype=np.float32))
        else:
            second.flush()
            del second
        partial.replace(folder / _MULTILINGUAL)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    _write_done(folder, {**done, "multilingual": key})
    return True
