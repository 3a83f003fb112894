"""The extractive answer after retrieval, and the evidence step, for bench_performance.

Each question is answered once by a pipeline with the default settings (extractive model,
offline judge), after a warm-up on other questions, so no answer finds its passages in the
pipeline's memory from an earlier asking of the same question; what it finds is what
ingestion stored. From each answer's ``done.data.timings``:

- the extractive model's first token after retrieval's end: ``first_token_ms -
  retrieval_ms`` (goal: p50 within :data:`AFTER_RETRIEVAL_GOAL_MS`);
- the first token from the request's start as a multiple of retrieval's time:
  ``first_token_ms / retrieval_ms`` (goal: p50 at most :data:`RATIO_GOAL`);

and the evidence step: the offline judge's ``verdicts`` on the answer's claims, timed inside
the pipeline (goal: p50 under :data:`EVIDENCE_GOAL_MS`). The bank's counts say how many
passages were found precomputed and how many were worked out at answer time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from callbacks.events import DoneEvent
from pipelines.core.settings import Settings
from pipelines.evidence.claims import Claim, Verdict
from pipelines.evidence.judges import OfflineJudge
from pipelines.pipeline import AnswerPipeline
from tests.benchmarks._common import percentile

__all__ = ["bench_answer_speed", "report"]

AFTER_RETRIEVAL_GOAL_MS = 10.0
RATIO_GOAL = 1.5
EVIDENCE_GOAL_MS = 10.0
# Asked first, to load the models and indexes; not among the measured questions.
_WARM_UP = ("What does the ABCA1 transporter do?", "How do I search for a pathway?")


class _TimedJudge:
    """The offline judge, its ``verdicts`` timed, as the pipeline calls it."""

    def __init__(self, judge: OfflineJudge) -> None:
        self.judge_ = judge
        self.ms: list[float] = []

    async def judge(self, claims: Sequence[Claim]) -> dict[tuple[str, int], Verdict]:
        return await asyncio.to_thread(self._timed, claims)

    def _timed(self, claims: Sequence[Claim]) -> dict[tuple[str, int], Verdict]:
        started = time.perf_counter()
        found = self.judge_.verdicts(claims)
        self.ms.append((time.perf_counter() - started) * 1000)
        return found


def _stats(values: Sequence[float]) -> dict[str, float]:
    return {"p50": percentile(values, 0.5), "p95": percentile(values, 0.95)}


def bench_answer_speed(
    settings: Settings, embeddings: Any, questions: Sequence[tuple[str, dict[str, Any]]]
) -> dict[str, Any]:
    """Answer each (question, stream options) once; the timings above, per answer."""
    pipeline = AnswerPipeline(settings, embeddings=embeddings)
    judge = pipeline.evidence_judge
    if not isinstance(judge, OfflineJudge):
        raise SystemExit("the evidence timing needs the offline judge (evidence_judge=offline)")
    timed = _TimedJudge(judge)
    pipeline.__dict__["evidence_judge"] = timed  # the cached property, replaced
    for question in _WARM_UP:
        list(pipeline.stream(question))
    timed.ms.clear()
    bank = pipeline.sentence_bank
    before = dict(getattr(bank, "counts", {}))
    after: list[float] = []
    ratio: list[float] = []
    retrieval: list[float] = []
    states: dict[str, int] = {}
    for question, options in questions:
        done = None
        for event in pipeline.stream(question, **options):
            done = event
        if not isinstance(done, DoneEvent):
            raise SystemExit(f"no done event for {question!r}")
        states[done.data.state] = states.get(done.data.state, 0) + 1
        timings = done.data.timings
        if timings.first_token_ms is None or not timings.retrieval_ms:
            continue
        after.append(timings.first_token_ms - timings.retrieval_ms)
        ratio.append(timings.first_token_ms / timings.retrieval_ms)
        retrieval.append(timings.retrieval_ms)
    counts = {key: value - before.get(key, 0) for key, value in getattr(bank, "counts", {}).items()}
    return {
        "answers": len(questions),
        "states": states,
        "retrieval_ms": _stats(retrieval),
        "first_token_after_retrieval_ms": _stats(after),
        "first_token_over_retrieval": _stats(ratio),
        "evidence_ms": {**_stats(timed.ms), "answers_judged": len(timed.ms)},
        "bank": counts,
    }


def _against(value: float, goal: float, *, below: bool) -> str:
    met = value < goal if below else value <= goal
    return "met" if met else "not met"


def report(results: dict[str, Any]) -> str:
    after = results["first_token_after_retrieval_ms"]
    ratio = results["first_token_over_retrieval"]
    evidence = results["evidence_ms"]
    lines = [
        f"Extractive answers ({results['answers']} questions, {results['states']}; retrieval "
        f"p50 {results['retrieval_ms']['p50']:.1f} ms)",
        f"  first token after retrieval's end: p50 {after['p50']:.1f} ms, p95 "
        f"{after['p95']:.1f} ms (goal: p50 within {AFTER_RETRIEVAL_GOAL_MS:g} ms: "
        f"{_against(after['p50'], AFTER_RETRIEVAL_GOAL_MS, below=False)})",
        f"  first token from the request's start / retrieval's time: p50 {ratio['p50']:.2f}, "
        f"p95 {ratio['p95']:.2f} (goal: p50 at most {RATIO_GOAL:g}: "
        f"{_against(ratio['p50'], RATIO_GOAL, below=False)})",
        f"  evidence step (offline judge, {evidence['answers_judged']} answers judged): p50 "
        f"{evidence['p50']:.1f} ms, p95 {evidence['p95']:.1f} ms (goal: p50 under "
        f"{EVIDENCE_GOAL_MS:g} ms: {_against(evidence['p50'], EVIDENCE_GOAL_MS, below=True)})",
    ]
    if results["bank"]:
        counts = ", ".join(f"{key} {value}" for key, value in sorted(results["bank"].items()))
        lines.append(f"  sentence bank: {counts}")
    return "\n".join(lines)
