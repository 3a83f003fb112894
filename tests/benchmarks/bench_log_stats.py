"""How long `logs stats` takes over many logs, against reading the same bytes.

Usage::

    .venv/bin/python -m tests.benchmarks.bench_log_stats [--logs 10000] [--home DIR]

Records one answer per evaluation question with the offline default (extractive model, the
bundled sample, real embeddings and Chroma), so each log holds what a real one does (the
retriever's candidates, the model's input, every token), then copies them round-robin into a
folder of ``--logs`` logs (hard links, so the copies cost no disk). It then times, in this
process, the baseline (reading every file's bytes) and the summary `logs stats` computes
(parse, per-log row, summary), and prints both with their ratio, plus the installed
command's wall time over the same folder. Speed is machine-dependent: compare ratios.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from callbacks.log import list_log_files, read_log
from callbacks.log_summary import log_stats, summarize
from pipelines.catalog import bundled_dir
from pipelines.catalog.catalog import COLLECTION_NAMES
from pipelines.core.settings import load_settings
from pipelines.index.embeddings import MiniLMEmbeddings
from pipelines.index.ingestion import ingest, locate_files
from pipelines.pipeline import AnswerPipeline
from tests.benchmarks._common import load_questions


def record_answers(home: Path) -> list[Path]:
    embeddings = MiniLMEmbeddings()
    settings = load_settings(home=home)
    ingest(settings, locate_files(bundled_dir(), COLLECTION_NAMES, required=True),
           embeddings=embeddings)  # fmt: skip
    pipeline = AnswerPipeline(settings, embeddings=embeddings)
    for item in load_questions():
        for _ in pipeline.stream(str(item["question"])):
            pass
    return list_log_files(settings.logs_dir)


def fill(folder: Path, recorded: list[Path], count: int) -> None:
    folder.mkdir(parents=True)
    for number in range(count):
        source = recorded[number % len(recorded)]
        # Names as the logs are named (timestamp first), distinct per copy.
        stamp = f"20261203T{number // 3600 % 24:02d}{number // 60 % 60:02d}{number % 60:02d}"
        os.link(source, folder / f"{stamp}{number:06d}-copy{number}.jsonl")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--logs", type=int, default=10_000, help="how many logs to summarize")
    parser.add_argument("--home", type=Path, help="work folder (default: a temporary one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        work = args.home or Path(scratch)
        recorded = record_answers(work / "recorded")
        sizes = [path.stat().st_size for path in recorded]
        print(f"recorded {len(recorded)} answers, {sum(sizes) / len(sizes) / 1024:.1f} KB "
              "per log on average")  # fmt: skip
        many = work / "many" / "logs"
        fill(many, recorded, args.logs)

        started = time.perf_counter()
        total = sum(len(path.read_bytes()) for path in list_log_files(many))
        baseline = time.perf_counter() - started

        started = time.perf_counter()
        summary = summarize([log_stats(read_log(path)) for path in list_log_files(many)])
        measured = time.perf_counter() - started

        started = time.perf_counter()
        command = Path(sys.executable).parent / "reactome-answers"
        subprocess.run(
            [str(command), "--home", str(work / "many"), "logs", "stats", "--json"],
            check=True, capture_output=True,
        )  # fmt: skip
        wall = time.perf_counter() - started
    print(f"{summary['logs']} logs, {total / 1e6:.0f} MB; gate held in "
          f"{summary['gate']['held']} of {summary['gate']['of']}")  # fmt: skip
    print(f"reading the bytes (baseline): {baseline:.2f} s")
    print(f"logs stats in process:         {measured:.2f} s  ({measured / baseline:.1f}x)")
    print(f"`logs stats --json`, wall:     {wall:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
