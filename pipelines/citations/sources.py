"""Which retrieved documents are numbered sources and which are unnumbered context.

The answer prompt and the event handler both number sources with :func:`number_sources`, so
the ``[n]`` a model writes and the ``n`` of a citation event always mean the same document.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipelines.core.identifiers import st_id_problem, url_problem

if TYPE_CHECKING:
    from langchain_core.documents import Document

__all__ = ["Source", "number_sources"]


@dataclass(frozen=True)
class Source:
    """A citable document: 1-based ``n`` in retrieval order and exactly one identifier."""

    n: int
    document: Document
    display_name: str
    collection: str
    st_id: str | None = None
    url: str | None = None


def number_sources(
    documents: Sequence[Document], *, cite_urls: bool
) -> tuple[list[Source], list[Document]]:
    """Split retrieval output into numbered sources and unnumbered context.

    A document with a valid stable id is a source. A user-guide document has only a url: it
    is a source when ``cite_urls`` is on, and otherwise context, so the model can use it but
    has no number to cite it by and no identifier is ever invented. A document whose
    identifier would not pass the event model's checks is context too, so every source can
    be sent as a citation event.
    """
    sources: list[Source] = []
    context: list[Document] = []
    for document in documents:
        meta = document.metadata
        display_name = str(meta.get("display_name") or meta.get("title") or "").strip()
        collection = str(meta.get("collection") or "").strip() or "unknown"
        st_id, url = meta.get("st_id"), meta.get("url")
        n = len(sources) + 1
        if not display_name:
            context.append(document)
        elif isinstance(st_id, str) and st_id_problem(st_id) is None:
            sources.append(Source(n, document, display_name, collection, st_id=st_id))
        elif cite_urls and isinstance(url, str) and url_problem(url) is None:
            sources.append(Source(n, document, display_name, collection, url=url))
        else:
            context.append(document)
    return sources, context
