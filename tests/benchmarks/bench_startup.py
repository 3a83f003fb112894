"""How long the command line takes to start: whole processes, beside ``python -c pass``.

    .venv/bin/python -m tests.benchmarks.bench_startup [--runs N] [--before DIR]

Each round runs, one after the other, ``python -c pass`` (the interpreter alone, the
baseline), ``reactome-answers --help`` and ``reactome-answers logs list`` over a home with a
few recorded logs; the rounds repeat ``--runs`` times so that all of them see the same load on
the machine. The command line runs as ``python -m app`` from the source tree, as the installed
command does. ``--before DIR`` times another checkout of the project (``git worktree add DIR
COMMIT``) beside this one, in the same rounds. Prints the median wall time of each, its ratio
to the baseline, and the peak memory (max RSS) of each; writes results/startup.json.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.benchmarks._common import table, write_results

ROOT = Path(__file__).resolve().parents[2]


def _log_home(home: Path) -> None:
    """A home with a few refused answers' logs, written as a request writes them."""
    from callbacks.log_header import LogHeader
    from tests.support.logs import refused_log

    for n in range(5):
        question = f"Should I take more statins? ({n})"
        refused_log(home / "logs", LogHeader(request_id=f"bench-{n}", question=question))


def _environment(home: Path) -> dict[str, str]:
    """What every timed process sees: the home with the logs, and no other settings."""
    return {"REACTOME_ANSWERS_HOME": str(home), "PATH": "/usr/bin:/bin"}


def _run(argv: list[str], env_home: Path, tree: Path) -> float:
    """Wall seconds."""
    start = time.perf_counter()
    completed = subprocess.run(
        argv,
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
        env=_environment(env_home),
    )
    elapsed = time.perf_counter() - start
    if completed.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {completed.stderr.strip()}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="rounds (default 15)")
    parser.add_argument(
        "--before", type=Path, metavar="DIR", help="another checkout to time beside this one"
    )
    args = parser.parse_args(argv)
    trees = {"": ROOT} | ({"before: ": args.before.resolve()} if args.before else {})
    commands: dict[str, tuple[list[str], Path]] = {
        "python -c pass": ([sys.executable, "-c", "pass"], ROOT)
    }
    for label, tree in trees.items():
        app = [sys.executable, "-m", "app"]
        commands[f"{label}reactome-answers --help"] = ([*app, "--help"], tree)
        commands[f"{label}reactome-answers logs list"] = ([*app, "logs", "list"], tree)
    times: dict[str, list[float]] = {name: [] for name in commands}
    memory: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        home = Path(tmp)
        _log_home(home)
        # Peak memory of each command alone, as a child of a fresh interpreter: a process's
        # children's max RSS only grows.
        for name, (command, tree) in commands.items():
            memory[name] = _peak_kb(command, home, tree)
        for _ in range(args.runs):
            for name, (command, tree) in commands.items():
                times[name].append(_run(command, home, tree))
    baseline = statistics.median(times["python -c pass"])
    rows = []
    results = {}
    for name in commands:
        median = statistics.median(times[name])
        rows.append([name, median * 1000, median / baseline, memory[name] / 1024])
        results[name] = {
            "median_ms": round(median * 1000, 1),
            "ratio": round(median / baseline, 2),
            "max_rss_mb": round(memory[name] / 1024, 1),
        }
    print(table(["command", "median ms", "x python -c pass", "max RSS MB"], rows))
    path = write_results("startup", {"runs": args.runs, "commands": results})
    print(f"wrote {path}")
    return 0


def _peak_kb(command: list[str], home: Path, tree: Path) -> int:
    script = (
        "import resource, subprocess, sys;"
        "subprocess.run(sys.argv[1:], capture_output=True, check=True);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script, *command],
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
        env=_environment(home),
    )
    return int(completed.stdout.strip())


if __name__ == "__main__":
    sys.exit(main())
