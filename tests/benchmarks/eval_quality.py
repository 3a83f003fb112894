"""Retrieval, answer and refusal quality on the labeled questions over ../shared/data.

    .venv/bin/python -m tests.benchmarks.eval_quality [--data DIR] [--home DIR] [--limit N]

Every figure is reported for the development split (tune on it, read its failures) and the
test split (report it; never tune on it or read its failures): the ``split`` of each question
in eval_questions.yaml and advice_questions.yaml.

- **Retrieval**, for dense only, BM25 only, both fused (RRF) and fused + re-rank, with all
  three collections searched, and for the default retriever as the pipeline runs it (the
  expander routes): recall@3/5/10, MRR and the share of the top 10 taken by a collection the
  question does not need.
- **Routing**: the expander's collections against the labeled ones.
- **End to end**: is a relevant id among `done.references` (what the user sees), with the
  extractive provider and the default retriever (user-guide questions with url citations on,
  since without them a user-guide answer cites nothing by design).
- **Answer sentences**, over every extractive answer: fragments (no words, unbalanced
  brackets or parentheses, a sentence ending in "et al", one starting in lower case or with
  a closing bracket) and sentences that point back ("This", "There", "However", ...) without the
  sentence before them from the same source.
- **Refusals**: the share of personal-advice questions refused and of must-answer questions
  refused (development: the gate's own examples, leave-one-out; test: advice_questions.yaml),
  and the labeled evaluation questions refused.
- **Citations**, over every answer with the extractive provider and with a fake model that
  cites at random (out-of-range numbers included): out-of-range markers left in `done.text`,
  references the text does not cite, streams where a token precedes the last citation.

Prints the tables and writes results/eval.json and results/eval.png.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel

from callbacks.events import CitationEvent, DoneEvent, Event, TokenEvent
from pipelines.catalog.catalog import COLLECTION_NAMES
from pipelines.citations.finalize import cited_numbers
from pipelines.core.options import RequestOptions
from pipelines.index.embeddings import MiniLMEmbeddings
from pipelines.index.sentences import points_back
from pipelines.index.store import open_client
from pipelines.pipeline import AnswerPipeline
from pipelines.retrieval.advice import leave_one_out
from pipelines.retrieval.expander import expander_messages, parse_expansion
from pipelines.retrieval.retriever import RANKINGS, ReactomeRetriever
from tests.benchmarks._common import (
    ADVICE_QUESTIONS,
    DEFAULT_DATA,
    cache_home,
    load_questions,
    prepared_home,
    table,
    write_results,
)

K = 10
SPLITS = ("dev", "test")
# The retriever exactly as a request runs it: default settings, the expander routing.
DEFAULT = "default"
RETRIEVAL_ROWS = (*RANKINGS, DEFAULT)
RETRIEVAL_METRICS = ["recall@3", "recall@5", "recall@10", "mrr", "wrong_collection"]
# The goals on the test split (default settings).
REFUSAL_KEYS = ("advice_questions", "advice_refused", "answer_questions", "answer_refused")
GOALS = {"mrr": 0.92, "recall@3": 0.95, "wrong_collection": 0.05, "relevant_in_references": 0.95}

Scores = dict[str, float]


def cited_as(document: Document) -> str:
    return str(document.metadata.get("st_id") or document.metadata.get("url") or "")


def retrieval_scores(ranked: Sequence[Document], relevant: set[str], needed: set[str]) -> Scores:
    ids = [cited_as(document) for document in ranked[:K]]
    scores = {f"recall@{k}": len(relevant & set(ids[:k])) / len(relevant) for k in (3, 5, 10)}
    first = next((rank for rank, cid in enumerate(ids, start=1) if cid in relevant), None)
    scores["mrr"] = 1.0 / first if first else 0.0
    wrong = [d for d in ranked[:K] if d.metadata.get("collection") not in needed]
    scores["wrong_collection"] = len(wrong) / len(ranked[:K]) if ranked else 0.0
    return scores


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def by_split(
    questions: Sequence[dict[str, Any]], scores: Sequence[Scores], *, summed: Sequence[str] = ()
) -> dict[str, Scores]:
    """Each score over each split's questions: the mean, or the total for ``summed`` keys."""
    result: dict[str, Scores] = {}
    for split in SPLITS:
        mine = [s for q, s in zip(questions, scores, strict=True) if q["split"] == split]
        if mine:
            result[split] = {
                metric: (sum if metric in summed else mean)([s[metric] for s in mine])
                for metric in mine[0]
            }
    return result


def evaluate_retrieval(
    pipeline: AnswerPipeline, questions: list[dict[str, Any]]
) -> dict[str, dict[str, Scores]]:
    results: dict[str, dict[str, Scores]] = {}
    client = open_client(pipeline.settings)
    for row in RETRIEVAL_ROWS:
        retriever = ReactomeRetriever(
            settings=pipeline.settings,
            client=client,
            embeddings=pipeline.embeddings,
            expander=pipeline.models[1],
            k=K,
            **({} if row == DEFAULT else {"ranking": row}),
        )
        # The ranking rows search everything, so they compare rankings alone; the default
        # row searches what the expander routes the question to, as a request does.
        forced = RequestOptions(collections=None if row == DEFAULT else COLLECTION_NAMES)
        per_question = []
        started = time.perf_counter()
        for question in questions:
            ranked = retriever.invoke(question["question"], options=forced)
            per_question.append(
                retrieval_scores(ranked, set(question["relevant"]), set(question["collections"]))
            )
        elapsed = time.perf_counter() - started
        results[row] = by_split(questions, per_question)
        for split_scores in results[row].values():
            split_scores["ms_per_question"] = 1000 * elapsed / len(questions)
        print(f"  {row}: {elapsed:.1f} s", file=sys.stderr)
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
        # Only the development split's misses are shown: the test split's are not to be read.
        if routed != wanted and question["split"] == "dev":
            misses.append(
                {"id": question["id"], "routed": sorted(routed), "wanted": sorted(wanted)}
            )
    return {
        "questions": len(labeled),
        "accuracy": exact / len(labeled),
        "covers_needed": covered / len(labeled),
        "dev_misses": misses,
    }


# --- what the answer's sentences look like -------------------------------------------------

# An extractive answer is quoted sentences, each ending in its source's marker ("... [2]."):
# a quote ends after a marker and its punctuation. Answers built from unnumbered context end
# sentences at plain punctuation.
_QUOTE_END_RE = re.compile(r"(?<=\][.!?])\s+|(?<=[.!?])\s+(?=[A-Z])")
_MARKER_RE = re.compile(r"\s*\[\d+(?:\s*[,-]\s*\d+)*\]")


def answer_quotes(text: str) -> list[tuple[str, int | None]]:
    """The quoted sentences of an answer, markers removed, each with its first marker's n."""
    quotes = []
    for piece in _QUOTE_END_RE.split(text.strip()):
        numbers = [int(n) for n in re.findall(r"\d+", " ".join(_MARKER_RE.findall(piece)))]
        quotes.append((_MARKER_RE.sub("", piece).strip(), numbers[0] if numbers else None))
    # A marker with nothing before it is a quote too, of nothing: a fragment.
    return [(quote, n) for quote, n in quotes if quote or n is not None]


def fragment_problems(sentence: str) -> list[str]:
    """Why ``sentence`` reads as a fragment: the checks the issue names."""
    problems = []
    if not re.search(r"[^\W_]", sentence):
        problems.append("no words")
    if sentence.count("(") != sentence.count(")") or sentence.count("[") != sentence.count("]"):
        problems.append("unbalanced brackets")
    if re.search(r"\bet al\.?\W*$", sentence):
        problems.append("ends in et al")
    # A lower-case word with no digit or capital (p53, mTOR and cAMP are names, not cuts).
    if re.match(r"[)\]]|[a-z][a-z'-]*(?=[\s,.;:]|$)", sentence):
        problems.append("starts in lower case or with a closing bracket")
    return problems


def dangling(quotes: Sequence[tuple[str, int | None]]) -> list[str]:
    """Sentences that point back, with no sentence from the same source right before them."""
    found = []
    for position, (quote, n) in enumerate(quotes):
        before = quotes[position - 1][1] if position else None
        if points_back(quote) and (n is None or before != n):
            found.append(quote)
    return found


# --- answers end to end ---------------------------------------------------------------------


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
    settings: Any, embeddings: Any, questions: list[dict[str, Any]], *, show: int = 0
) -> dict[str, Any]:
    extractive = AnswerPipeline(settings, embeddings=embeddings)
    answers = random_citing_answers(questions)
    fake = AnswerPipeline(
        settings,
        embeddings=embeddings,
        answer_model=FakeListChatModel(responses=answers),
        expander_model=extractive.models[1],
    )
    per_question: list[Scores] = []
    totals: dict[str, dict[str, int]] = {"extractive": {}, "random_citing": {}}
    first_token_ms = []
    examples: list[dict[str, Any]] = []
    for question in questions:
        cite_urls = question["collections"] == ["userguide"]
        events = list(extractive.stream(question["question"], cite_urls=cite_urls))
        done = events[-1]
        assert isinstance(done, DoneEvent)
        shown = {r.st_id or r.url for r in done.data.references}
        quotes = answer_quotes(done.data.text) if done.data.state == "answered" else []
        fragments = [q for q, _ in quotes if fragment_problems(q)]
        pointing = dangling(quotes)
        per_question.append(
            {
                "questions": 1.0,
                "relevant_in_references": float(bool(shown & set(question["relevant"]))),
                "refused": float(done.data.state == "refused"),
                "sentences": float(len(quotes)),
                "fragments": float(len(fragments)),
                "dangling": float(len(pointing)),
            }
        )
        if question["split"] == "dev" and len(examples) < show:
            examples.append({"id": question["id"], "text": done.data.text})
        if done.data.timings.first_token_ms is not None:
            first_token_ms.append(done.data.timings.first_token_ms)
        for name, stream in (
            ("extractive", events),
            ("random_citing", list(fake.stream(question["question"], cite_urls=cite_urls))),
        ):
            for key, value in stream_checks(stream).items():
                totals[name][key] = totals[name].get(key, 0) + value
    # Counts over every answer of the split (the last four must be 0), relevance a share.
    counted = ("questions", "refused", "sentences", "fragments", "dangling")
    splits = by_split(questions, per_question, summed=counted)
    return {
        "splits": splits,
        "citation_checks": totals,
        "first_token_ms_median": sorted(first_token_ms)[len(first_token_ms) // 2]
        if first_token_ms
        else None,
        "dev_examples": examples,
    }


# --- refusals -------------------------------------------------------------------------------


def evaluate_refusals(
    refused: Callable[[str], bool],
    embeddings: Any,
    advice: list[dict[str, Any]],
    questions: list[dict[str, Any]],
) -> dict[str, Any]:
    """How the advice gate sorts the labeled advice and must-answer questions, and how many
    of the evaluation questions it refuses (goal: none). The development half is the gate's
    own examples (pipelines/advice_examples.yaml), each scored by a gate fitted on the
    others; the test half (advice_questions.yaml) is asked as a request asks it."""
    dev = leave_one_out(embeddings)
    test = [q for q in advice if q["split"] == "test"]  # held_out: tests/benchmarks/advice_gate
    asked = [q for q in test if q["label"] == "advice"]
    answer = [q for q in test if q["label"] == "answer"]
    splits: dict[str, Scores] = {
        "dev": {key: float(dev[key]) for key in REFUSAL_KEYS},
        "test": {
            "advice_questions": float(len(asked)),
            "advice_refused": mean([float(refused(q["question"])) for q in asked]),
            "answer_questions": float(len(answer)),
            "answer_refused": float(sum(refused(q["question"]) for q in answer)),
        },
    }
    return {
        "splits": splits,
        "evaluation_questions_refused": sum(refused(q["question"]) for q in questions),
        "dev_missed": dev["missed"],
    }


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
    width = 0.8 / len(RETRIEVAL_ROWS)
    for split, ax in zip(SPLITS, axes, strict=True):
        for offset, row in enumerate(RETRIEVAL_ROWS):
            values = [results["retrieval"][row][split][m] for m in RETRIEVAL_METRICS]
            middle = (len(RETRIEVAL_ROWS) - 1) / 2
            positions = [i + (offset - middle) * width for i in range(len(RETRIEVAL_METRICS))]
            ax.bar(positions, values, width, label=row)
        ax.set_xticks(range(len(RETRIEVAL_METRICS)), RETRIEVAL_METRICS, fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{split} split")
    axes[0].legend(fontsize=8)
    figure.suptitle(f"Retrieval on {results['questions']} labeled questions")
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def goal_lines(results: dict[str, Any]) -> list[str]:
    """Each goal against the test split's figure."""
    test = {**results["retrieval"][DEFAULT]["test"], **results["answers"]["splits"]["test"]}
    lines = []
    for metric, goal in GOALS.items():
        lower_is_better = metric == "wrong_collection"
        met = test[metric] <= goal if lower_is_better else test[metric] >= goal
        bound = "at most" if lower_is_better else "at least"
        lines.append(
            f"  {metric}: {test[metric]:.3f} ({bound} {goal}) {'met' if met else 'MISSED'}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="../shared/data")
    parser.add_argument(
        "--home", type=Path, default=cache_home("eval-home"), help="where the corpus is ingested"
    )
    parser.add_argument("--limit", type=int, help="only the first N questions (a quick run)")
    parser.add_argument("--name", default="eval", help="results/NAME.json and NAME.png")
    parser.add_argument(
        "--show", type=int, default=0, help="print the first N development answers in full"
    )
    args = parser.parse_args(argv)

    questions = load_questions()[: args.limit]
    advice = load_questions(ADVICE_QUESTIONS)
    embeddings = MiniLMEmbeddings(model_cache=cache_home("models"))
    settings = prepared_home(args.data, args.home, embeddings)
    pipeline = AnswerPipeline(settings, embeddings=embeddings)

    print("retrieval...", file=sys.stderr)
    retrieval = evaluate_retrieval(pipeline, questions)
    routing = evaluate_routing(pipeline, questions)
    print("refusals...", file=sys.stderr)
    refusals = evaluate_refusals(
        lambda question: pipeline.refusal(question) is not None, embeddings, advice, questions
    )
    print("answers...", file=sys.stderr)
    answers = evaluate_answers(settings, embeddings, questions, show=args.show)
    counts = {split: sum(q["split"] == split for q in questions) for split in SPLITS}
    results = {
        "questions": len(questions),
        "paraphrased": sum(bool(q.get("paraphrased")) for q in questions),
        "splits": counts,
        "retrieval": retrieval,
        "routing": routing,
        "answers": answers,
        "refusals": refusals,
    }

    metrics = [*RETRIEVAL_METRICS, "ms_per_question"]
    print(
        f"\nRetrieval, {counts['dev']} development and {counts['test']} test questions, top {K}; "
        f"the ranking rows search all three collections, {DEFAULT} is routed as a request is"
    )
    rows = [
        [r, split, *(retrieval[r][split][m] for m in metrics)]
        for r in RETRIEVAL_ROWS
        for split in SPLITS
        if split in retrieval[r]
    ]
    print(table(["ranking", "split", *metrics], rows))
    print(
        f"\nRouting: {routing['accuracy']:.3f} exact, {routing['covers_needed']:.3f} cover the "
        f"needed collections ({routing['questions']} questions)"
    )
    keys = ["questions", "relevant_in_references", "refused", "sentences", "fragments", "dangling"]
    print("\nAnswers with the extractive provider (counts over every answer; the last three 0)")
    print(
        table(
            ["split", *keys],
            [[split, *(answers["splits"][split][k] for k in keys)] for split in answers["splits"]],
        )
    )
    keys = list(REFUSAL_KEYS)
    print(
        "\nRefusals (advice_questions.yaml): share of personal-advice questions refused "
        "(goal 0.9), must-answer questions refused (goal 0)"
    )
    print(
        table(
            ["split", *keys],
            [[split, *(refusals["splits"][split][k] for k in keys)] for split in SPLITS],
        )
    )
    print(f"evaluation questions refused: {refusals['evaluation_questions_refused']} (goal 0)")
    checks = answers["citation_checks"]
    keys = ["out_of_range", "uncited_references", "token_before_last_citation"]
    print("\nCitation checks (counts over all answers; each must be 0)")
    print(
        table(
            ["model", *keys], [[name, *(checks[name].get(k, 0) for k in keys)] for name in checks]
        )
    )
    if "test" in retrieval[DEFAULT] and "test" in answers["splits"]:
        print("\nGoals on the test split, default settings")
        print("\n".join(goal_lines(results)))
    for example in answers["dev_examples"]:
        print(f"\n{example['id']}: {example['text']}")

    path = write_results(args.name, results)
    plot(results, path.with_suffix(".png"))
    print(f"\nwrote {path} and {path.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
