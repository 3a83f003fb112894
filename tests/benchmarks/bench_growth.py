"""How retrieval time grows with the corpus: ours and the classic stack at 1x, 3x and 10x.

    .venv/bin/python -m tests.benchmarks.bench_growth [--data DIR] [--home DIR] [--questions N]

The corpus is the three release collections plus the reaction summaries, which are what
grows: at 3x and 10x they are replicated with new stable ids (``_reactions.py``), as the
collections ``reactions_x3`` and ``reactions_x10`` (``growth_collections/``) in the same home
as ``bench_performance``. A copy's vectors are its original's, looked up rather than
embedded again (a copy differs from its original only in its id), so preparing 10x takes a
minute or two the first time, not an hour. Each size is measured like
``bench_performance.bench_retrieval``: both stacks built over the same collections, the same
questions asked of each in turn. Prints a table and writes results/bench-growth.json and .png.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from pipelines.catalog.catalog import COLLECTION_NAMES, catalog_for
from pipelines.core.settings import Settings, load_settings
from pipelines.index import store
from pipelines.index.chunk_table import ChunkTable
from pipelines.index.embeddings import MiniLMEmbeddings
from pipelines.index.ingestion import chunk_documents, ingest, locate_files
from pipelines.index.keyword_index import KeywordIndex
from tests.benchmarks._common import (
    COLLECTIONS_PATH,
    DEFAULT_DATA,
    HERE,
    cache_home,
    load_questions,
    prepared_home,
    table,
    write_results,
)
from tests.benchmarks._reactions import load_reactions, original_text

GROWTH_PATH = str(HERE / "growth_collections")
# Factor -> the collection holding the reaction summaries that many times over.
SIZES = {1: "reactions", 3: "reactions_x3", 10: "reactions_x10"}
GOAL_GROWTH = 2.0


class _KnownVectors(Embeddings):
    """The vectors of the 1x reaction chunks, by text; a copy's text is looked up as its
    original's. Anything else is embedded by the real model (counted: it should not happen)."""

    def __init__(self, known: dict[str, np.ndarray[Any, Any]], model: Embeddings) -> None:
        self._known = known
        self._model = model
        self.embedded = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        originals = [original_text(text) for text in texts]
        missing = [text for text in originals if text not in self._known]
        if missing:
            self.embedded += len(missing)
            vectors = self._model.embed_documents(missing)
            self._known.update(zip(missing, map(np.asarray, vectors), strict=True))
        return [self._known[text].tolist() for text in originals]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def growth_settings(home: Path) -> Settings:
    return load_settings(
        home=home, event_logs=False, collections_path=COLLECTIONS_PATH + os.pathsep + GROWTH_PATH
    )


def _reaction_vectors(settings: Settings, reactions: Path) -> dict[str, np.ndarray[Any, Any]]:
    """Text embedded -> vector, for every chunk of the 1x reactions collection."""
    version = store.active_version(store.open_client(settings), "reactions")
    assert version is not None, "the reactions collection is ingested first"
    folder = store.keyword_index_dir(settings, version.name)
    rows = {chunk_id: row for row, chunk_id in enumerate(KeywordIndex.load(folder).chunk_ids)}
    chunk_table = ChunkTable.load(folder)
    assert chunk_table is not None, "ingest writes a chunk table"
    chunks = chunk_documents("reactions", load_reactions(reactions).documents)
    return {c.embed_text: np.array(chunk_table.vectors[rows[c.id]]) for c in chunks}


def prepare(data: Path, home: Path, embeddings: Embeddings) -> Settings:
    """The bench home with every size ingested (incremental: seconds once done)."""
    prepared_home(data, home, embeddings, with_reactions=True)
    settings = growth_settings(home)
    grown = {SIZES[3], SIZES[10]}
    extra = data / "extra"
    sources = locate_files(extra, sorted(grown), required=True, catalog=catalog_for(settings))
    originals = _reaction_vectors(settings, extra / "reaction_summations.tsv")
    known = _KnownVectors(originals, embeddings)
    for summary in ingest(settings, sources, embeddings=known, release="bench", progress=True):
        if summary.failure:
            raise SystemExit(f"ingesting {summary.name} failed: {summary.failure}")
        print(f"  {summary.name}: {summary.chunks} chunks", file=sys.stderr)
    if known.embedded:
        print(f"  ({known.embedded} chunks had no original and were embedded)", file=sys.stderr)
    return settings


def bench_growth(settings: Settings, embeddings: Any, questions: Sequence[str]) -> dict[str, Any]:
    from tests.benchmarks.bench_performance import bench_retrieval

    client = store.open_client(settings)
    runs = []
    for factor, name in SIZES.items():
        collections = [*COLLECTION_NAMES, name]
        chunks = 0
        for collection in collections:
            version = store.active_version(client, collection)
            assert version is not None, f"{collection} is not ingested"
            chunks += version.collection.count()
        print(f"  {factor}x: {chunks} chunks", file=sys.stderr)
        run = bench_retrieval(settings, embeddings, list(questions), collections)
        runs.append({"factor": factor, "chunks": chunks, **run})
    first, last = runs[0], runs[-1]
    return {
        "runs": runs,
        "ours_growth": last["ours"]["p50_ms"] / first["ours"]["p50_ms"],
        "classic_growth": last["classic"]["p50_ms"] / first["classic"]["p50_ms"],
    }


def report(growth: dict[str, Any]) -> str:
    rows = [
        [f"{run['factor']}x", run["chunks"], run["ours"]["p50_ms"], run["ours"]["p95_ms"],
         run["classic"]["p50_ms"], run["classic"]["p95_ms"], run["ratio_p50"]]
        for run in growth["runs"]
    ]  # fmt: skip
    headers = ["corpus", "chunks", "ours p50", "ours p95", "classic p50", "classic p95", "ratio"]
    questions = growth["runs"][0]["questions"]
    lines = [
        f"Retrieval as the corpus grows ({questions} questions, 4 collections, the reaction "
        "summaries replicated)",
        table(headers, rows),
        f"p50 from 1x to 10x: ours {growth['ours_growth']:.2f}x (goal: at most "
        f"{GOAL_GROWTH:g}x), classic {growth['classic_growth']:.2f}x",
    ]
    return "\n".join(lines)


def plot(growth: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = growth["runs"]
    figure, axes = plt.subplots(figsize=(7, 4))
    chunks = [run["chunks"] for run in runs]
    for name in ("ours", "classic"):
        axes.plot(chunks, [run[name]["p50_ms"] for run in runs], marker="o", label=name)
    for run in runs:
        axes.annotate(f"{run['factor']}x", (run["chunks"], run["ours"]["p50_ms"]),
                      textcoords="offset points", xytext=(0, 8), ha="center")  # fmt: skip
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("chunks in the 4 collections")
    axes.set_ylabel("p50 retrieval latency, ms")
    axes.set_title("Retrieval as the corpus grows (reaction summaries replicated)")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="../shared/data")
    parser.add_argument("--home", type=Path, help="where the corpus is ingested")
    parser.add_argument(
        "--questions", type=int, default=30, help="how many of the labeled questions to ask"
    )
    args = parser.parse_args(argv)
    embeddings = MiniLMEmbeddings(model_cache=cache_home("models"))
    settings = prepare(args.data, args.home or cache_home("bench-home"), embeddings)
    questions = [q["question"] for q in load_questions()[: args.questions]]
    growth = bench_growth(settings, embeddings, questions)
    print("\n" + report(growth))
    path = write_results("bench-growth", growth)
    plot(growth, path.with_suffix(".png"))
    print(f"\nwrote {path} and {path.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
