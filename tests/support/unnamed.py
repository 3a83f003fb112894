"""An embedding model seen only through LangChain's ``Embeddings`` interface, under no name."""

from __future__ import annotations

from langchain_core.embeddings import Embeddings


class Unnamed(Embeddings):
    """``inner`` without its name or its token states: nothing stored can be known to be its
    vectors, and each text is embedded alone."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)
