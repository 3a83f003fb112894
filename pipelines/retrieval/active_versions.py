"""What the retriever keeps between searches: the live version of each collection, the local
indexes of the versions it searches, and the Chroma client, reopened when a version goes live.

An ingest makes a new version live while searches run. Looking the live version up costs more
than a query, so it is cached for a few seconds; once a lookup finds it swapped, the old
version's local indexes are dropped and the client is reopened before the next search, with
no search running (a read-write gate), so Chroma lets go of the retired version's files.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from langchain_core.embeddings import Embeddings

from pipelines.core.errors import ReactomeAnswersError
from pipelines.core.redaction import one_line
from pipelines.core.settings import Settings
from pipelines.index import store
from pipelines.index.version_index import VersionIndex, build_from_store

__all__ = ["ActiveVersions", "ReadWriteGate"]

# How long a looked-up live version is trusted: an ingest's new version is searched at most
# this much later.
_VERSION_TTL_S = 5.0
# A keyword index that could not be built is tried again after this long.
_REBUILD_AFTER_S = 30.0


class ReadWriteGate:
    """Many readers at once, or one writer alone; a waiting writer lets no new reader in."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._readers = 0
        self._writing = False

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._condition:
            self._condition.wait_for(lambda: not self._writing)
            self._readers += 1
        try:
            yield
        finally:
            with self._condition:
                self._readers -= 1
                self._condition.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        with self._condition:
            self._condition.wait_for(lambda: not self._writing)
            self._writing = True
            self._condition.wait_for(lambda: self._readers == 0)
        try:
            yield
        finally:
            with self._condition:
                self._writing = False
                self._condition.notify_all()


class ActiveVersions:
    """The collection versions a retriever searches, their local indexes and the client
    they are read through; safe to share between threads."""

    def __init__(
        self,
        settings: Settings,
        client: Any = None,
        multilingual: Callable[[], Embeddings | None] = lambda: None,
        sentences: Callable[[], Embeddings | None] = lambda: None,
    ) -> None:
        self.settings = settings
        # The multilingual model whose vectors a chunk table should hold (decision 0037).
        self.multilingual = multilingual
        # The model that pools a built chunk table's sentences (decision 0045).
        self.sentences = sentences
        # A chromadb ClientAPI; None until first needed: then the process's own client for
        # the settings' store, which is reopened when a new version goes live.
        self.client = client
        self._indexes: dict[str, VersionIndex] = {}
        self._lock = threading.Lock()
        self._versions: dict[str, tuple[float, store.StoredVersion]] = {}
        self._gate = ReadWriteGate()
        self._reopen_wanted = False

    def store_client(self) -> Any:
        if self.client is None:
            self.client = store.open_client(self.settings)
        return self.client

    @contextmanager
    def searching(self) -> Iterator[None]:
        """Around one search: the client is reopened first if a new version went live, and
        is never closed under the search."""
        if self._reopen_wanted:
            self._reopen_client()
        with self._gate.reading():
            yield

    def _reopen_client(self) -> None:
        """A new version went live: once no search is running, reopen the client so that
        Chroma closes what it held of the versions it replaced."""
        with self._gate.writing():
            if not self._reopen_wanted:
                return  # another thread reopened it meanwhile
            self._reopen_wanted = False
            if self.client is not None:
                self.client = store.reopen_client(self.settings, self.client)
            with self._lock:
                self._versions.clear()  # their collections belong to the closed client
                # And the indexes of the versions seen so far: a retired one's would stay
                # (its chunk table's memory maps hold file descriptors) since no lookup would
                # see it replaced. No search is running, so none is using them.
                self._indexes.clear()

    def live(self, name: str) -> store.StoredVersion:
        """The live version of a collection, looked up at most every few seconds: listing
        Chroma's collections costs more than a query."""
        now = time.monotonic()
        with self._lock:
            cached = self._versions.get(name)
        if cached is not None and now - cached[0] < _VERSION_TTL_S:
            return cached[1]
        version = store.check_embedding_model(self.store_client(), name, self.settings)
        with self._lock:
            self._versions[name] = (now, version)
            if cached is not None and cached[1].name != version.name:
                # Swapped by an ingest: the old version's keyword index is not needed again,
                # and the client is reopened before the next search to release its vectors.
                self._indexes.pop(cached[1].name, None)
                self._reopen_wanted = True
        return version

    def version_for(self, name: str, wanted: str | None) -> store.StoredVersion:
        """The version ``wanted`` of collection ``name`` when given (an ingest may have made
        another live since the request began: it still reads the one it started on), else
        the live one."""
        live = self.live(name)
        if wanted is None or live.name == wanted:
            return live
        return store.version_named(self.store_client(), wanted)

    def forget(self, name: str) -> bool:
        """Look collection ``name``'s live version up again next time; whether one was
        cached."""
        with self._lock:
            return self._versions.pop(name, None) is not None

    def index(self, version: store.StoredVersion) -> VersionIndex:
        """The keyword index and chunk table of ``version`` on this machine: loaded, or built
        from the store when this machine has none (an instance sharing a Chroma server with
        the machine that ingested). One that cannot be built is missing, with the reason
        (the search then ranks by vectors alone, and says so), and is tried again later."""
        with self._lock:
            found = self._indexes.get(version.name)
        if found is not None and (
            found.keyword is not None or time.monotonic() - found.built_at < _REBUILD_AFTER_S
        ):
            return found
        chunks = version.metadata.get(store.CHUNKS)
        try:
            found = build_from_store(
                version.collection,
                store.keyword_index_dir(self.settings, version.name),
                lock=store.keyword_index_lock(self.settings, version.name),
                chunks=chunks if isinstance(chunks, int) else None,
                multilingual=self.multilingual,
                sentences=self.sentences,
            )
        except Exception as error:  # the disk or the store: answered by vectors meanwhile
            found = VersionIndex.missing(
                f"keyword index of {version.name} not available ({one_line(error)})"
            )
        with self._lock:
            # Only a live version's is kept: one a request pinned before an ingest replaced it
            # would stay open (deleted files held) long after housekeeping removed the version,
            # since only the swap (`live`) or a reopen drops cached indexes.
            if any(live.name == version.name for _, live in self._versions.values()):
                self._indexes[version.name] = found
        return found

    def active_versions(
        self, names: Sequence[str]
    ) -> dict[str, tuple[store.StoredVersion, VersionIndex]]:
        """The live version of each ingested collection of ``names`` with its local indexes,
        as a search would use them now (built here if this machine has none yet); a
        collection that is not ingested, or not readable with these settings, is left out."""
        found = {}
        for name in names:
            try:
                version = self.live(name)
            except ReactomeAnswersError:
                continue
            found[name] = (version, self.index(version))
        return found
