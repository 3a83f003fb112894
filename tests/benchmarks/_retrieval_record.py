"""What the retrieval record (issue 26, section 1) adds to a request: time and log bytes.

The same pipeline (the default offline one: extractive answer model, rule expander) answers
each question with the retriever's ``record_candidates`` on and off, interleaved and
alternating which goes first, so load on the machine falls on both alike; the time is the
whole request to its ``done`` event, log written (the logs it writes are deleted after);
and, less noisy, the retriever alone (expansion, search, ranking and the record built).
Bytes: the record's line in each log against the whole log, over the runs with the record on.
"""

from __future__ import annotations

import statistics
import time
import uuid
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from pipelines.core.settings import Settings
from pipelines.core.tags import RETRIEVAL_RECORD
from pipelines.pipeline import AnswerPipeline

__all__ = ["bench_retrieval_record", "report"]


def _record_line_bytes(path: Path) -> int:
    marker = f'"name": "{RETRIEVAL_RECORD}"'.encode()
    for line in path.read_bytes().splitlines(keepends=True):
        if b'"hook": "custom_event"' in line and marker in line:
            return len(line)
    return 0


def bench_retrieval_record(
    settings: Settings, embeddings: Embeddings, questions: list[str], rounds: int = 3
) -> dict[str, Any]:
    settings = settings.model_copy(update={"event_logs": True})  # the benchmarks' are off
    pipeline = AnswerPipeline(settings, embeddings=embeddings)
    retriever = pipeline.own_retriever
    assert retriever is not None
    try:
        return _measure(pipeline, questions, rounds)
    finally:
        retriever.record_candidates = True
        for path in settings.logs_dir.glob(f"*-{_PREFIX}*.jsonl"):
            path.unlink()


_PREFIX = "bench-record-"


def _measure(pipeline: AnswerPipeline, questions: list[str], rounds: int) -> dict[str, Any]:
    retriever = pipeline.own_retriever
    assert retriever is not None
    for question in questions[:3]:  # warm indexes, the ONNX session and the log folder
        list(pipeline.stream(question, request_id=f"{_PREFIX}warm-{uuid.uuid4().hex}"))
    seconds: dict[bool, list[float]] = {True: [], False: []}
    retrieval: dict[bool, list[float]] = {True: [], False: []}
    logs: list[Path] = []
    for number in range(rounds):
        for position, question in enumerate(questions):
            order = (True, False) if (number + position) % 2 == 0 else (False, True)
            for recorded in order:
                retriever.record_candidates = recorded
                request_id = f"{_PREFIX}{uuid.uuid4().hex}"
                started = time.perf_counter()
                list(pipeline.stream(question, request_id=request_id))
                seconds[recorded].append(time.perf_counter() - started)
                if recorded and number == 0:
                    logs += pipeline.settings.logs_dir.glob(f"*-{request_id}.jsonl")
                started = time.perf_counter()
                retriever.invoke(question)
                retrieval[recorded].append(time.perf_counter() - started)
    record_bytes = [_record_line_bytes(path) for path in logs]
    log_bytes = [path.stat().st_size for path in logs]
    on, off = statistics.median(seconds[True]), statistics.median(seconds[False])
    alone_on, alone_off = statistics.median(retrieval[True]), statistics.median(retrieval[False])
    return {
        "requests": len(seconds[True]),
        "on_p50_ms": on * 1000,
        "off_p50_ms": off * 1000,
        "added_ms": (on - off) * 1000,
        "ratio_p50": on / off,
        "retrieval_on_p50_ms": alone_on * 1000,
        "retrieval_off_p50_ms": alone_off * 1000,
        "retrieval_ratio_p50": alone_on / alone_off,
        "logs": len(logs),
        "record_bytes_mean": statistics.fmean(record_bytes),
        "log_bytes_mean": statistics.fmean(log_bytes),
        "record_share": sum(record_bytes) / sum(log_bytes),
    }


def report(result: dict[str, Any]) -> str:
    return (
        f"Retrieval record over {result['requests']} requests each way: request p50 "
        f"{result['on_p50_ms']:.1f} ms with it, {result['off_p50_ms']:.1f} ms without "
        f"(ratio {result['ratio_p50']:.3f}, {result['added_ms']:+.2f} ms); the retriever "
        f"alone {result['retrieval_on_p50_ms']:.1f} against {result['retrieval_off_p50_ms']:.1f}"
        f" ms (ratio {result['retrieval_ratio_p50']:.3f}); its log line "
        f"{result['record_bytes_mean'] / 1024:.1f} KiB of {result['log_bytes_mean'] / 1024:.1f} "
        f"KiB per log ({result['record_share']:.1%}, mean over {result['logs']} logs)"
    )
