"""Where a pipeline's documents come from: its own retriever, or a Runnable from outside.

The two differ in four ways (whether the search takes the request's options, who consults the
advice gate, whether there is a store to report on and to clean), and each difference is a
member here, so the pipeline never asks which kind it holds.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

from langchain_core.documents import Document
from langchain_core.runnables import Runnable

from pipelines.catalog.catalog import catalog_for
from pipelines.core.settings import Settings
from pipelines.index import store
from pipelines.pipeline._chain import tagged_retriever

if TYPE_CHECKING:
    from pipelines.retrieval.retriever import ReactomeRetriever

__all__ = ["OutsideRetrieval", "OwnRetrieval", "Retrieval"]


class Retrieval(Protocol):
    # The search takes the request's history, collections and pinned versions.
    takes_options: bool
    # The search consults the advice gate itself (on the vector it computes anyway); when it
    # does not, the pipeline asks the gate before the chain runs.
    checks_advice: bool

    @property
    def runnable(self) -> Runnable[str, list[Document]]:
        """The one top-level retrieval run (tagged: its end is the gate)."""

    @property
    def retriever(self) -> ReactomeRetriever | None:
        """Our retriever, or None for one from outside."""

    def releases(self) -> dict[str, dict[str, Any]]:
        """What answers now for each ingested collection (empty without a store of ours)."""

    def remove_retired_versions(self) -> None:
        """Remove the versions an ingest retired once no request can still read them."""


class OwnRetrieval:
    """The :class:`ReactomeRetriever` built from the settings, over our store."""

    takes_options = True
    checks_advice = True

    def __init__(
        self, settings: Settings, build: Callable[[], ReactomeRetriever], client: Any = None
    ) -> None:
        self._settings = settings
        self._build = build
        self._client = client

    @cached_property
    def retriever(self) -> ReactomeRetriever:
        return self._build()

    @cached_property
    def runnable(self) -> Runnable[str, list[Document]]:
        return tagged_retriever(self.retriever)

    def store_client(self) -> Any:
        """The Chroma client read through: the one given, or the process's own client for
        the settings' store (which the retriever may have reopened since)."""
        return self._client if self._client is not None else store.open_client(self._settings)

    def releases(self) -> dict[str, dict[str, Any]]:
        found = self.retriever.active_versions(catalog_for(self._settings).names)
        return {
            name: {
                "release": str(version.metadata.get(store.RELEASE, "unknown")),
                "version": version.name,
                **index.report(),
            }
            for name, (version, index) in found.items()
        }

    def remove_retired_versions(self) -> None:
        store.remove_retired_versions(self.store_client(), self._settings)


class OutsideRetrieval:
    """Any Runnable from a question to documents, given by the caller: it takes the question
    alone, knows nothing of the advice gate, and has no store of ours behind it."""

    takes_options = False
    checks_advice = False
    retriever = None

    def __init__(self, runnable: Runnable[str, list[Document]]) -> None:
        self.runnable = tagged_retriever(runnable)

    def releases(self) -> dict[str, dict[str, Any]]:
        return {}

    def remove_retired_versions(self) -> None:
        pass
