"""Worst-case inputs for the citation finalizer, timed against ordinary text of the same size.

    .venv/bin/python tests/benchmarks/finalizer_worst_cases.py [--kb 100]

Baseline: strip + finalize on prose with one in-range marker every ~60 characters. Each row
is one adversarial shape of the same size; the ratio says how much slower it is.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from pipelines.citations.finalize import finalize_citations, strip_out_of_range_markers

SOURCES = list(range(4))


def _time(text: str, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        finalize_citations(strip_out_of_range_markers(text, len(SOURCES)), SOURCES)
        best = min(best, time.perf_counter() - started)
    return best


def _fill(unit: str, size: int) -> str:
    return unit * (size // len(unit))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kb", type=int, default=100, help="size of each input in KB")
    size = parser.parse_args().kb * 1000
    shapes: dict[str, Callable[[int], str]] = {
        "baseline: prose, marker every ~60 chars": lambda n: _fill(
            "ABCA1 exports cholesterol to HDL [2]. ", n
        ),
        "out-of-range markers at line starts": lambda n: _fill("[9] ", n),
        "out-of-range markers alone on lines": lambda n: _fill("[9]\n", n),
        "one long line of markers": lambda n: _fill("[1][2][9]", n),
        "backticks only": lambda n: "`" * n,
        "alternating backtick runs": lambda n: _fill("` `` ``` ", n),
        "unclosed brackets": lambda n: "[" * n,
        "huge numbers": lambda n: _fill("[" + "9" * 40 + "] ", n),
        "nested brackets, 1/20 of the size": lambda n: "[" * (n // 60) + "9]" * (n // 60),
    }
    baseline = None
    print(f"{'input (' + str(size // 1000) + ' KB)':<45}{'seconds':>10}{'x baseline':>12}")
    for name, make in shapes.items():
        text = make(size)
        seconds = _time(text)
        baseline = baseline or seconds
        print(f"{name:<45}{seconds:>10.3f}{seconds / baseline:>12.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
