"""Ingestion throughput and peak memory on the real release files.

    .venv/bin/python -m tests.benchmarks.ingest_throughput [--data ../shared/data]
        [--with-reactions] [--baseline-chunks 300]

Baseline, measured first in the same process: the embedding model alone on a sample of the
same chunks, the one cost ingestion cannot avoid. Then the whole ingestion (read, chunk,
embed, write to Chroma, build the BM25 index, swap) into a temporary home. Prints chunks/s
for both, their ratio, and peak resident memory against the memory after loading the model.
``--with-reactions`` adds ``extra/reaction_summations.tsv`` as a fourth collection for scale.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

from pipelines.embeddings import MiniLMEmbeddings
from pipelines.ingest import chunk_documents, ingest
from pipelines.settings import load_settings
from tests.benchmarks._common import DEFAULT_DATA, corpus_sources


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--with-reactions", action="store_true")
    parser.add_argument("--baseline-chunks", type=int, default=300)
    args = parser.parse_args()
    if not (args.data / "reactome").is_dir():
        print(f"no release files at {args.data}; pass --data", file=sys.stderr)
        return 2

    sources = corpus_sources(args.data, with_reactions=args.with_reactions)

    embeddings = MiniLMEmbeddings()
    model_rss = peak_rss_mb()
    sample = chunk_documents("reactome", sources["reactome"].load().documents)
    sample = sample[: args.baseline_chunks]
    started = time.perf_counter()
    embeddings.embed_documents([chunk.embed_text for chunk in sample])
    baseline = len(sample) / (time.perf_counter() - started)

    with tempfile.TemporaryDirectory() as home:
        settings = load_settings(home=home)
        started = time.perf_counter()
        summaries = ingest(settings, sources, embeddings=embeddings, release="bench")
        elapsed = time.perf_counter() - started
    chunks = sum(summary.chunks for summary in summaries)

    print(f"{'collection':<18}{'documents':>10}{'chunks':>8}{'seconds':>9}{'chunks/s':>10}")
    for summary in summaries:
        rate = summary.chunks / summary.seconds if summary.seconds else 0.0
        print(
            f"{summary.name:<18}{summary.documents:>10}{summary.chunks:>8}"
            f"{summary.seconds:>9.1f}{rate:>10.1f}"
        )
    print(f"{'total':<18}{'':>10}{chunks:>8}{elapsed:>9.1f}{chunks / elapsed:>10.1f}")
    print(f"baseline (embedding alone, {len(sample)} chunks): {baseline:.1f} chunks/s")
    print(f"ingestion / baseline throughput: {chunks / elapsed / baseline:.2f}x")
    print(
        f"peak RSS {peak_rss_mb():.0f} MB; after loading the model {model_rss:.0f} MB "
        f"({peak_rss_mb() / model_rss:.2f}x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
