"""Where collections live: a Chroma folder under the home, or a Chroma server.

A logical collection (``reactome``) is stored as versions (``ra_reactome__<stamp>``). A new
version is built beside the live one and only marked complete, in one metadata update, once
every chunk and its keyword index are written; readers use the newest complete version. So a
failed or interrupted ingest leaves the previous collection answering, never half a new one.

The version it replaces is *retired*, not deleted: a request that started on it finishes on
it. It is removed once it has been retired for longer than any request may run
(:func:`retirement_grace_s`), by the next ingest or by a serving process's housekeeping
(:func:`remove_retired_versions`). Chroma (1.5) neither closes the files of a deleted
collection that a process has read nor deletes its folder, so a process keeps one embedded
client (:func:`open_client`) that a reader reopens when it sees a new version
(:func:`reopen_client`), and folders no collection owns any more are swept. See
``docs/decisions/0001-retiring-collection-versions.md``.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import shutil
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import chromadb
from chromadb.api import ClientAPI
from chromadb.api.models.Collection import Collection
from chromadb.config import Settings as ChromaSettings
from chromadb.errors import NotFoundError

from pipelines.catalog.catalog import catalog_for
from pipelines.core.errors import ConfigurationError, NotIngestedError, StoreUnavailableError
from pipelines.core.settings import Settings

__all__ = [
    "CollectionInfo",
    "StoredVersion",
    "active_version",
    "check_embedding_model",
    "collection_infos",
    "keyword_index_dir",
    "keyword_index_lock",
    "new_version_name",
    "open_client",
    "remove_retired_versions",
    "remove_version",
    "reopen_client",
    "retire_versions",
    "retirement_grace_s",
    "stale_versions",
    "version_named",
]


_PREFIX = "ra_"
# Chroma metadata keys we own; everything a `collections` listing shows comes from here.
LOGICAL, COMPLETE, RELEASE, MODEL, FILES, DOCUMENTS, CHUNKS, CREATED, ORIGIN, RETIRED = (
    "ra_logical",
    "ra_complete",
    "ra_release",
    "ra_embedding_model",
    "ra_files",
    "ra_documents",
    "ra_chunks",
    "ra_created_at",
    "ra_source",
    "ra_retired_at",
)


# One embedded client per Chroma folder in this process: closing it is the only way to make
# Chroma release the indexes it holds, and it only lets go once every client on the folder
# is closed.
_EMBEDDED: dict[Path, ClientAPI] = {}
_EMBEDDED_LOCK = threading.Lock()
# Beyond the request limit: readers look up the live version every few seconds (5 s in the
# retriever, 10 s for log headers), so a retired version may be picked up that much later.
_GRACE_AFTER_REQUEST_S = 15.0


def open_client(settings: Settings) -> ClientAPI:
    """The Chroma client the settings ask for (for a folder, the process's one client for it);
    unreachable stores raise a clear error."""
    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    try:
        if settings.chroma_host:
            return chromadb.HttpClient(
                host=settings.chroma_host, port=settings.chroma_port, settings=chroma_settings
            )
        path = settings.chroma_path.resolve()
        with _EMBEDDED_LOCK:
            client = _EMBEDDED.get(path)
            if client is None:
                path.mkdir(parents=True, exist_ok=True)
                client = chromadb.PersistentClient(path=path, settings=chroma_settings)
                _EMBEDDED[path] = client
            return client
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


def reopen_client(settings: Settings, stale: ClientAPI) -> ClientAPI:
    """Close ``stale``, the process's embedded client, and open a new one, so that Chroma
    releases the files and memory of versions it read that are no longer live. Collections
    fetched through ``stale`` are unusable afterwards: callers must not be using any (the
    retriever holds a write gate). A client that is not the shared one is left alone."""
    if settings.chroma_host:
        return stale  # the server holds the indexes; this process holds nothing to release
    path = settings.chroma_path.resolve()
    with _EMBEDDED_LOCK:
        if _EMBEDDED.get(path) is stale:
            del _EMBEDDED[path]
            with contextlib.suppress(Exception):  # a close that fails leaves nothing to reuse
                cast(Any, stale).close()  # the concrete client has it; ClientAPI does not
        else:
            return stale
    return open_client(settings)


def retirement_grace_s(settings: Settings) -> float:
    """How long a retired version stays readable: the longest a request may run, plus the
    time readers may keep using a version they looked up before it was retired."""
    return settings.request_timeout_s + _GRACE_AFTER_REQUEST_S


def new_version_name(logical: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S%f")
    return f"{_PREFIX}{logical}__{stamp}"


def keyword_index_dir(settings: Settings, version: str) -> Path:
    return settings.home / "keyword" / version


def keyword_index_lock(settings: Settings, version: str) -> Path:
    """The file the processes of this machine lock to build ``version``'s indexes."""
    return settings.home / "keyword" / f".{version}.lock"


@dataclass(frozen=True)
class StoredVersion:
    collection: Collection
    metadata: dict[str, Any]

    @property
    def name(self) -> str:
        return self.collection.name


def _versions(client: ClientAPI, logical: str) -> list[StoredVersion]:
    found = [v for v in _all_versions(client) if v.metadata.get(LOGICAL) == logical]
    return sorted(found, key=lambda version: version.name)


def version_named(client: ClientAPI, name: str) -> StoredVersion:
    """The stored version called ``name`` (retired or not), while it exists."""
    try:
        collection = client.get_collection(name)
    except NotFoundError:
        raise NotIngestedError(
            f"collection version {name} is no longer in the store",
            fix="ask again: the answer will come from the version that is live now",
        ) from None
    except Exception as error:
        raise StoreUnavailableError(
            f"cannot read collection version {name} ({error})",
            fix="check that the Chroma store is reachable",
        ) from error
    return StoredVersion(collection, dict(collection.metadata or {}))


def active_version(client: ClientAPI, logical: str) -> StoredVersion | None:
    complete = [v for v in _versions(client, logical) if v.metadata.get(COMPLETE) is True]
    return complete[-1] if complete else None


def stale_versions(client: ClientAPI, logical: str, keep: str) -> list[StoredVersion]:
    """Every stored version of ``logical`` but ``keep``: retired, or left by a failed run."""
    return [version for version in _versions(client, logical) if version.name != keep]


def retire_versions(client: ClientAPI, logical: str, keep: str) -> list[str]:
    """Mark every version of ``logical`` but ``keep`` as retired now (those already retired
    keep their time); returns the names newly retired."""
    retired = []
    for version in _versions(client, logical):
        if version.name == keep or RETIRED in version.metadata:
            continue
        version.collection.modify(metadata={**version.metadata, RETIRED: time.time()})
        retired.append(version.name)
    return retired


def remove_version(client: ClientAPI, settings: Settings, version: str) -> None:
    with contextlib.suppress(NotFoundError):  # another process removed it first
        client.delete_collection(version)
    shutil.rmtree(keyword_index_dir(settings, version), ignore_errors=True)
    keyword_index_lock(settings, version).unlink(missing_ok=True)


def remove_retired_versions(
    client: ClientAPI, settings: Settings, *, now: float | None = None
) -> list[str]:
    """Delete every version retired for longer than :func:`retirement_grace_s`, with its
    keyword index, then (for a Chroma folder) the vector-index folders no collection owns;
    returns the names removed."""
    now = time.time() if now is None else now
    cutoff = now - retirement_grace_s(settings)
    removed = []
    # Listed before the store: a version's collection is created before its folder, so a
    # folder seen here whose version the store then lacks belongs to a removed version.
    local = _local_index_entries(settings)
    stored = set()
    for version in _all_versions(client):
        retired_at = version.metadata.get(RETIRED)
        if isinstance(retired_at, int | float) and retired_at <= cutoff:
            remove_version(client, settings, version.name)
            removed.append(version.name)
        else:
            stored.add(version.name)
    # Another instance sharing the store may have removed a version this one built indexes
    # for: the local copy goes too.
    for name, path in local:
        if name not in stored:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
    if not settings.chroma_host:
        _sweep_orphan_folders(settings.chroma_path)
    return removed


def _local_index_entries(settings: Settings) -> list[tuple[str, Path]]:
    """This machine's index folders and build locks, each with the version it belongs to
    (a folder still being built, ``.VERSION.PID.TAG``, is its builder's to clean up)."""
    try:
        entries = list((settings.home / "keyword").iterdir())
    except OSError:
        return []
    found = []
    for entry in entries:
        if entry.name.startswith(_PREFIX):
            found.append((entry.name, entry))
        elif entry.name.startswith(f".{_PREFIX}") and entry.name.endswith(".lock"):
            found.append((entry.name[1 : -len(".lock")], entry))
    return found


def _all_versions(client: ClientAPI) -> list[StoredVersion]:
    try:
        collections = client.list_collections()
    except Exception as error:
        raise StoreUnavailableError(
            f"cannot list collections ({error})", fix="check that the Chroma store is reachable"
        ) from error
    return [
        StoredVersion(collection, dict(collection.metadata or {}))
        for collection in collections
        if (collection.metadata or {}).get(LOGICAL)
    ]


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _sweep_orphan_folders(chroma_path: Path) -> list[Path]:
    """Delete the vector-index folders (named by their segment's id) that no segment in the
    store's catalogue owns any more: Chroma leaves them behind when it deletes a collection.

    The folders are listed before the catalogue is read: a collection created meanwhile has
    its catalogue row before its folder exists, so a folder being born is never taken."""
    try:
        folders = [p for p in chroma_path.iterdir() if p.is_dir() and _UUID.fullmatch(p.name)]
        if not folders:
            return []
        uri = f"file:{chroma_path / 'chroma.sqlite3'}?mode=ro"
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=10)) as catalogue:
            owned = {row[0] for row in catalogue.execute("SELECT id FROM segments")}
    except (OSError, sqlite3.Error):
        return []  # nothing is swept when the catalogue cannot be read: never a live folder
    orphans = [folder for folder in folders if folder.name not in owned]
    for folder in orphans:
        shutil.rmtree(folder, ignore_errors=True)
    return orphans


@dataclass(frozen=True)
class CollectionInfo:
    name: str
    documents: int
    chunks: int
    release: str
    embedding_model: str
    files: dict[str, str]
    created_at: str
    origin: str  # where the files came from: the sample, or the folder given to --from
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
            "source": self.origin,  # the name `collections --json` has always printed
            "version": self.version,
        }


def collection_infos(client: ClientAPI, names: Sequence[str] | None = None) -> list[CollectionInfo]:
    """What is ingested of each of ``names`` (by default, every collection the environment
    declares), in that order."""
    infos = []
    for logical in catalog_for().names if names is None else names:
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
                origin=str(meta.get(ORIGIN, "")),
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
            # The home named: a server or an assistant may run with a --home that a bare
            # `reactome-answers ingest` in a shell would not find.
            fix=f"run: reactome-answers --home {shlex.quote(str(settings.home))} ingest "
            "--sample (or --from DIR)",
        )
    stored = version.metadata.get(MODEL)
    if stored != settings.embeddings:
        raise ConfigurationError(
            f"collection {logical!r} was embedded with {stored!r} but the settings use "
            f"{settings.embeddings!r}; vectors from different models cannot be compared",
            fix=f"set REACTOME_ANSWERS_EMBEDDINGS={stored} or re-ingest with the new model",
        )
    return version
