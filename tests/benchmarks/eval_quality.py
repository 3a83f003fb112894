"""Retrieval and answer quality on the labeled questions over ../shared/data.

    .venv/bin/python -m tests.benchmarks.eval_quality [--data DIR] [--home DIR] [--limit N]

- **Retrieval**, for dense only, BM25 only, both fused (RRF) and fused + re-rank, with all
  three collections searched: recall@3/5/10, MRR and the share of the top 10 taken by a
  collection the question does not need.
- **Routing**: the expander's collections against the labeled ones.
- **End to end**: is a relevant id among `done.references` (what the user sees), with the
  extractive provider and the default retriever (user-guide questions with url citations on,
  since without them a user-guide answer cites nothing by design).
- **Citations**, over every answer with the extractive provider and with a fake model that
  cites at random (out-of-range numbers included): out-of-range markers left in `done.text`,
  references the text does not cite, streams where a token precedes the last citation.

Prints the tables and writes results/eval.json and results/eval.png.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel

from callbacks.events import CitationEvent, DoneEvent, Event, TokenEvent
from pipelines.citations import cited_numbers
from pipelines.embeddings import MiniLMEmbeddings
from pipelines.expander import expander_messages, parse_expansion
from pipelines.pipeline import AnswerPipeline
from pipelines.retriever import RANKINGS, ReactomeRetriever
from pipelines.store import COLLECTION_NAMES, open_client
from tests.benchmarks._common import (
    DEFAULT_DATA,
    cache_home,
    load_questions,
    prepared_home,
    table,
    write_results,
)

K = 10


def cited_as(document: Document) -> str:
    return str(document.metadata.get("st_id") or document.metadata.get("url") or "")


def retrieval_scores(
    ranked: Sequence[Document], relevant: set[str], needed: set[str]
) -> dict[str, float]:
    ids = [cited_as(document) for document in ranked[:K]]
    scores = {f"recall@{k}": len(relevant & set(ids[:k])) / len(relevant) for k in (3, 5, 10)}
    first = next((rank for rank, cid in enumerate(ids, start=1) if cid in relevant), None)
    scores["mrr"] = 1.0 / first if first else 0.0
    wrong = [d for d in ranked[:K] if d.metadata.get("collection") not in needed]
    scores["wrong_collection"] = len(wrong) / len(ranked[:K]) if ranked else 0.0
    return scores


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def evaluate_retrieval(
    pipeline: AnswerPipeline, questions: list[dict[str, Any]]
) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    client = open_client(pipeline.settings)
    for ranking in RANKINGS:
        retriever = ReactomeRetriever(
            settings=pipeline.settings,
            client=client,
            embeddings=pipeline.embeddings,
            expander=pipeline.models[1],
            k=K,
            ranking=ranking,
        )
        per_question = []
        started = time.perf_counter()
        for question in questions:
            ranked = retriever.invoke(question["question"], collections=list(COLLECTION_NAMES))
            per_question.append(
                retrieval_scores(ranked, set(question["relevant"]), set(question["collections"]))
            )
        elapsed = time.perf_counter() - started
        results[ranking] = {
            metric: mean([scores[metric] for scores in per_question]) for metric in per_question[0]
        }
        results[ranking]["ms_per_question"] = 1000 * elapsed / len(questions)
        print(f"  {ranking}: {elapsed:.1f} s", file=sys.stderr)
    return results


def evaluate_routing(pipeline: AnswerPipeline, questions: list[dict[str, Any]]) -> dict[str, Any]:
    labeled = [q for q in questions if q.get("routing")]
    exact = covered = 0
    misses = []
    for question in labeled:
        reply = pipeline.models[1].invoke(expander_messages(question["question"], [], 3))
        expansion = parse_expansion(str(reply.content), question["question"], [], 3)
        routed = set(expansion.collections)  # parse_expansion falls back to the rules itself
        wanted = set(question["collections"])
        exact += routed == wanted
        covered += wanted <= routed
        if routed != wanted:
            misses.append(
                {"id": question["id"], "routed": sorted(routed), "wanted": sorted(wanted)}
            )
    return {
        "questions": len(labeled),
        "accuracy": exact / len(labeled),
        "covers_needed": covered / len(labeled),
        "misses": misses,
    }


def stream_checks(events: list[Event]) -> dict[str, int]:
    done = events[-1]
    assert isinstance(done, DoneEvent)
    references = done.data.references
    numbers = cited_numbers(done.data.text)
    citation_seqs = [e.seq for e in events if isinstance(e, CitationEvent)]
    token_seqs = [e.seq for e in events if isinstance(e, TokenEvent)]
    return {
        "out_of_range": sum(1 for n in numbers if not 1 <= n <= len(references)),
        # The contract keeps the untouched list when nothing is cited.
        "uncited_references": (sum(1 for r in references if r.n not in numbers) if numbers else 0),
        "token_before_last_citation": int(
            bool(citation_seqs and token_seqs and token_seqs[0] < citation_seqs[-1])
        ),
    }


def random_citing_answers(questions: list[dict[str, Any]], seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    answers = []
    for _ in questions:
        parts = []
        for _ in range(rng.randint(1, 6)):
            numbers = [rng.randint(0, 14) for _ in range(rng.randint(1, 3))]
            marker = (
                f"[{numbers[0]}-{numbers[0] + rng.randint(0, 3)}]"
                if rng.random() < 0.2
                else "[" + ", ".join(map(str, numbers)) + "]"
            )
            parts.append(f"Claim {rng.randint(1, 99)} holds {marker}.")
        answers.append(" ".join(parts))
    return answers


def evaluate_answers(
    settings: Any, embeddings: Any, questions: list[dict[str, Any]]
) -> dict[str, Any]:
    extractive = AnswerPipeline(settings, embeddings=embeddings)
    answers = random_citing_answers(questions)
    fake = AnswerPipeline(
        settings,
        embeddings=embeddings,
        answer_model=FakeListChatModel(responses=answers),
        expander_model=extractive.models[1],
    )
    hits = 0
    totals: dict[str, dict[str, int]] = {"extractive": {}, "random_citing": {}}
    first_token_ms = []
    for question in questions:
        cite_urls = question["collections"] == ["userguide"]
        events = list(extractive.stream(question["question"], cite_urls=cite_urls))
        done = events[-1]
        assert isinstance(done, DoneEvent)
        shown = {r.st_id or r.url for r in done.data.references}
        hits += bool(shown & set(question["relevant"]))
        if done.data.timings.first_token_ms is not None:
            first_token_ms.append(done.data.timings.first_token_ms)
        for name, stream in (
            ("extractive", events),
            ("random_citing", list(fake.stream(question["question"], cite_urls=cite_urls))),
        ):
            for key, value in stream_checks(stream).items():
                totals[name][key] = totals[name].get(key, 0) + value
    return {
        "relevant_in_references": hits / len(questions),
        "citation_checks": totals,
        "first_token_ms_median": sorted(first_token_ms)[len(first_token_ms) // 2]
        if first_token_ms
        else None,
    }


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = ["recall@3", "recall@5", "recall@10", "mrr", "wrong_collection"]
    figure, axes = plt.subplots(figsize=(8, 4))
    width = 0.2
    for offset, ranking in enumerate(RANKINGS):
        values = [results["retrieval"][ranking][m] for m in metrics]
        positions = [i + (offset - 1.5) * width for i in range(len(metrics))]
        axes.bar(positions, values, width, label=ranking)
    axes.set_xticks(range(len(metrics)), metrics)
    axes.set_ylim(0, 1.05)
    axes.set_title(f"Retrieval on {results['questions']} labeled questions (all collections)")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="../shared/data")
    parser.add_argument(
        "--home", type=Path, default=cache_home("eval-home"), help="where the corpus is ingested"
    )
    parser.add_argument("--limit", type=int, help="only the first N questions (a quick run)")
    parser.add_argument("--name", default="eval", help="results/NAME.json and NAME.png")
    args = parser.parse_args(argv)

    questions = load_questions()[: args.limit]
    embeddings = MiniLMEmbeddings(model_cache=cache_home("models"))
    settings = prepared_home(args.data, args.home, embeddings)
    pipeline = AnswerPipeline(settings, embeddings=embeddings)

    print("retrieval...", file=sys.stderr)
    retrieval = evaluate_retrieval(pipeline, questions)
    routing = evaluate_routing(pipeline, questions)
    print("answers...", file=sys.stderr)
    answers = evaluate_answers(settings, embeddings, questions)
    results = {
        "questions": len(questions),
        "paraphrased": sum(bool(q.get("paraphrased")) for q in questions),
        "retrieval": retrieval,
        "routing": routing,
        "answers": answers,
    }

    metrics = ["recall@3", "recall@5", "recall@10", "mrr", "wrong_collection", "ms_per_question"]
    print(f"\nRetrieval, {len(questions)} questions, all three collections searched, k={K}")
    print(
        table(["ranking", *metrics], [[r, *(retrieval[r][m] for m in metrics)] for r in RANKINGS])
    )
    print(
        f"\nRouting: {routing['accuracy']:.3f} exact, {routing['covers_needed']:.3f} cover the "
        f"needed collections ({routing['questions']} questions)"
    )
    print(
        f"End to end: a relevant id among done.references for "
        f"{answers['relevant_in_references']:.3f} of the questions (extractive provider)"
    )
    checks = answers["citation_checks"]
    keys = ["out_of_range", "uncited_references", "token_before_last_citation"]
    print("\nCitation checks (counts over all answers; each must be 0)")
    print(
        table(
            ["model", *keys], [[name, *(checks[name].get(k, 0) for k in keys)] for name in checks]
        )
    )

    path = write_results(args.name, results)
    plot(results, path.with_suffix(".png"))
    print(f"\nwrote {path} and {path.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
