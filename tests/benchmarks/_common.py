"""What the benchmark and evaluation scripts share: the corpus home, the questions, output."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from langchain_core.embeddings import Embeddings

from pipelines.catalog.catalog import COLLECTION_NAMES, catalog_from_path
from pipelines.core.settings import Settings, load_settings
from pipelines.index.chunk_sentences import POOLED, pooling_model
from pipelines.index.chunk_table import ChunkTable
from pipelines.index.ingestion import CollectionFiles, ingest, locate_files
from pipelines.index.store import active_version, keyword_index_dir, open_client

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parents[2] / "shared" / "data"
QUESTIONS = HERE / "eval_questions.yaml"
# Personal-advice questions to refuse and must-answer ones beside them, split like QUESTIONS.
ADVICE_QUESTIONS = HERE / "advice_questions.yaml"
# The reaction summaries are a collection declared like any other, in a folder of our own.
COLLECTIONS_PATH = str(HERE / "collections")
CATALOG = catalog_from_path(COLLECTIONS_PATH)
RESULTS = HERE / "results"


def corpus_sources(data: Path, *, with_reactions: bool) -> dict[str, CollectionFiles]:
    if not (data / "reactome").is_dir():
        raise SystemExit(f"no release files at {data}; pass --data DIR (../shared/data)")
    if with_reactions and not (data / "extra" / "reaction_summations.tsv").is_file():
        raise SystemExit(f"no extra/reaction_summations.tsv under {data}; pass --data DIR")
    sources = locate_files(data, COLLECTION_NAMES, required=True)
    if with_reactions:
        sources.update(locate_files(data / "extra", ["reactions"], required=True, catalog=CATALOG))
    return sources


def cache_home(name: str) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "reactome-answers" / name


def prepared_home(
    data: Path, home: Path, embeddings: Embeddings, *, with_reactions: bool = False
) -> Settings:
    """A home with the corpus ingested. Ingestion is incremental: the first run embeds
    everything (minutes), later runs find nothing changed and return in seconds."""
    settings = load_settings(home=home, event_logs=False, collections_path=COLLECTIONS_PATH)
    started = time.perf_counter()
    summaries = ingest(
        settings,
        corpus_sources(data, with_reactions=with_reactions),
        embeddings=embeddings,
        release="bench",
        progress=sys.stderr.isatty(),
    )
    for summary in summaries:
        if summary.failure:
            raise SystemExit(f"ingesting {summary.name} failed: {summary.failure}")
    if pooling_model(embeddings) is not None:
        # An unchanged collection keeps the sentence vectors it was ingested with: a home
        # from before late chunking is measured with its sentences embedded alone.
        for name, found in _tables(settings, [summary.name for summary in summaries]).items():
            if found.sentences is not None and found.sentences.pooling != POOLED:
                print(
                    f"note: {home}: {name} holds sentence vectors embedded alone (ingested "
                    "before decision 0045), and the figures that read them are theirs; delete "
                    "the folder (or pass another --home) to measure today's",
                    file=sys.stderr,
                )
    changed = sum(s.added + s.updated + s.deleted for s in summaries)
    print(
        f"corpus at {home}: {sum(s.chunks for s in summaries)} chunks, {changed} changed, "
        f"{time.perf_counter() - started:.0f} s",
        file=sys.stderr,
    )
    return settings


def _tables(settings: Settings, names: Sequence[str]) -> dict[str, ChunkTable]:
    client = open_client(settings)
    found = {}
    for name in names:
        version = active_version(client, name)
        if version is not None:
            table = ChunkTable.load(keyword_index_dir(settings, version.name))
            if table is not None:
                found[name] = table
    return found


def loaded_tables(settings: Settings, names: Sequence[str] = COLLECTION_NAMES) -> list[ChunkTable]:
    """The chunk tables of the home's collections ``names``, loaded: while they are held, a
    :class:`~pipelines.index.passages.SentenceBank` finds their chunks' sentences."""
    return list(_tables(settings, names).values())


def load_questions(path: Path = QUESTIONS) -> list[dict[str, Any]]:
    questions: list[dict[str, Any]] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return questions


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }


def write_results(name: str, results: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **results}, indent=2) + "\n")
    return path


def percentile(values: Sequence[float], share: float) -> float:
    """The value at ``share`` (0..1) of the sorted values, nearest rank; 0 when there are none."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))] if ordered else 0.0


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """A plain-text table; floats with 3 decimals."""

    def cell(value: Any) -> str:
        return f"{value:.3f}" if isinstance(value, float) else str(value)

    cells = [[cell(value) for value in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)
