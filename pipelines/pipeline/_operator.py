"""What a pipeline offers its operator rather than a request: the collections' state for
``/healthz`` and ``/v1/collections``, and the removal of retired versions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipelines.core.errors import StoreUnavailableError
from pipelines.core.redaction import warn_not_done
from pipelines.core.settings import Settings
from pipelines.index import store
from pipelines.pipeline._retrieval import Retrieval

__all__ = ["PipelineOperator"]


class PipelineOperator:
    """The store behind one pipeline, as its operator sees it (``pipeline.operator``)."""

    def __init__(
        self, settings: Settings, retrieval: Callable[[], Retrieval], client: Any = None
    ) -> None:
        self._settings = settings
        self._retrieval = retrieval  # built on first use, like the pipeline's other parts
        self._client = client

    def collection_releases(self) -> dict[str, dict[str, Any]]:
        """What answers now for each ingested collection: its release, the version searched,
        which indexes rank it (``indexes``: vectors, and bm25 unless its keyword index is
        missing, then ``problem`` says why) and where its chunks are read from. Builds the
        local indexes of a version this machine has not seen (an instance sharing a Chroma
        server); empty for a retriever from outside."""
        return self._retrieval().releases()

    def degraded(self) -> dict[str, str]:
        """The collections answered with less than their indexes, and why (``/healthz``)."""
        return {
            name: str(release.get("problem", "keyword index missing"))
            for name, release in self.collection_releases().items()
            if "bm25" not in release["indexes"]
        }

    def store_client(self) -> Any:
        """The Chroma client this pipeline reads through: the one given, or the process's own
        client for the settings' store (which the retriever may have reopened since)."""
        return self._client if self._client is not None else store.open_client(self._settings)

    def remove_retired_versions(self) -> None:
        """Remove the versions an ingest retired once no request can still read them
        (:func:`pipelines.index.store.remove_retired_versions`); ``serve`` calls this every few
        seconds off its event loop, so they go even when no further ingest runs. Never raises:
        housekeeping must not fail a server, and a store that is down is reported by the
        answers and ``/healthz`` already."""
        try:
            self._retrieval().remove_retired_versions()
        except StoreUnavailableError:
            pass
        except Exception as error:
            warn_not_done("retired collection versions not removed", error)
