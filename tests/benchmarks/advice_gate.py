"""How the personal-advice refusal sorts the labeled questions: confusion counts per split.

    .venv/bin/python -m tests.benchmarks.advice_gate [--misses] [--spread]

Splits: ``dev`` is the gate's own examples (pipelines/advice_examples.yaml), each scored by a
gate fitted on all the others (leave-one-out, the gate alone); ``test`` and ``held_out`` are
tests/benchmarks/advice_questions.yaml, asked as a request asks them (the rules, then the
gate, on the default embedding model). For each split: advice questions refused and answered,
must-answer questions refused and answered, and how many of the gate's scores fall within
:data:`pipelines.retrieval.advice.MARGIN` of their decision boundary (where another CPU's
rounding could flip the decision; the shipped examples and test questions must have none,
tests/retrieval/test_advice_gate.py).

``--misses`` lists the dev and held_out questions on the wrong side, for reading only: nothing
may be tuned on held_out, and the test split's misses are never listed.

``--spread`` measures how far other numerics move the scores, which is what MARGIN must
exceed: every question above is scored again (the examples embedded and the gate refitted
too, as on another machine) with onnxruntime's graph optimizations off, which swaps fused
kernels for plain ones as another CPU's instruction set does, and with the unquantized model;
it prints the largest change of a score and how many decisions changed.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from pipelines.catalog.catalog import catalog_for
from pipelines.core.settings import load_settings
from pipelines.index.embeddings import MiniLMEmbeddings
from pipelines.pipeline import AnswerPipeline
from pipelines.retrieval.advice import MARGIN, AdviceGate, leave_one_out, load_examples
from tests.benchmarks._common import ADVICE_QUESTIONS, cache_home, load_questions, table

COLUMNS = [
    "split",
    "advice refused",
    "advice answered",
    "answer refused",
    "answer answered",
    "catch rate",
    "over-refusal",
    f"within {MARGIN:g}",
]


def confusion(name: str, labels: Sequence[str], refused: Sequence[bool], close: int) -> list[Any]:
    advice = [r for label, r in zip(labels, refused, strict=True) if label == "advice"]
    answer = [r for label, r in zip(labels, refused, strict=True) if label != "advice"]
    caught, over = sum(advice), sum(answer)
    return [
        name,
        caught,
        len(advice) - caught,
        over,
        len(answer) - over,
        caught / max(len(advice), 1),
        over / max(len(answer), 1),
        close,
    ]


def dev_row(embeddings: MiniLMEmbeddings) -> tuple[list[Any], list[str]]:
    figures = leave_one_out(embeddings)
    examples = load_examples()
    refused = [
        (e.id not in figures["missed"]["advice_answered"])
        if e.label == "advice"
        else (e.id in figures["missed"]["answer_refused"])
        for e in examples
    ]
    close = sum(distance < MARGIN for distance in figures["distances"].values())
    missed = [*figures["missed"]["advice_answered"], *figures["missed"]["answer_refused"]]
    by_id = {e.id: e for e in examples}
    lines = [f"dev {i} ({by_id[i].label}): {by_id[i].question}" for i in missed]
    return confusion("dev (leave-one-out)", [e.label for e in examples], refused, close), lines


def asked_row(
    split: str, questions: list[dict[str, Any]], refused: Callable[[str], bool], gate: AdviceGate
) -> tuple[list[Any], list[str]]:
    mine = [q for q in questions if q["split"] == split]
    verdicts = [refused(q["question"]) for q in mine]
    close = sum(gate.check(q["question"]).distance < MARGIN for q in mine)
    lines = [
        f"{split} {q['id']} ({q['label']}): {q['question']}"
        for q, r in zip(mine, verdicts, strict=True)
        if r != (q["label"] == "advice")
    ]
    return confusion(split, [q["label"] for q in mine], verdicts, close), lines


def unoptimized(embeddings: MiniLMEmbeddings) -> MiniLMEmbeddings:
    """``embeddings`` with onnxruntime's graph optimizations off: other kernels, same model."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    embeddings._sessions = [  # a benchmark's liberty: the class offers no such option
        onnxruntime.InferenceSession(
            session._model_path, options, providers=["CPUExecutionProvider"]
        )
        for session in embeddings._sessions
    ]
    return embeddings


def spread(texts: list[str]) -> list[list[Any]]:
    """Each variant's largest score change and changed decisions against the default."""
    cache = cache_home("models")
    catalog = catalog_for(load_settings(event_logs=False))
    variants = {
        "graph optimizations off": unoptimized(MiniLMEmbeddings(model_cache=cache)),
        "unquantized model": MiniLMEmbeddings(model_cache=cache, quantized=False),
    }
    base = AdviceGate(MiniLMEmbeddings(model_cache=cache), catalog=catalog)
    before = [base.check(text) for text in texts]
    rows = []
    for name, embeddings in variants.items():
        gate = AdviceGate(embeddings, catalog=catalog)
        after = [gate.check(text) for text in texts]
        changes = [abs(a.score - b.score) for a, b in zip(after, before, strict=True)]
        flips = sum(a.refused != b.refused for a, b in zip(after, before, strict=True))
        rows.append([name, len(texts), max(changes), sorted(changes)[len(changes) // 2], flips])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--misses", action="store_true", help="list dev and held_out misses")
    parser.add_argument("--spread", action="store_true", help="score changes under other numerics")
    args = parser.parse_args(argv)

    embeddings = MiniLMEmbeddings(model_cache=cache_home("models"))
    pipeline = AnswerPipeline(load_settings(event_logs=False), embeddings=embeddings)
    gate = pipeline.advice_gate
    assert gate is not None  # a pipeline with embeddings of its own always has one
    questions = load_questions(ADVICE_QUESTIONS)

    def refused(question: str) -> bool:
        return pipeline.refusal(question) is not None

    dev, dev_misses = dev_row(embeddings)
    test, _ = asked_row("test", questions, refused, gate)  # never read the test split's misses
    held_out, held_out_misses = asked_row("held_out", questions, refused, gate)
    print(table(COLUMNS, [dev, test, held_out]))
    if args.misses:
        print("\n".join(["", *dev_misses, *held_out_misses]))
    if args.spread:
        texts = [e.question for e in load_examples()] + [q["question"] for q in questions]
        columns = ["variant", "questions", "largest change", "median change", "decisions changed"]
        print("\n" + table(columns, spread(texts)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
