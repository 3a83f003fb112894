"""Where collections live: a Chroma folder under the home, or a Chroma server.

A logical collection (``reactome``) is stored as versions (``ra_reactome__<stamp>``). A new
version is built beside the live one and only marked complete, in one metadata update, once
every chunk and its keyword index are written; readers use the newest complete version. So a
failed or interrupted ingest leaves the previous collection answering, never half a new one.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import chromadb
from chromadb.api import ClientAPI
from chromadb.api.models.Collection import Collection
from chromadb.config import Settings as ChromaSettings

from pipelines.definitions import COLLECTION_NAMES
from pipelines.errors import ConfigurationError, NotIngestedError, StoreUnavailableError
from pipelines.settings import Settings

__all__ = [
    "COLLECTION_NAMES",
    "CollectionInfo",
    "StoredVersion",
    "active_version",
    "check_embedding_model",
    "collection_infos",
    "keyword_index_dir",
    "new_version_name",
    "open_client",
    "remove_version",
]


_PREFIX = "ra_"
# Chroma metadata keys we own; everything a `collections` listing shows comes from here.
LOGICAL, COMPLETE, RELEASE, MODEL, FILES, DOCUMENTS, CHUNKS, CREATED, SOURCE = (
    "ra_logical",
    "ra_complete",
    "ra_release",
    "ra_embedding_model",
    "ra_files",
    "ra_documents",
    "ra_chunks",
    "ra_created_at",
    "ra_source",
)


def open_client(settings: Settings) -> ClientAPI:
    """The Chroma client the settings ask for; unreachable stores raise a clear error."""
    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    try:
        if settings.chroma_host:
            return chromadb.HttpClient(
                host=settings.chroma_host, port=settings.chroma_port, settings=chroma_settings
            )
        settings.chroma_path.mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=settings.chroma_path, settings=chroma_settings)
    except Exception as error:  # chromadb raises plain exceptions for both cases
        where = (
            f"the Chroma server at {settings.chroma_host}:{settings.chroma_port}"
            if settings.chroma_host
            else f"the Chroma folder {settings.chroma_path}"
        )
        fix = (
            "start it with 'chroma run --path DIR --host HOST --port PORT' or unset CHROMA_HOST"
            if settings.chroma_host
            else "check the folder is writable, or point REACTOME_ANSWERS_HOME elsewhere"
        )
        raise StoreUnavailableError(f"cannot open {where} ({error})", fix=fix) from error


def new_version_name(logical: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S%f")
    return f"{_PREFIX}{logical}__{stamp}"


def keyword_index_dir(settings: Settings, version: str) -> Path:
    return settings.home / "keyword" / version


@dataclass(frozen=True)
class StoredVersion:
    collection: Collection
    metadata: dict[str, Any]

    @property
    def name(self) -> str:
        return self.collection.name


def _versions(client: ClientAPI, logical: str) -> list[StoredVersion]:
    try:
        collections = client.list_collections()
    except Exception as error:
        raise StoreUnavailableError(
            f"cannot list collections ({error})", fix="check that the Chroma store is reachable"
        ) from error
    found = [
        StoredVersion(collection, dict(collection.metadata or {}))
        for collection in collections
        if (collection.metadata or {}).get(LOGICAL) == logical
    ]
    return sorted(found, key=lambda version: version.name)


def active_version(client: ClientAPI, logical: str) -> StoredVersion | None:
    complete = [v for v in _versions(client, logical) if v.metadata.get(COMPLETE) is True]
    return complete[-1] if complete else None


def stale_versions(client: ClientAPI, logical: str, keep: str) -> list[StoredVersion]:
    return [version for version in _versions(client, logical) if version.name != keep]


def remove_version(client: ClientAPI, settings: Settings, version: str) -> None:
    client.delete_collection(version)
    shutil.rmtree(keyword_index_dir(settings, version), ignore_errors=True)


@dataclass(frozen=True)
class CollectionInfo:
    name: str
    documents: int
    chunks: int
    release: str
    embedding_model: str
    files: dict[str, str]
    created_at: str
    source: str
    version: str

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "documents": self.documents,
            "chunks": self.chunks,
            "release": self.release,
            "embedding_model": self.embedding_model,
            "files": self.files,
            "created_at": self.created_at,
            "source": self.source,
            "version": self.version,
        }


def collection_infos(client: ClientAPI) -> list[CollectionInfo]:
    infos = []
    for logical in COLLECTION_NAMES:
        version = active_version(client, logical)
        if version is None:
            continue
        meta = version.metadata
        infos.append(
            CollectionInfo(
                name=logical,
                documents=int(meta.get(DOCUMENTS, 0)),
                chunks=int(meta.get(CHUNKS, 0)),
                release=str(meta.get(RELEASE, "unknown")),
                embedding_model=str(meta.get(MODEL, "")),
                files=json.loads(str(meta.get(FILES, "{}"))),
                created_at=str(meta.get(CREATED, "")),
                source=str(meta.get(SOURCE, "")),
                version=version.name,
            )
        )
    return infos


def check_embedding_model(client: ClientAPI, logical: str, settings: Settings) -> StoredVersion:
    """The live version of ``logical``, refusing to query it with a different model."""
    version = active_version(client, logical)
    if version is None:
        raise NotIngestedError(
            f"collection {logical!r} has not been ingested into {settings.home}",
            fix="run 'reactome-answers ingest --sample' (or --from DIR)",
        )
    stored = version.metadata.get(MODEL)
    if stored != settings.embeddings:
        raise ConfigurationError(
            f"collection {logical!r} was embedded with {stored!r} but the settings use "
            f"{settings.embeddings!r}; vectors from different models cannot be compared",
            fix=f"set REACTOME_ANSWERS_EMBEDDINGS={stored} or re-ingest with the new model",
        )
    return version
