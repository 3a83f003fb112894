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
import multiprocessing
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from tests.benchmarks._common import percentile
from tests.support.servers import free_port, wait_until_serving

_QUESTION = "question number {i}"


def _serve(port: int, tokens: int, gap_ms: float, home: str) -> None:
    import uvicorn
    from langchain_core.documents import Document
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableLambda

    from app.server import create_app
    from pipelines.pipeline import AnswerPipeline
    from pipelines.settings import load_settings
    from tests.support.fakes import ScriptedStream

    def paced(messages: Sequence[BaseMessage]) -> list[str]:
        """Names the question it answers and cites [1], in ``tokens`` tokens."""
        marker = str(messages[-1].content).rsplit("question number ", 1)[-1].split()[0]
        return [f"Q{marker} ", "[1] ", *(["w "] * (tokens - 2))][:tokens]

    def retrieve(question: str) -> list[Document]:
        number = question.rsplit(" ", 1)[-1]
        metadata = {"st_id": f"R-HSA-{1000 + int(number)}", "display_name": question,
                    "collection": "reactome", "citable": True}  # fmt: skip
        return [Document(page_content=f"Facts for {question}.", metadata=metadata)]

    settings = load_settings(home=home, event_logs=False, request_timeout_s=600)
    pipeline = AnswerPipeline(
        settings,
        answer_model=ScriptedStream(script=paced, delay_s=gap_ms / 1000),
        expander_model=ScriptedStream(script=lambda _: ["{}"]),
        retriever=RunnableLambda(retrieve),
    )
    uvicorn.run(create_app(settings, pipeline=pipeline), host="127.0.0.1", port=port,
                log_level="warning", backlog=4096)  # fmt: skip


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
    return {"completed": done.get("data", {}).get("state") == "answered", "own": own, "gaps": gaps}


async def _drive(base: str, streams: int) -> list[dict[str, Any] | BaseException]:
    limits = httpx.Limits(max_connections=streams, max_keepalive_connections=streams)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        return await asyncio.gather(
            *(_one(client, base, i) for i in range(streams)), return_exceptions=True
        )


@contextmanager
def fake_app_served(*, tokens: int, gap_ms: float) -> Iterator[tuple[str, int]]:
    """The app with the fake model and retriever in its own process: (base url, pid)."""
    port = free_port()
    with tempfile.TemporaryDirectory() as home:
        process = multiprocessing.get_context("spawn").Process(
            target=_serve, args=(port, tokens, gap_ms, home), daemon=True
        )
        process.start()
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until_serving(f"{base}/docs", process.is_alive)
            assert process.pid is not None
            yield base, process.pid
        finally:
            process.terminate()
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join(timeout=10)


def bench_serving(streams: int, *, tokens: int = 300, gap_ms: float = 2.0) -> dict[str, Any]:
    with fake_app_served(tokens=tokens, gap_ms=gap_ms) as (base, _):
        started = time.perf_counter()
        outcomes = asyncio.run(_drive(base, streams))
        seconds = time.perf_counter() - started
    finished = [o for o in outcomes if isinstance(o, dict)]
    gaps = [gap for o in finished for gap in o["gaps"]]

    return {
        "streams": streams,
        "tokens": tokens,
        "gap_ms_model": gap_ms,
        "completed": sum(o["completed"] for o in finished),
        "errors": len(outcomes) - len(finished),
        "mixed": sum(not o["own"] for o in finished),
        "gap_p50_ms": round(percentile(gaps, 0.5), 2),
        "gap_p99_ms": round(percentile(gaps, 0.99), 2),
        "seconds": round(seconds, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--gap-ms", type=float, default=2.0)
    args = parser.parse_args(argv)
    for streams in args.streams:
        print(json.dumps(bench_serving(streams, tokens=args.tokens, gap_ms=args.gap_ms)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
