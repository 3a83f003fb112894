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
"""

from __future__ import annotations

import functools
import json
import mmap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController

__all__ = ["ChunkRecord", "ChunkTable", "ChunkTableWriter"]

_VECTORS = "vectors.npy"
_RECORDS = "records.bin"
_OFFSETS = "record_offsets.npy"
# Written last: a folder without it holds no table (an ingest from before tables existed, or
# one that stopped while writing).
_DONE = "chunk_table.json"

_Vectors = np.ndarray[Any, np.dtype[np.float32]]


@dataclass(frozen=True)
class ChunkRecord:
    text: str
    metadata: dict[str, Any]
    vector: _Vectors


@functools.cache
def _blas() -> ThreadpoolController:
    return ThreadpoolController()


class ChunkTableWriter:
    """Writes a table row by row, in the keyword index's order; vectors go straight to disk,
    so an ingest holds no more of them than it did before. Use it as a context manager: the
    table is finished when the block ends normally, and left unreadable when it raises."""

    def __init__(self, folder: Path, rows: int) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._folder = folder
        self._rows = rows
        self._vectors: np.memmap[Any, np.dtype[np.float32]] | None = None  # on the first add
        self._records = (folder / _RECORDS).open("wb")
        self._offsets = np.zeros(rows + 1, dtype=np.int64)
        self._written = 0

    def __enter__(self) -> ChunkTableWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None:
            self.close()
        else:
            self._records.close()
            self._vectors = None

    def add(self, texts: Sequence[str], metadatas: Sequence[dict[str, Any]], vectors: Any) -> None:
        """The next rows: one text, metadata and vector each."""
        block = np.asarray(vectors, dtype=np.float32)
        if not len(texts) == len(metadatas) == len(block):
            raise ValueError("a chunk table row needs one text, metadata and vector each")
        end = self._written + len(texts)
        if end > self._rows:
            raise ValueError(f"a chunk table of {self._rows} rows was given {end}")
        if self._vectors is None:
            self._vectors = np.lib.format.open_memmap(
                self._folder / _VECTORS,
                mode="w+",
                dtype=np.float32,
                shape=(self._rows, block.shape[1]),
            )
        self._vectors[self._written : end] = block
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
            raise ValueError(f"a chunk table of {self._rows} rows got {self._written}")
        if self._vectors is None:  # no rows at all
            np.save(self._folder / _VECTORS, np.zeros((0, 0), dtype=np.float32))
        else:
            self._vectors.flush()
            self._vectors = None
        np.save(self._folder / _OFFSETS, self._offsets)
        (self._folder / _DONE).write_text(json.dumps({"rows": self._rows}), encoding="utf-8")


class ChunkTable:
    """A saved table, memory-mapped: opening it reads nothing but its offsets."""

    def __init__(self, vectors: _Vectors, records: mmap.mmap | bytes, offsets: list[int]) -> None:
        self.vectors = vectors
        self._records = records
        self._offsets = offsets

    def __len__(self) -> int:
        return len(self.vectors)

    @classmethod
    def load(cls, folder: Path) -> ChunkTable | None:
        """The table saved in ``folder``, or None when there is none (a version ingested
        before chunk tables existed: the retriever reads those chunks from Chroma)."""
        if not (folder / _DONE).is_file():
            return None
        vectors = np.load(folder / _VECTORS, mmap_mode="r")
        offsets = np.load(folder / _OFFSETS).tolist()  # ints: they slice bytes
        with (folder / _RECORDS).open("rb") as stream:
            # An empty file cannot be memory-mapped; an empty table has no records to read.
            records = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) if offsets[-1] else b""
        return cls(vectors, records, offsets)

    def nearest(self, queries: _Vectors, k: int) -> list[list[int]]:
        """For each query vector, the rows of the ``k`` most similar vectors, best first, by
        exhaustive search (vectors are unit length, so the dot product is the cosine)."""
        if not len(self.vectors):
            return [[] for _ in queries]
        # On one thread: OpenBLAS's own threads keep spinning after a product and take the
        # cores from the embedding model's next run (about 5 ms a question, measured).
        with _blas().limit(limits=1, user_api="blas"):
            scores = self.vectors @ np.asarray(queries, dtype=np.float32).T  # rows x queries
        k = min(k, len(self.vectors))
        found = []
        for column in scores.T:
            best = np.argpartition(-column, k - 1)[:k] if k < len(column) else np.arange(k)
            found.append([int(row) for row in best[np.argsort(-column[best], kind="stable")]])
        return found

    def read(self, rows: Sequence[int]) -> list[ChunkRecord]:
        """The records of ``rows``, in that order."""
        vectors = np.asarray(self.vectors[np.asarray(rows, dtype=np.int64)])
        found = []
        for position, row in enumerate(rows):
            record = json.loads(self._records[self._offsets[row] : self._offsets[row + 1]])
            found.append(ChunkRecord(record["t"], record["m"], vectors[position]))
        return found
