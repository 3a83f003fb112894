"""The BM25 keyword index saved beside each collection version, for hybrid retrieval."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import bm25s

__all__ = ["KeywordIndex", "keyword_tokens"]

_IDS_FILE = "chunk_ids.json"


def keyword_tokens(texts: Sequence[str]) -> list[list[str]]:
    """Lower-cased word tokens, English stop words removed; used to index and to query."""
    tokenized = bm25s.tokenize(list(texts), stopwords="en", return_ids=False, show_progress=False)
    return [list(tokens) for tokens in tokenized]


@dataclass
class KeywordIndex:
    """A BM25 index over chunk texts, remembering which chunk id each row is."""

    model: bm25s.BM25
    chunk_ids: list[str]

    @classmethod
    def build(cls, chunk_ids: Sequence[str], texts: Sequence[str]) -> KeywordIndex:
        model = bm25s.BM25()
        model.index(keyword_tokens(texts), show_progress=False)
        return cls(model, list(chunk_ids))

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.model.save(str(folder), show_progress=False)
        (folder / _IDS_FILE).write_text(json.dumps(self.chunk_ids), encoding="utf-8")

    @classmethod
    def load(cls, folder: Path) -> KeywordIndex:
        model = bm25s.BM25.load(str(folder), show_progress=False)
        chunk_ids = json.loads((folder / _IDS_FILE).read_text(encoding="utf-8"))
        return cls(model, chunk_ids)

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """The ``k`` best chunk ids for ``query`` with their BM25 scores (zero scores dropped)."""
        return self.search_many([query], k)[0]

    def search_many(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        """:meth:`search` for several queries in one call (one tokenizer and one scoring pass,
        with no thread pool: the pool's start-up cost more than the search itself)."""
        results: list[list[tuple[str, float]]] = [[] for _ in queries]
        tokens = keyword_tokens(queries)
        asked = [index for index, query_tokens in enumerate(tokens) if query_tokens]
        if not asked or not self.chunk_ids:
            return results
        k = min(k, len(self.chunk_ids))
        rows, scores = self.model.retrieve(
            [tokens[index] for index in asked], k=k, show_progress=False, n_threads=0
        )
        for position, index in enumerate(asked):
            results[index] = [
                (self.chunk_ids[int(row)], float(score))
                for row, score in zip(rows[position], scores[position], strict=True)
                if score > 0
            ]
        return results
