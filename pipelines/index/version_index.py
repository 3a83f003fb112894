"""A collection version's local indexes (BM25 keyword index and chunk table), on any machine.

Ingest writes them beside the Chroma store it fills. An instance that shares only the store
(a Chroma server) has no such folder: it builds one from what the store holds of the version,
which is all it takes: each chunk's text, metadata and vector, with rows in chunk id order
as ingest writes them. So every instance ranks exactly as the ingesting machine does (see
``docs/decisions/0018-local-indexes-built-from-the-store.md``). With a model that pools, it
also pools each chunk's sentences from a pass over the chunk, as ingest did, so it quotes and
judges as the ingesting machine does too (decision 0045).

Building happens once per version and machine: under a file lock, so the workers of one
``serve`` share the work, into a temporary folder renamed into place when whole, so no reader
ever sees half an index.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from pipelines.index.chunk_sentences import model_name, work_out_pooled
from pipelines.index.chunk_table import (
    ChunkTable,
    ChunkTableWriter,
    add_multilingual,
    add_sentences,
    indexed_text,
    multilingual_key,
)
from pipelines.index.keyword_index import KeywordIndex

__all__ = [
    "VersionIndex",
    "build_from_store",
    "copy_rows",
    "locked",
]

_READ_BATCH = 1000


@dataclass
class VersionIndex:
    """What one version has beside Chroma on this machine; ``problem`` says why the keyword
    index is missing, when it is (the retriever then ranks by vectors alone)."""

    keyword: KeywordIndex | None
    table: ChunkTable | None
    rows: dict[str, int] = field(default_factory=dict)  # chunk id -> row of both
    problem: str | None = None
    built_at: float = field(default_factory=time.monotonic)

    @classmethod
    def load(cls, folder: Path) -> VersionIndex | None:
        """The indexes saved in ``folder``, or None when there are none."""
        try:
            keyword = KeywordIndex.load(folder)
        except (OSError, ValueError):
            return None  # no folder, or one being written by an ingest
        table = ChunkTable.load(folder)
        if table is not None and len(table) != len(keyword.chunk_ids):
            table = None  # not written by the same ingest: read from Chroma instead
        rows = {chunk_id: row for row, chunk_id in enumerate(keyword.chunk_ids)} if table else {}
        return cls(keyword, table, rows)

    @classmethod
    def missing(cls, problem: str) -> VersionIndex:
        return cls(None, None, problem=problem)

    def __len__(self) -> int:
        return len(self.keyword.chunk_ids) if self.keyword is not None else 0

    def report(self) -> dict[str, Any]:
        """Which indexes answer for this version, for log headers and ``/healthz``."""
        indexes = ["vectors", "bm25"] if self.keyword is not None else ["vectors"]
        found: dict[str, Any] = {
            "indexes": indexes,
            "chunks_from": "chunk table" if self.table is not None else "store",
        }
        if self.problem:
            found["problem"] = self.problem
        return found


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Held by one process of this machine at a time (released if the process dies)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _lacks_multilingual(found: VersionIndex, multilingual: Callable[[], Embeddings | None]) -> bool:
    if found.table is None:
        return False
    model = multilingual()
    return model is not None and (
        found.table.multilingual is None
        or found.table.multilingual.describe() != multilingual_key(model)
    )


def _lacks_sentences(found: VersionIndex, sentences: Callable[[], Embeddings | None]) -> bool:
    return found.table is not None and found.table.sentences is None and sentences() is not None


def build_from_store(
    collection: Any,
    folder: Path,
    *,
    lock: Path,
    chunks: int | None = None,
    multilingual: Callable[[], Embeddings | None] = lambda: None,
    sentences: Callable[[], Embeddings | None] = lambda: None,
) -> VersionIndex:
    """The indexes of the version ``collection`` (a Chroma collection), from ``folder`` when
    a whole set of ``chunks`` rows is there already, else built from the store into it while
    holding the file ``lock``. When ``multilingual`` gives a model, the chunk table holds its
    vectors too: added to a table that lacks them, as the keyword index is built, from the
    chunks' texts (decision 0037). When ``sentences`` gives a model that pools, the table
    holds each chunk's sentences pooled from its pass, as the ingesting machine's does, so
    this instance quotes and judges as that one (decision 0045)."""

    def lacks(found: VersionIndex) -> bool:
        return _lacks_multilingual(found, multilingual) or _lacks_sentences(found, sentences)

    found = VersionIndex.load(folder)
    whole = found is not None and (chunks is None or len(found) == chunks)
    if found is not None and whole and not lacks(found):
        return found
    with locked(lock):
        found = VersionIndex.load(folder)  # another process may have built it meanwhile
        if found is not None and (chunks is None or len(found) == chunks):
            if not lacks(found):
                return found
            model = multilingual()
            if model is not None:
                add_multilingual(folder, model)
            pooling = sentences()
            if pooling is not None:
                add_sentences(folder, pooling)
            reloaded = VersionIndex.load(folder)
            if reloaded is None:
                raise OSError(f"the indexes in {folder} cannot be read back")
            return reloaded
        building = folder.parent / f".{folder.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
        try:
            _write(collection, building, multilingual(), sentences())
            if folder.exists():  # stale (another row count) or partial: replaced
                shutil.rmtree(folder)
            building.rename(folder)
        finally:
            shutil.rmtree(building, ignore_errors=True)
    built = VersionIndex.load(folder)
    if built is None:
        raise OSError(f"the indexes written to {folder} cannot be read back")
    return built


def _write(
    collection: Any, folder: Path, multilingual: Embeddings | None, sentences: Embeddings | None
) -> None:
    ids: list[str] = []
    offset = 0
    while True:  # ids alone first: the rows are in id order, read in batches of that order
        page = collection.get(include=[], limit=_READ_BATCH, offset=offset)
        ids += page["ids"]
        if len(page["ids"]) < _READ_BATCH:
            break
        offset += _READ_BATCH
    ids.sort()
    with ChunkTableWriter(
        folder,
        len(ids),
        multilingual=multilingual,
        sentences_model=model_name(sentences) if sentences is not None else None,
        pooled=sentences is not None,
    ) as table:
        texts = copy_rows(collection, ids, table, sentences=sentences)
    KeywordIndex.build(ids, texts).save(folder)


def copy_rows(
    collection: Any,
    ids: Sequence[str],
    table: ChunkTableWriter,
    *,
    sentences: Embeddings | None = None,
) -> list[str]:
    """Add the chunks ``ids`` of a Chroma collection to ``table``, in that order (Chroma
    returns its own), with their sentences pooled by ``sentences`` when given; returns their
    indexed texts (:func:`indexed_text`)."""
    texts: list[str] = []
    for start in range(0, len(ids), _READ_BATCH):
        wanted = list(ids[start : start + _READ_BATCH])
        page = collection.get(ids=wanted, include=["documents", "metadatas", "embeddings"])
        position = {chunk_id: index for index, chunk_id in enumerate(page["ids"])}
        if len(position) != len(wanted):
            raise OSError("chunks vanished from the store while they were copied")
        order = [position[chunk_id] for chunk_id in wanted]
        documents, metadatas = page["documents"] or [], page["metadatas"] or []
        block_texts = [documents[index] or "" for index in order]
        block_metadatas = [dict(metadatas[index] or {}) for index in order]
        indexed = [
            indexed_text(text, metadata)
            for text, metadata in zip(block_texts, block_metadatas, strict=True)
        ]
        pooled = (
            work_out_pooled(sentences, block_texts, indexed)[1] if sentences is not None else None
        )
        table.add(
            block_texts,
            block_metadatas,
            np.asarray(page["embeddings"], dtype=np.float32)[order],
            pooled,
            indexed=indexed,
        )
        texts += indexed
    return texts
