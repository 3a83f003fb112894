"""How well the default evidence judge tells a cited source that backs a sentence from one that
does not, on the labeled pairs of evidence_pairs.yaml over ../shared/data.

    .venv/bin/python -m tests.benchmarks.eval_evidence [--data DIR] [--home DIR]

Each question's pairs are judged together, as one answer's claims are (the judge's word
rarity is worked out over the passages it is given). Reported for the development split
(tune on it), the test split (report it; never tune on it) and both: the share of
unsupported pairs flagged (goal at least 0.90) and of supported pairs flagged (goal at most
0.05), each with its counts and against its goal, by kind of pair, the scores near the
threshold, and the judge's time per answer with the passages' sentences already embedded;
the passages' sentences are read from the chunk tables, as an answer reads them, and the
flagged shares are given again with every passage worked out alone.
Writes results/evidence.json.
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.core.settings import Settings
from pipelines.evidence.claims import Claim
from pipelines.evidence.judges import OfflineJudge, judge_key
from pipelines.index.chunk_table import ChunkTable
from pipelines.index.embeddings import MiniLMEmbeddings
from pipelines.index.passages import SentenceBank
from tests.benchmarks._common import (
    DEFAULT_DATA,
    cache_home,
    loaded_tables,
    prepared_home,
    table,
    write_results,
)
from tests.benchmarks.evidence_pairs import (
    KINDS,
    load_pairs,
    pair_problems,
    question_splits,
    source_texts,
)

SPLITS = ("dev", "test")
# The goals for the default judge.
FLAGGED_UNSUPPORTED_GOAL = 0.90
FLAGGED_SUPPORTED_GOAL = 0.05
# Scores this far either side of the threshold are shown bin by bin.
NEAR = 0.2
BIN = 0.05
# The judge's time per answer, for answers of these kinds of sentences.
TIMED = ("copied", "paraphrase")
TIME_GOAL_MS = 10.0


@dataclass(frozen=True)
class Judged:
    pair: dict[str, Any]
    split: str
    score: float
    supported: bool

    @property
    def flagged_wrongly(self) -> bool:
        return self.supported != (str(self.pair["label"]) == "supported")


def judge_all(
    judge: OfflineJudge, pairs: Sequence[dict[str, Any]], texts: dict[str, str]
) -> tuple[list[Judged], dict[str, list[float]]]:
    """Every pair's verdict, each question's pairs in one call; and, per question, the time
    of a call for its supported pairs of one kind alone (an answer's claims) with the
    passages already in the bank: ``copied`` sentences, whose vectors the passages hold (an
    extractive answer), and ``paraphrase`` ones, each embedded (a generative answer)."""
    splits = question_splits()
    by_question: dict[str, list[dict[str, Any]]] = {}
    for pair in pairs:
        by_question.setdefault(pair["question"], []).append(pair)
    judged: list[Judged] = []
    times: dict[str, list[float]] = {kind: [] for kind in TIMED}
    for question, mine in by_question.items():
        numbers = {st_id: n for n, st_id in enumerate(dict.fromkeys(p["st_id"] for p in mine), 1)}
        claims = [Claim(p["sentence"], numbers[p["st_id"]], texts[p["st_id"]]) for p in mine]
        verdicts = judge.verdicts(claims)
        for pair, claim in zip(mine, claims, strict=True):
            verdict = verdicts[judge_key(claim)]
            judged.append(Judged(pair, splits[question], verdict.score, verdict.supported))
        for kind in TIMED:
            answer = [
                claim
                for pair, claim in zip(mine, claims, strict=True)
                if pair["label"] == "supported" and pair["kind"] == kind
            ]
            if answer:
                started = time.perf_counter()
                judge.verdicts(answer)
                times[kind].append(1000 * (time.perf_counter() - started))
    return judged, times


def rates(judged: Sequence[Judged]) -> dict[str, float]:
    unsupported = [j for j in judged if j.pair["label"] == "unsupported"]
    supported = [j for j in judged if j.pair["label"] == "supported"]
    flagged_unsupported = sum(not j.supported for j in unsupported)
    flagged_supported = sum(not j.supported for j in supported)
    return {
        "unsupported": len(unsupported),
        "unsupported_flagged": flagged_unsupported,
        "unsupported_flagged_share": flagged_unsupported / len(unsupported) if unsupported else 0,
        "supported": len(supported),
        "supported_flagged": flagged_supported,
        "supported_flagged_share": flagged_supported / len(supported) if supported else 0.0,
    }


def goal_lines(name: str, figures: dict[str, float]) -> list[str]:
    caught = figures["unsupported_flagged_share"]
    wrong = figures["supported_flagged_share"]
    return [
        f"  {name}: unsupported pairs flagged {caught:.3f} "
        f"({figures['unsupported_flagged']}/{figures['unsupported']}; goal at least "
        f"{FLAGGED_UNSUPPORTED_GOAL}) {'met' if caught >= FLAGGED_UNSUPPORTED_GOAL else 'not met'}",
        f"  {name}: supported pairs flagged {wrong:.3f} "
        f"({figures['supported_flagged']}/{figures['supported']}; goal at most "
        f"{FLAGGED_SUPPORTED_GOAL}) {'met' if wrong <= FLAGGED_SUPPORTED_GOAL else 'not met'}",
    ]


def near_threshold(judged: Sequence[Judged], threshold: float) -> list[list[Any]]:
    """Rows of (score range, supported pairs, unsupported pairs) around the threshold."""
    edges = [threshold - NEAR + BIN * k for k in range(round(2 * NEAR / BIN) + 1)]
    bounds = [(-math.inf, edges[0]), *itertools.pairwise(edges), (edges[-1], math.inf)]
    rows = []
    for low, high in bounds:
        inside = [j for j in judged if low <= j.score < high]
        label = (
            f"< {high:.2f}"
            if low == -math.inf
            else f">= {low:.2f}"
            if high == math.inf
            else f"{low:.2f}-{high:.2f}"
        )
        rows.append(
            [
                label,
                sum(j.pair["label"] == "supported" for j in inside),
                sum(j.pair["label"] == "unsupported" for j in inside),
            ]
        )
    return rows


def evaluate(
    settings: Settings,
    embeddings: Any,
    pairs: Sequence[dict[str, Any]],
    make_judge: Callable[[SentenceBank], OfflineJudge] | None = None,
    *,
    stored: bool = True,
) -> dict[str, Any]:
    """The judge's figures on ``pairs``. With ``stored``, the passages' sentences are read
    from the chunk tables, as an answer over the ingested corpus reads them (their vectors
    pooled at ingest, decision 0045); without, each passage is worked out alone, as a reader
    does for a passage no table holds."""
    texts = source_texts(settings, {p["st_id"] for p in pairs})
    missing = sorted({p["st_id"] for p in pairs} - set(texts))
    if missing:
        raise SystemExit(f"not in the ingested collections: {', '.join(missing)}")
    # Held while judging: the bank finds the sentences of the tables loaded in the process.
    tables = loaded_tables(settings) if stored else []
    bank = SentenceBank(embeddings)
    judge = (
        make_judge(bank)
        if make_judge
        else OfflineJudge(bank, threshold=settings.evidence_threshold)
    )
    judged, times = judge_all(judge, pairs, texts)
    if not stored and bank.counts["stored"]:
        raise RuntimeError("a chunk table loaded elsewhere in this process served passages")
    results: dict[str, Any] = {
        "pairs": len(pairs),
        "threshold": judge.threshold,
        "sentence_vectors": _vectors_read(tables, bank),
        "splits": {split: rates([j for j in judged if j.split == split]) for split in SPLITS},
        "all": rates(judged),
        "kinds": {
            f"{kind} {split}": rates(
                [j for j in judged if j.pair["kind"] == kind and j.split == split]
            )
            for kind in KINDS
            for split in SPLITS
        },
        "near_threshold": near_threshold(judged, judge.threshold),
        "ms_per_answer": {
            kind: {"answers": len(found), "median": statistics.median(found), "max": max(found)}
            for kind, found in times.items()
            if found
        },
        "dev_mistakes": [
            {
                "question": j.pair["question"],
                "label": j.pair["label"],
                "kind": j.pair["kind"],
                "score": j.score,
                "st_id": j.pair["st_id"],
                "sentence": j.pair["sentence"],
            }
            for j in judged
            if j.split == "dev" and j.flagged_wrongly
        ],
    }
    return results


def _vectors_read(tables: Sequence[ChunkTable], bank: SentenceBank) -> dict[str, Any]:
    """Where the passages' sentence vectors came from."""
    pooling = sorted({str(t.sentences.pooling) for t in tables if t.sentences is not None})
    return {"tables": len(tables), "pooling": pooling, "passages": dict(bank.counts)}


def report(results: dict[str, Any]) -> str:
    keys = ["unsupported", "unsupported_flagged", "supported", "supported_flagged"]
    read = results["sentence_vectors"]
    passages = ", ".join(f"{count} {how}" for how, count in read["passages"].items())
    lines = [
        f"\nEvidence judge (offline, threshold {results['threshold']}) on {results['pairs']} "
        "labeled (sentence, cited source) pairs; a pair is flagged when judged unsupported",
        f"passages' sentences from {read['tables']} chunk tables (pooling: "
        f"{', '.join(read['pooling']) or 'none'}): {passages}",
    ]
    rows = [[split, *(results["splits"][split][k] for k in keys)] for split in SPLITS]
    rows.append(["all", *(results["all"][k] for k in keys)])
    rows += [[kind, *(figures[k] for k in keys)] for kind, figures in results["kinds"].items()]
    lines.append(table(["pairs", *keys], rows))
    lines.append("\nScores near the threshold (pairs per score range)")
    lines.append(table(["score", "supported", "unsupported"], results["near_threshold"]))
    lines.append(
        "\nJudge time per answer (a question's supported pairs of one kind; the passages' "
        f"sentences already embedded; goal: median under {TIME_GOAL_MS:.0f} ms)"
    )
    for kind, found in results["ms_per_answer"].items():
        how = "vectors found in the passages" if kind == "copied" else "each sentence embedded"
        median = found["median"]
        lines.append(
            f"  {kind} sentences ({how}): median {median:.1f} ms, max {found['max']:.1f} ms "
            f"over {found['answers']} answers, {'met' if median < TIME_GOAL_MS else 'not met'}"
        )
    lines.append("\nGoals, default judge")
    for split in SPLITS:
        lines += goal_lines(f"{split} split", results["splits"][split])
    lines += goal_lines("both splits", results["all"])
    alone = results.get("worked_out")
    if alone is not None:
        lines.append(
            "\nThe same pairs with every passage worked out alone (sentences embedded one by "
            "one, as for a passage no table holds)"
        )
        rows = [[split, *(alone["splits"][split][k] for k in keys)] for split in SPLITS]
        rows.append(["all", *(alone["all"][k] for k in keys)])
        lines.append(table(["pairs", *keys], rows))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="../shared/data")
    parser.add_argument(
        "--home", type=Path, default=cache_home("eval-home"), help="where the corpus is ingested"
    )
    parser.add_argument(
        "--show", action="store_true", help="print the development split's mistakes"
    )
    args = parser.parse_args(argv)

    pairs = load_pairs()
    problems = pair_problems(pairs, question_splits())
    if problems:
        raise SystemExit("evidence_pairs.yaml: " + "; ".join(problems))
    embeddings = MiniLMEmbeddings(model_cache=cache_home("models"))
    settings = prepared_home(args.data, args.home, embeddings)
    results = evaluate(settings, embeddings, pairs)
    alone = evaluate(settings, embeddings, pairs, stored=False)
    results["worked_out"] = {"splits": alone["splits"], "all": alone["all"]}
    print(report(results))
    if args.show:
        for mistake in results["dev_mistakes"]:
            print(
                f"{mistake['question']} {mistake['label']} {mistake['kind']} "
                f"{mistake['score']:.3f} {mistake['st_id']}: {mistake['sentence']}"
            )
    path = write_results("evidence", results)
    print(f"\nwrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
