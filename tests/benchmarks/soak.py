"""Soak: the concurrency scenario, round after round, watching the server's memory.

    .venv/bin/python -m tests.benchmarks.soak [--minutes 3] [--streams 200] [--max-rounds 50]

The app runs under uvicorn in its own process on 127.0.0.1 (loopback only), with the fake
model and instant retriever of ``bench_serving``. Each round sends ``--streams`` concurrent
SSE requests and checks every stream against its own request (request_id, seq 1..n, its own
question's source and marker). Rounds stop after ``--minutes`` or ``--max-rounds``, whichever
comes first. Prints the server's resident memory after each round and its growth from the
end of the first round (the warm-up) to the last, in MB and per thousand requests; it
reports, it does not judge.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from tests.benchmarks.bench_serving import _drive, fake_app_served


def resident_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def soak(
    *, minutes: float, streams: int, max_rounds: int, tokens: int, gap_ms: float
) -> dict[str, Any]:
    rounds: list[dict[str, Any]] = []
    with fake_app_served(tokens=tokens, gap_ms=gap_ms) as (base, pid):
        deadline = time.monotonic() + minutes * 60
        while len(rounds) < max_rounds and (not rounds or time.monotonic() < deadline):
            started = time.perf_counter()
            outcomes = asyncio.run(_drive(base, streams))
            finished = [o for o in outcomes if isinstance(o, dict)]
            rounds.append(
                {
                    "round": len(rounds) + 1,
                    "seconds": round(time.perf_counter() - started, 2),
                    "completed": sum(o["completed"] for o in finished),
                    "errors": len(outcomes) - len(finished),
                    "mixed": sum(not o["own"] for o in finished),
                    "rss_mb": round(resident_mb(pid), 1),
                }
            )
            print(json.dumps(rounds[-1]), flush=True)
    first, last = rounds[0], rounds[-1]
    requests_after_warmup = streams * (len(rounds) - 1)
    growth = last["rss_mb"] - first["rss_mb"]
    return {
        "rounds": len(rounds),
        "requests": streams * len(rounds),
        "completed": sum(r["completed"] for r in rounds),
        "errors": sum(r["errors"] for r in rounds),
        "mixed": sum(r["mixed"] for r in rounds),
        "rss_after_warmup_mb": first["rss_mb"],
        "rss_last_mb": last["rss_mb"],
        "growth_mb": round(growth, 1),
        "growth_mb_per_1000_requests": (
            round(growth / requests_after_warmup * 1000, 2) if requests_after_warmup else None
        ),
    }


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is below 1")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=_positive, default=3.0, help="time limit (default 3)")
    parser.add_argument(
        "--streams", type=_at_least_one, default=200, help="concurrent streams per round"
    )
    parser.add_argument(
        "--max-rounds", type=_at_least_one, default=50, help="round limit (default 50)"
    )
    parser.add_argument("--tokens", type=_at_least_one, default=100, help="tokens per answer")
    parser.add_argument(
        "--gap-ms", type=float, default=2.0, help="model delay between tokens (default 2)"
    )
    args = parser.parse_args(argv)
    summary = soak(
        minutes=args.minutes,
        streams=args.streams,
        max_rounds=args.max_rounds,
        tokens=args.tokens,
        gap_ms=args.gap_ms,
    )
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
