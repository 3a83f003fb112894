"""Concurrent SSE streams against the real app under uvicorn on 127.0.0.1.

    .venv/bin/python -m tests.benchmarks.bench_serving [--streams 50 200] [--tokens 300]

The server runs in its own process with a fake answer model (``--tokens`` tokens, one every
``--gap-ms``) and an instant retriever whose source names its question, so each stream can be
checked against its own request: every event carries that stream's request_id, seq runs
1..n without gaps, and ``done`` holds that question's source and marker. Reports completed
streams, errors, streams mixed with another, and the p50/p99 gap between tokens as the client
sees them.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from tests.benchmarks._common import percentile
from tests.support.servers import free_port, wait_until_serving

_QUESTION = "question number {i}"


def _fake_app() -> Any:
    """The app with the fake model and retriever; its pace from the environment (so that each
    of uvicorn's worker processes builds the same)."""
    from langchain_core.documents import Document
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableLambda

    from app.http.factory import create_app
    from pipelines.core.settings import load_settings
    from pipelines.pipeline import AnswerPipeline
    from tests.support.fakes import ScriptedStream

    tokens = int(os.environ["BENCH_SERVING_TOKENS"])
    gap_ms = float(os.environ["BENCH_SERVING_GAP_MS"])

    def paced(messages: Sequence[BaseMessage]) -> list[str]:
        """Names the question it answers and cites [1], in ``tokens`` tokens."""
        marker = str(messages[-1].content).rsplit("question number ", 1)[-1].split()[0]
        return [f"Q{marker} ", "[1] ", *(["w "] * (tokens - 2))][:tokens]

    def retrieve(question: str) -> list[Document]:
        number = question.rsplit(" ", 1)[-1]
        metadata = {"st_id": f"R-HSA-{1000 + int(number)}", "display_name": question,
                    "collection": "reactome", "citable": True}  # fmt: skip
        return [Document(page_content=f"Facts for {question}.", metadata=metadata)]

    settings = load_settings(
        home=os.environ["BENCH_SERVING_HOME"], event_logs=False, request_timeout_s=600
    )
    pipeline = AnswerPipeline(
        settings,
        answer_model=ScriptedStream(script=paced, delay_s=gap_ms / 1000),
        expander_model=ScriptedStream(script=lambda _: ["{}"]),
        retriever=RunnableLambda(retrieve),
    )
    return create_app(settings, pipeline=pipeline)


def _serve(port: int, tokens: int, gap_ms: float, home: str, workers: int) -> None:
    import uvicorn

    os.environ.update(
        BENCH_SERVING_TOKENS=str(tokens), BENCH_SERVING_GAP_MS=str(gap_ms), BENCH_SERVING_HOME=home
    )
    with tempfile.TemporaryDirectory() as metrics:
        if workers > 1:  # as `serve --workers` does
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics
        uvicorn.run("tests.benchmarks.bench_serving:_fake_app", factory=True, host="127.0.0.1",
                    port=port, log_level="warning", backlog=4096,
                    workers=workers if workers > 1 else None)  # fmt: skip


async def _one(client: httpx.AsyncClient, base: str, i: int) -> dict[str, Any]:
    question = _QUESTION.format(i=i)
    arrivals: list[float] = []
    events: list[dict[str, Any]] = []
    async with aconnect_sse(
        client, "POST", f"{base}/v1/answer/stream", json={"question": question}
    ) as source:
        async for frame in source.aiter_sse():
            event = json.loads(frame.data)
            events.append(event)
            if event["type"] == "token":
                arrivals.append(time.perf_counter())
    done = events[-1] if events else {}
    own = (
        len({e["request_id"] for e in events}) == 1
        and [e["seq"] for e in events] == list(range(1, len(events) + 1))
        and done.get("type") == "done"
        and f"Q{i}" in done["data"]["text"]
        and [r["display_name"] for r in done["data"]["references"]] == [question]
    )
    gaps = [(b - a) * 1000 for a, b in itertools.pairwise(arrivals)]
    return {
        "completed": done.get("data", {}).get("state") == "answered",
        "own": own,
        "gaps": gaps,
        "events": len(events),
    }


async def _drive(base: str, streams: int) -> list[dict[str, Any] | BaseException]:
    limits = httpx.Limits(max_connections=streams, max_keepalive_connections=streams)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        return await asyncio.gather(
            *(_one(client, base, i) for i in range(streams)), return_exceptions=True
        )


@contextmanager
def fake_app_served(*, tokens: int, gap_ms: float, workers: int = 1) -> Iterator[tuple[str, int]]:
    """The app with the fake model and retriever in its own process (and with ``workers``
    above 1, in that many worker processes under it): (base url, pid)."""
    port = free_port()
    # Its own interpreter rather than a multiprocessing child: uvicorn's worker processes
    # need the standard input a multiprocessing child no longer has.
    start = (
        "from tests.benchmarks.bench_serving import _serve; "
        f"_serve({port}, {tokens}, {gap_ms}, HOME, {workers})"
    )
    with tempfile.TemporaryDirectory() as home:
        process = subprocess.Popen(
            [sys.executable, "-c", start.replace("HOME", repr(home))],
            cwd=Path(__file__).parents[2],
        )
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until_serving(f"{base}/docs", lambda: process.poll() is None)
            yield base, process.pid
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` and of its children's threads now
    running (``serve --workers``: the workers), from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for process in [pid, *_children(pid)]:
        fields = Path(f"/proc/{process}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return total


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def bench_serving(
    streams: int, *, tokens: int = 300, gap_ms: float = 2.0, workers: int = 1
) -> dict[str, Any]:
    with fake_app_served(tokens=tokens, gap_ms=gap_ms, workers=workers) as (base, pid):
        # One stream first, so that start-up work (imports, first-request caches) is not
        # counted against the events.
        asyncio.run(_drive(base, 1))
        cpu_before = _cpu_seconds(pid)
        started = time.perf_counter()
        outcomes = asyncio.run(_drive(base, streams))
        seconds = time.perf_counter() - started
        cpu = _cpu_seconds(pid) - cpu_before
    finished = [o for o in outcomes if isinstance(o, dict)]
    gaps = [gap for o in finished for gap in o["gaps"]]
    events = sum(o["events"] for o in finished)

    return {
        "streams": streams,
        "tokens": tokens,
        "gap_ms_model": gap_ms,
        "completed": sum(o["completed"] for o in finished),
        "errors": len(outcomes) - len(finished),
        "first_error": next((repr(o)[:200] for o in outcomes if not isinstance(o, dict)), None),
        "mixed": sum(not o["own"] for o in finished),
        "gap_p50_ms": round(percentile(gaps, 0.5), 2),
        "gap_p99_ms": round(percentile(gaps, 0.99), 2),
        "seconds": round(seconds, 2),
        "workers": workers,
        "events": events,
        # The server's own CPU time per event it sent, the client's not counted; and the
        # events per second its two cores could carry at that cost.
        "cpu_us_per_event": round(cpu / events * 1e6, 1) if events else None,
        "saturation_events_per_s": round(events / cpu * min(workers, os.cpu_count() or 1))
        if cpu
        else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--gap-ms", type=float, default=2.0)
    parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    args = parser.parse_args(argv)
    for streams in args.streams:
        found = bench_serving(streams, tokens=args.tokens, gap_ms=args.gap_ms, workers=args.workers)
        print(json.dumps(found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
