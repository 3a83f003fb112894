"""Ingestion: release files -> documents -> chunks -> a new collection version, then swap.

Ids are deterministic (collection, stable id or url, chunk number) and every chunk carries a
content hash, so a rerun knows what was added, updated, deleted or unchanged, re-embeds only
what changed, and writes nothing to the store when nothing did (a version from before chunk
tables, or before they held sentences, still gets what it lacks beside it).

Each chunk's sentences are split and embedded here too, once, and kept with the chunk table
(``pipelines.index.chunk_sentences``): the answer model and the evidence judge read them
instead of working them out after retrieval. An unchanged chunk's are copied from the
previous version's table; a version from before tables held them gets them on the next run.
With the English-only offline model, each chunk also gets a multilingual model's vector in
the table (decision 0037), copied for an unchanged chunk, added to a version that lacks them.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from chromadb.api import ClientAPI
from langchain_core.embeddings import Embeddings
from langchain_text_splitters import RecursiveCharacterTextSplitter
from tqdm import tqdm

from pipelines.catalog.catalog import Catalog, CollectionDefinition, catalog_for
from pipelines.catalog.loaders import LoadedDocument, LoadResult, Problem
from pipelines.core.errors import ConfigurationError, InputError
from pipelines.core.hashing import joined_digest
from pipelines.core.settings import Settings
from pipelines.index import store
from pipelines.index.chunk_sentences import (
    POOLED,
    PassageSentences,
    VectorMemo,
    model_name,
    model_vectors,
    pooling_model,
    work_out,
    work_out_pooled,
)
from pipelines.index.chunk_table import (
    ChunkTable,
    ChunkTableWriter,
    add_multilingual,
    add_sentences,
    indexed_text,
    multilingual_key,
)
from pipelines.index.embeddings import MiniLMEmbeddings, make_multilingual_embeddings
from pipelines.index.keyword_index import KeywordIndex
from pipelines.index.version_index import VersionIndex, copy_rows, locked

__all__ = [
    "CollectionFiles",
    "CollectionSummary",
    "chunk_documents",
    "ingest",
    "locate_files",
    "sample_files",
]

# Chroma refuses a single add of more than ~5,400 records.
_WRITE_BATCH = 2000
_Vector = np.ndarray[Any, np.dtype[np.float32]]
_EMBED_BATCH = 256
_READ_BATCH = 5000
_SPLITTER = RecursiveCharacterTextSplitter(
    chunk_size=1000, chunk_overlap=120, separators=["\n\n", "\n", ". ", "; ", ", ", " ", ""]
)


@dataclass(frozen=True)
class CollectionFiles:
    """The files one collection is read from, by the role its declaration gives each."""

    definition: CollectionDefinition
    paths: dict[str, Path]

    @property
    def name(self) -> str:
        return self.definition.name

    def load(self) -> LoadResult:
        """The declared loader's documents, cited only as the declaration allows."""
        loaded = self.definition.load_function()(**self.paths)
        if not isinstance(loaded, LoadResult):
            raise ConfigurationError(
                f"{self.definition.path}: loader: {self.definition.loader} returned "
                f"{type(loaded).__name__}, not a LoadResult",
                fix="make the loader return pipelines.catalog.loaders.LoadResult",
            )
        allowed = {"st_id": {"st_id"}, "url": {"url"}, "context": set()}[self.definition.cited_as]
        for number, document in enumerate(loaded.documents):
            if set(document.citation) - {"display_name"} - allowed:
                citation = {k: v for k, v in document.citation.items() if k in allowed}
                if citation:
                    citation["display_name"] = document.citation.get("display_name", "")
                loaded.documents[number] = replace(document, citation=citation)
        return loaded

    def describe(self) -> str:
        return ", ".join(str(path) for path in self.paths.values())


@dataclass
class CollectionSummary:
    name: str
    added: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    skipped: int = 0
    errors: int = 0
    documents: int = 0
    chunks: int = 0
    seconds: float = 0.0
    problems: list[Problem] = field(default_factory=list)
    failure: str | None = None

    def as_json(self, *, verbose: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "added": self.added,
            "updated": self.updated,
            "deleted": self.deleted,
            "unchanged": self.unchanged,
            "skipped": self.skipped,
            "errors": self.errors,
            "documents": self.documents,
            "chunks": self.chunks,
            "seconds": round(self.seconds, 3),
        }
        if self.failure:
            data["failure"] = self.failure
        if verbose:
            data["problems"] = [str(problem) for problem in self.problems]
        return data


def locate_files(
    directory: Path,
    wanted: Sequence[str],
    *,
    required: bool,
    catalog: Catalog | None = None,
) -> dict[str, CollectionFiles]:
    """Find each wanted collection's files in ``directory`` or its ``<collection>/`` folder.

    With ``required`` (the user named the collections) a missing collection is an error;
    otherwise it is left out, and only finding nothing at all is an error.
    """
    if not directory.is_dir():
        raise InputError(f"{directory} is not a folder", fix="give --from an existing folder")
    return _gather(
        wanted,
        catalog or catalog_for(),
        lambda definition: [directory / definition.name, directory],
        required=required,
        what="source files",
        fix="point --from at a folder holding Reactome release files, or use --collections",
    )


def sample_files(
    wanted: Sequence[str], *, required: bool, catalog: Catalog | None = None
) -> dict[str, CollectionFiles]:
    """Each wanted collection's sample: the files in its own declaration's folder."""
    return _gather(
        wanted,
        catalog or catalog_for(),
        lambda definition: [definition.folder],
        required=required,
        what="sample files",
        fix="ingest those collections with --from DIR, or leave them out with --collections",
    )


def _gather(
    wanted: Sequence[str],
    catalog: Catalog,
    folders_of: Callable[[CollectionDefinition], list[Path]],
    *,
    required: bool,
    what: str,
    fix: str,
) -> dict[str, CollectionFiles]:
    """Each wanted collection's files, from the first of its folders that has each one."""
    found: dict[str, CollectionFiles] = {}
    missing: list[str] = []
    for name in catalog.check(wanted):
        definition = catalog[name]
        folders = folders_of(definition)
        paths = {}
        for spec in definition.files:
            path = spec.find(folders)
            if path is not None:
                paths[spec.role] = path
        lacking = [s.describe() for s in definition.files if s.required and s.role not in paths]
        if lacking:
            places = " or ".join(str(folder) for folder in folders)
            missing.append(f"{name} ({', '.join(lacking)} in {places})")
        else:
            found[name] = CollectionFiles(definition, paths)
    if (required and missing) or not found:
        raise InputError(f"no {what} for {'; '.join(missing)}", fix=fix)
    return found


def _hash(*parts: str) -> str:
    # Stored in every chunk's metadata and compared on the next ingest: changing the
    # algorithm or length would make every document look updated.
    return joined_digest(*parts, algorithm="sha256", chars=16)


@dataclass(frozen=True)
class Chunk:
    id: str
    text: str
    embed_text: str
    metadata: dict[str, str | int | float | bool]


def _document_hash(document: LoadedDocument) -> str:
    return _hash(
        document.title,
        document.text,
        json.dumps(document.citation, sort_keys=True),
        json.dumps(document.metadata, sort_keys=True),
    )


def chunk_documents(collection: str, documents: Sequence[LoadedDocument]) -> list[Chunk]:
    """Split each document; every chunk keeps its entity's identity and citation.

    ``entity_hash`` covers every document of an entity (all sections of a page), so a rerun
    counts added, updated and deleted entities, not sections.
    """
    parts: dict[str, list[str]] = {}
    for document in documents:
        parts.setdefault(document.entity_key, []).append(_document_hash(document))
    entity_hashes = {entity: _hash(*hashes) for entity, hashes in parts.items()}
    chunks = []
    for document in documents:
        pieces = _SPLITTER.split_text(document.text) or [document.text]
        doc_hash = _document_hash(document)
        for number, piece in enumerate(pieces):
            # What a chunk is cited as comes from its citation alone (which ingestion has
            # already held to the collection's cited_as), never from loose metadata.
            loose = {k: v for k, v in document.metadata.items() if k not in ("st_id", "url")}
            metadata: dict[str, str | int | float | bool] = {
                **loose,
                "collection": collection,
                "doc_key": document.key,
                "entity": document.entity_key,
                "entity_hash": entity_hashes[document.entity_key],
                "title": document.title,
                "display_name": document.citation.get("display_name", document.title),
                "origin": document.origin,
                "chunk": number,
                "n_chunks": len(pieces),
                "doc_hash": doc_hash,
                "citable": "st_id" in document.citation,
            }
            if "st_id" in document.citation:
                metadata["st_id"] = document.citation["st_id"]
            if "url" in document.citation:
                metadata["url"] = document.citation["url"]
            # The heading comes from the metadata the store keeps, so that an instance
            # rebuilding the keyword index from the store indexes the very same text.
            embed_text = indexed_text(piece, metadata)
            metadata["content_hash"] = _hash(embed_text, doc_hash)
            chunks.append(
                Chunk(f"{collection}:{document.key}:{number}", piece, embed_text, metadata)
            )
    # In id order: the order an index built from the store has (pipelines.index.version_index).
    chunks.sort(key=lambda chunk: chunk.id)
    return chunks


def _read_all(version: store.StoredVersion) -> Iterator[tuple[str, dict[str, Any]]]:
    offset = 0
    while True:
        page = version.collection.get(include=["metadatas"], limit=_READ_BATCH, offset=offset)
        ids = page["ids"]
        for chunk_id, metadata in zip(ids, page["metadatas"] or [], strict=True):
            yield chunk_id, dict(metadata or {})
        if len(ids) < _READ_BATCH:
            return
        offset += _READ_BATCH


def _old_embeddings(version: store.StoredVersion, ids: Sequence[str]) -> dict[str, _Vector]:
    vectors: dict[str, _Vector] = {}
    for start in range(0, len(ids), _READ_BATCH):
        page = version.collection.get(
            ids=list(ids[start : start + _READ_BATCH]), include=["embeddings"]
        )
        embeddings = page["embeddings"]
        if embeddings is None:
            continue
        for chunk_id, vector in zip(page["ids"], embeddings, strict=True):
            vectors[chunk_id] = np.asarray(vector, dtype=np.float32)
    return vectors


def _add_missing_chunk_table(settings: Settings, version: store.StoredVersion) -> None:
    """Give a version ingested before chunk tables existed its table, copied from Chroma in
    its keyword index's row order, so an unchanged collection gets the faster reads too."""
    folder = store.keyword_index_dir(settings, version.name)
    if not folder.is_dir() or ChunkTable.load(folder) is not None:
        return
    ids = KeywordIndex.load(folder).chunk_ids
    with ChunkTableWriter(folder, len(ids)) as table:
        copy_rows(version.collection, ids, table)


def _previous_sentences(
    settings: Settings,
    previous: store.StoredVersion | None,
    model: str | None,
    pooled: bool = False,
) -> Callable[[str], PassageSentences | None] | None:
    """How to find a chunk's sentences in the previous version's table, so an unchanged
    chunk's are copied, not worked out again (None when it has none from this model)."""
    if previous is None or model is None:
        return None
    table = ChunkTable.load(store.keyword_index_dir(settings, previous.name))
    if table is None or table.sentences is None or table.sentences.model != model:
        return None
    if table.sentences.pooling != (POOLED if pooled else None):
        return None  # vectors made the other way: worked out again
    return table.sentences.find


def _previous_multilingual(
    settings: Settings, previous: store.StoredVersion | None, model: Embeddings | None
) -> Callable[[str], _Vector | None]:
    """How to find an unchanged chunk's multilingual vector in the previous version's table
    (None when it has none from this model)."""
    if previous is None or model is None:
        return lambda _: None
    index = VersionIndex.load(store.keyword_index_dir(settings, previous.name))
    held = index.table.multilingual if index is not None and index.table is not None else None
    if index is None or held is None or held.describe() != multilingual_key(model):
        return lambda _: None
    rows, vectors = index.rows, held.vectors

    def find(chunk_id: str) -> _Vector | None:
        row = rows.get(chunk_id)
        return None if row is None else np.asarray(vectors[row], dtype=np.float32)

    return find


def _multilingual_block(
    model: Embeddings | None,
    batch: Sequence[Chunk],
    unchanged: set[str],
    known: Callable[[str], _Vector | None],
) -> _Vector | None:
    """The multilingual vectors of a batch of chunks: an unchanged chunk's copied, the rest
    embedded (their indexed text, as the keyword index holds it)."""
    if model is None:
        return None
    found: dict[str, _Vector] = {}
    for chunk in batch:
        vector = known(chunk.id) if chunk.id in unchanged else None
        if vector is not None:
            found[chunk.id] = vector
    fresh = [chunk for chunk in batch if chunk.id not in found]
    if fresh:
        vectors = model_vectors(model, [chunk.embed_text for chunk in fresh])
        found.update(zip((chunk.id for chunk in fresh), vectors, strict=True))
    return np.stack([found[chunk.id] for chunk in batch]).astype(np.float32)


def _embed(embeddings: Embeddings, texts: Sequence[str], bar: tqdm[Any]) -> list[_Vector]:
    """Vectors for ``texts``, in steps small enough for the progress bar to move."""
    vectors: list[_Vector] = []
    for start in range(0, len(texts), _EMBED_BATCH):
        part = list(texts[start : start + _EMBED_BATCH])
        if isinstance(embeddings, MiniLMEmbeddings):
            vectors.extend(embeddings.embed_array(part))
        else:
            vectors.extend(np.asarray(embeddings.embed_documents(part), dtype=np.float32))
        bar.update(len(part))
    return vectors


def _pool(
    embeddings: Any, chunks: Sequence[Chunk], memo: VectorMemo
) -> tuple[_Vector, list[PassageSentences]]:
    """One pooled pass over ``chunks`` as they are embedded: their vectors and sentences."""
    return work_out_pooled(
        embeddings, [c.text for c in chunks], [c.embed_text for c in chunks], memo=memo
    )


def _embed_pooled(
    embeddings: Any,
    chunks: Sequence[Chunk],
    bar: tqdm[Any],
    made: dict[str, PassageSentences],
    memo: VectorMemo,
) -> list[_Vector]:
    """The chunks' vectors, and into ``made`` their sentences pooled from the same pass, in
    steps small enough for the progress bar to move."""
    vectors: list[_Vector] = []
    for start in range(0, len(chunks), _EMBED_BATCH):
        part = chunks[start : start + _EMBED_BATCH]
        block, sentences = _pool(embeddings, part, memo)
        vectors.extend(block)
        made.update(zip((c.id for c in part), sentences, strict=True))
        bar.update(len(part))
    return vectors


def _pooled_sentences(
    embeddings: Any,
    batch: Sequence[Chunk],
    made: dict[str, PassageSentences],
    known: Callable[[str], PassageSentences | None] | None,
    memo: VectorMemo,
) -> list[PassageSentences]:
    """The batch's sentences: made with its vectors, found in the previous table, or (a
    reused chunk whose previous table has none pooled) pooled from a pass of its own."""
    found = {c.id: made[c.id] if c.id in made else known(c.text) if known else None for c in batch}
    missing = [c for c in batch if found[c.id] is None]
    if missing:
        _, sentences = _pool(embeddings, missing, memo)
        found.update(zip((c.id for c in missing), sentences, strict=True))
    return [found[c.id] for c in batch]  # type: ignore[misc]


def _ingest_one(
    client: ClientAPI,
    settings: Settings,
    sources: CollectionFiles,
    embeddings: Embeddings,
    *,
    release: str,
    origin: str,
    progress: bool,
    multilingual: Embeddings | None,
) -> CollectionSummary:
    started = time.perf_counter()
    summary = CollectionSummary(sources.name)
    loaded = sources.load()
    summary.problems = loaded.problems
    summary.skipped = sum(problem.kind == "skipped" for problem in loaded.problems)
    summary.errors = sum(problem.kind == "error" for problem in loaded.problems)
    previous = store.active_version(client, sources.name)
    if not loaded.documents:
        summary.failure = (
            f"nothing to ingest from {sources.describe()}"
            + (f": {loaded.problems[0]}" if loaded.problems else "")
            + ("; the previous collection is kept" if previous else "")
        )
        summary.seconds = time.perf_counter() - started
        return summary

    chunks = chunk_documents(sources.name, loaded.documents)
    new_docs = {chunk.metadata["entity"]: chunk.metadata["entity_hash"] for chunk in chunks}
    old_docs: dict[str, Any] = {}
    old_chunks: dict[str, Any] = {}
    if previous is not None:
        for chunk_id, metadata in _read_all(previous):
            old_docs[metadata.get("entity", chunk_id)] = metadata.get("entity_hash")
            old_chunks[chunk_id] = metadata.get("content_hash")
    summary.added = sum(key not in old_docs for key in new_docs)
    summary.deleted = sum(key not in new_docs for key in old_docs)
    summary.updated = sum(
        key in old_docs and old_docs[key] != value for key, value in new_docs.items()
    )
    summary.unchanged = len(new_docs) - summary.added - summary.updated
    summary.documents, summary.chunks = len(new_docs), len(chunks)

    model = settings.embeddings
    facts: dict[str, str | int | float | bool] = {
        store.LOGICAL: sources.name,
        store.RELEASE: release,
        store.MODEL: model,
        store.FILES: json.dumps(loaded.files, sort_keys=True),
        store.DOCUMENTS: summary.documents,
        store.CHUNKS: summary.chunks,
        store.ORIGIN: origin,
    }
    same_model = previous is not None and previous.metadata.get(store.MODEL) == model
    same_chunks = {chunk.id: chunk.metadata["content_hash"] for chunk in chunks} == old_chunks
    if previous is not None and same_model and same_chunks:
        kept = {key: previous.metadata.get(key) for key in facts}
        if kept != facts:  # same content from a newly named release or file: record it
            previous.collection.modify(metadata={**previous.metadata, **facts})
        # A version from before tables (or before they held sentences) gets what it lacks,
        # under the lock that instances building its indexes take: readers find it at once.
        with locked(store.keyword_index_lock(settings, previous.name)):
            _add_missing_chunk_table(settings, previous)
            folder = store.keyword_index_dir(settings, previous.name)
            if folder.is_dir():
                add_sentences(folder, embeddings)
                if multilingual is not None:
                    add_multilingual(folder, multilingual)
        summary.seconds = time.perf_counter() - started
        return summary

    unchanged = {c.id for c in chunks if old_chunks.get(c.id) == c.metadata["content_hash"]}
    reusable = (
        _old_embeddings(previous, [c.id for c in chunks if c.id in unchanged])
        if previous is not None and same_model
        else {}
    )
    # Each chunk's sentences, split and embedded once here for the answer model and the
    # evidence judge (pipelines.index.chunk_sentences); not for an embedding model we cannot
    # name, since a reader could not tell whose vectors they are.
    sentences_model = model_name(embeddings)
    # Late chunking: sentence vectors pooled from each chunk's own pass, for a model that
    # gives its token states, found as readers find it (through a wrapper's ``wrapped``).
    pooler = pooling_model(embeddings) if sentences_model is not None else None
    pooled = pooler is not None
    known = _previous_sentences(settings, previous if same_model else None, sentences_model, pooled)
    memo = VectorMemo()
    known_multilingual = _previous_multilingual(settings, previous, multilingual)
    version = store.new_version_name(sources.name)
    collection = client.create_collection(
        version,
        embedding_function=None,
        configuration={"hnsw": {"space": "cosine"}},
        metadata={**facts, store.COMPLETE: False},
    )
    try:
        to_embed = sum(chunk.id not in reusable for chunk in chunks)
        with tqdm(
            total=to_embed,
            desc=f"{sources.name:>16}",
            unit="chunk",
            disable=not progress,
            file=sys.stderr,
            leave=False,
        ) as bar:
            # Embed and write one batch at a time: new vectors are held a batch at a time,
            # not for the whole collection (vectors reused from the previous version are read
            # up front, and released as their batch is written).
            folder = store.keyword_index_dir(settings, version)
            with ChunkTableWriter(
                folder,
                len(chunks),
                sentences_model=sentences_model,
                multilingual=multilingual,
                pooled=pooled,
            ) as table:
                for start in range(0, len(chunks), _WRITE_BATCH):
                    batch = chunks[start : start + _WRITE_BATCH]
                    fresh = [chunk for chunk in batch if chunk.id not in reusable]
                    made: dict[str, PassageSentences] = {}
                    if pooler is not None:
                        vectors = _embed_pooled(pooler, fresh, bar, made, memo)
                    else:
                        vectors = _embed(embeddings, [chunk.embed_text for chunk in fresh], bar)
                    reusable.update(zip((chunk.id for chunk in fresh), vectors, strict=True))
                    block = np.stack([reusable.pop(chunk.id) for chunk in batch])
                    texts = [chunk.text for chunk in batch]
                    collection.add(
                        ids=[chunk.id for chunk in batch],
                        embeddings=block,
                        documents=texts,
                        metadatas=[chunk.metadata for chunk in batch],
                    )
                    if pooler is not None:
                        sentences = _pooled_sentences(pooler, batch, made, known, memo)
                    elif sentences_model is not None:
                        sentences = work_out(embeddings, texts, known=known, memo=memo)
                    else:
                        sentences = None
                    table.add(
                        texts,
                        [chunk.metadata for chunk in batch],
                        block,
                        sentences,
                        multilingual=_multilingual_block(
                            multilingual, batch, unchanged, known_multilingual
                        ),
                    )
        # Rows in chunk order, like the chunk table's.
        KeywordIndex.build([c.id for c in chunks], [c.embed_text for c in chunks]).save(folder)
        created = datetime.now(UTC).isoformat(timespec="seconds")
        # The swap: one metadata write makes the new version the one readers use.
        collection.modify(metadata={**facts, store.CREATED: created, store.COMPLETE: True})
    except BaseException:
        store.remove_version(client, settings, version)
        raise
    # The replaced version stays readable for requests already using it; it is removed once
    # no request can still be reading it (store.remove_retired_versions).
    store.retire_versions(client, sources.name, keep=version)
    summary.seconds = time.perf_counter() - started
    return summary


def ingest(
    settings: Settings,
    sources: dict[str, CollectionFiles],
    *,
    release: str = "unknown",
    origin: str = "",
    embeddings: Embeddings | None = None,
    progress: bool = False,
    client: ClientAPI | None = None,
    on_done: Callable[[CollectionSummary], None] | None = None,
) -> list[CollectionSummary]:
    """Ingest each collection in turn; one collection's failure does not stop the others.
    The multilingual model is the settings' (``make_multilingual_embeddings``) beside
    ``embeddings``."""
    from pipelines.index.embeddings import make_embeddings

    client = client or store.open_client(settings)
    embeddings = embeddings or make_embeddings(settings)
    multilingual = make_multilingual_embeddings(settings, embeddings)
    summaries = []
    # In the declared order, whatever order they were found in.
    for name in sorted(sources, key=lambda name: (sources[name].definition.order, name)):
        summary = _ingest_one(
            client,
            settings,
            sources[name],
            embeddings,
            release=release,
            origin=origin,
            progress=progress,
            multilingual=multilingual,
        )
        summaries.append(summary)
        if on_done is not None:
            on_done(summary)
    store.remove_retired_versions(client, settings)
    return summaries
