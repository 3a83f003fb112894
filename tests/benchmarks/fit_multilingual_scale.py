"""How the retriever's ``multilingual_scale`` was chosen (decision 0037), on the development
half of the translated questions only.

    .venv/bin/python -m tests.benchmarks.fit_multilingual_scale [--data DIR] [--home DIR]

For each development translation, the chunks its English form finds most similar with the
English model (30 per collection) are compared twice: their cosine to the English form by
the English model, and to the translation by the multilingual model. The intercept for a
slope puts the median of the second onto the median of the first; each slope of the grid
is then tried as a request runs, printing the development hit@10 and MRR of the
translations. The slope is where the MRR stops rising.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from pipelines.core.settings import load_settings
from pipelines.index import store
from pipelines.index.embeddings import make_embeddings, make_multilingual_embeddings
from pipelines.index.version_index import VersionIndex
from pipelines.pipeline import AnswerPipeline
from tests.benchmarks._common import DEFAULT_DATA, cache_home, prepared_home, table
from tests.benchmarks.eval_languages import evaluate_retrieval, translated_questions

SLOPES = (3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0)
NEAREST = 30


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="../shared/data")
    parser.add_argument(
        "--home", type=Path, default=cache_home("eval-home"), help="where the corpus is ingested"
    )
    args = parser.parse_args(argv)
    embeddings = make_embeddings(load_settings(model_cache=cache_home("models")))
    settings = prepared_home(args.data, args.home, embeddings)
    second = make_multilingual_embeddings(settings, embeddings)
    if second is None:
        raise SystemExit(
            "no multilingual model with these settings (REACTOME_ANSWERS_MULTILINGUAL)"
        )
    client = store.open_client(settings)
    tables = []
    for name in ("reactome", "disease_variants", "userguide"):
        version = store.active_version(client, name)
        index = (
            VersionIndex.load(store.keyword_index_dir(settings, version.name)) if version else None
        )
        if index is None or index.table is None or index.table.multilingual is None:
            raise SystemExit(f"{name} has no chunk table with multilingual vectors: ingest again")
        tables.append(index.table)
    development = [q for q in translated_questions() if q["split"] == "dev"]
    own_cosines, second_cosines = [], []
    for question in development:
        english = np.asarray(embeddings.embed_query(question["english"]), dtype=np.float32)
        translated = np.asarray(second.embed_query(question["question"]), dtype=np.float32)
        for chunk_table in tables:
            own = np.asarray(chunk_table.vectors) @ english
            nearest = np.argsort(-own)[:NEAREST]
            own_cosines += own[nearest].tolist()
            assert chunk_table.multilingual is not None
            second_cosines += (
                np.asarray(chunk_table.multilingual.vectors[nearest]) @ translated
            ).tolist()
    own_median, second_median = float(np.median(own_cosines)), float(np.median(second_cosines))
    print(f"medians: English model {own_median:.3f}, multilingual model {second_median:.3f}")
    pipeline = AnswerPipeline(settings, embeddings=embeddings)
    rows = []
    for slope in SLOPES:
        intercept = round(own_median - slope * second_median, 3)
        print(f"slope {slope}...", file=sys.stderr)
        found = evaluate_retrieval(pipeline, development, multilingual_scale=(slope, intercept))
        figures = found["dev"]["all"]
        rows.append(
            [f"{slope:.1f}", f"{intercept:.3f}", f"{figures['hit']:.3f}", f"{figures['mrr']:.3f}"]
        )
    print(table(["slope", "intercept", "hit@10", "MRR"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
