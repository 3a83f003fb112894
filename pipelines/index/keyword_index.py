"""The BM25 keyword index saved beside each collection version, for hybrid retrieval."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np

__all__ = ["KeywordIndex", "keyword_tokens"]

# bm25s sets its own logger to DEBUG when imported, so "Building index from tokens" goes to
# whatever handler the root logger has (the MCP server's, under `serve`) each time an index
# is built: at every new version on an instance that builds its indexes from a Chroma
# server. Its warnings still pass.
logging.getLogger("bm25s").setLevel(logging.WARNING)

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
        return self.search_tokens(keyword_tokens(queries), k)

    def search_tokens(
        self, tokens: Sequence[Sequence[str]], k: int
    ) -> list[list[tuple[str, float]]]:
        """:meth:`search_many` for queries already tokenized by :func:`keyword_tokens`, so a
        search over several collections tokenizes its queries once."""
        results: list[list[tuple[str, float]]] = []
        count = len(self.chunk_ids)
        for query_tokens in tokens:
            # Scored here rather than through BM25.retrieve, whose per-query progress bar and
            # checks cost more than the scoring at this size.
            known = [token for token in query_tokens if token in self.model.vocab_dict]
            if not known or not count:
                results.append([])
                continue
            scores = self.model.get_scores(known)
            top = min(k, count)
            best = np.argpartition(-scores, top - 1)[:top] if top < count else np.arange(count)
            best = best[np.argsort(-scores[best], kind="stable")]
            results.append(
                [(self.chunk_ids[int(row)], float(scores[row])) for row in best if scores[row] > 0]
            )
        return results

    def rare_term_shares(self, tokens: Sequence[str], max_df: int) -> dict[str, float]:
        """For each chunk holding one of the query's rare words (``tokens``, as
        :func:`keyword_tokens` makes them; rare: in at most ``max_df`` chunks), the share of
        those words it holds, each weighted by its IDF.

        A drug, gene or disease name that only one pathway mentions is strong evidence even
        when the rest of that pathway's text is about something else (and its embedding far
        from the question); BM25 dilutes it among the common words the question also has."""
        vocabulary: dict[str, int] = self.model.vocab_dict
        indptr, rows = self.model.scores["indptr"], self.model.scores["indices"]
        count = len(self.chunk_ids)
        rare: dict[int, float] = {}  # token id -> its IDF (as BM25 computes it)
        for token in set(tokens):
            token_id = vocabulary.get(token)
            if token_id is None:
                continue
            df = int(indptr[token_id + 1] - indptr[token_id])
            if 0 < df <= max_df:
                rare[token_id] = math.log(1 + (count - df + 0.5) / (df + 0.5))
        total = sum(rare.values())
        shares: dict[str, float] = {}
        for token_id, idf in rare.items():
            for row in rows[indptr[token_id] : indptr[token_id + 1]]:
                chunk_id = self.chunk_ids[int(row)]
                shares[chunk_id] = shares.get(chunk_id, 0.0) + idf / total
        return shares
