"""``reactome-answers replay LOG``: a recorded answer again, as text, as JSON lines, as a
stream a client can read (``--serve``), or checked against a fresh handler (``--check``).

``--candidates`` and ``--rerun`` are older spellings of ``logs show LOG --candidates`` and
``logs rerun LOG``, kept as aliases (their help says so) and run by the same code."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from app.cli.log_selection import find_log
from app.cli.options import port_number
from callbacks.events import to_jsonl
from callbacks.feedback import read_feedback
from callbacks.log import LogContents, read_log
from pipelines.core.settings import Settings

__all__ = ["SUMMARY", "add_arguments", "run"]

SUMMARY = (
    "re-emit a recorded answer; or check it against a fresh handler (--check), or show the "
    "model's input; --candidates and --rerun are aliases of 'logs show --candidates' and "
    "'logs rerun'"
)

_SPEEDS = (0.001, 1_000_000.0)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("log", help="a log file, or a request id")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--check",
        action="store_true",
        help="drive a fresh handler from the recorded callbacks and diff its events against "
        "the recorded ones (timing ignored); exit 1 on any difference",
    )
    mode.add_argument("--jsonl", action="store_true", help="print events as JSON lines")
    mode.add_argument(
        "--candidates",
        action="store_true",
        help="the same as 'logs show LOG --candidates' (an alias): the candidates the "
        "retriever considered, as a table, instead of replaying the answer",
    )
    mode.add_argument(
        "--rerun",
        action="store_true",
        help="the same as 'logs rerun LOG' (an alias): ask the logged question again on the "
        "current home and model and print what changed; exit 0 same, 1 changed, 2 unreadable",
    )
    mode.add_argument(
        "--model-input",
        action="store_true",
        help="print what the answer model was sent (its messages, sources included) and what "
        "it wrote before the markers were finalized, instead of replaying the answer",
    )
    mode.add_argument(
        "--serve",
        type=port_number,
        metavar="PORT",
        help="serve the recorded answer as SSE on this port instead of printing it: every "
        "POST (or GET) to /v1/answer/stream replays it, and the web client at / shows it",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address for --serve (default: %(default)s)"
    )
    pace = parser.add_mutually_exclusive_group()
    pace.add_argument(
        "--speed",
        type=_speed,
        default=1.0,
        help="replay at this many times real time (a recorded gap counts as at most a minute)",
    )
    pace.add_argument("--instant", action="store_true", help="no waiting between events")


def _speed(value: str) -> float:
    try:
        speed = float(value)
    except ValueError:
        speed = 0.0
    if not _SPEEDS[0] <= speed <= _SPEEDS[1]:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a speed; give a positive number from {_SPEEDS[0]:g} to "
            f"{_SPEEDS[1]:,.0f} (2 = twice as fast) or --instant"
        )
    return speed


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.rerun:
        from app.cli.commands.rerun import rerun_one

        return rerun_one(args, settings)
    path = find_log(settings, args.log)
    if args.candidates:
        from app.cli.commands.logs import print_candidates

        print_candidates(path)
        return 0
    contents = read_log(path)
    if args.check:
        from callbacks.replay import compare_replay

        diff, where = compare_replay(contents)
        if diff:
            print("\n".join(diff))
            print(f"{path}: the replayed events differ from the recorded ones, {where}",
                  file=sys.stderr)  # fmt: skip
            return 1
        print(f"{path}: {len(contents.events)} events replayed identically")
        return 0
    from app.cli.terminal.replay_text import (
        print_model_input,
        print_replay_text,
        print_what_the_model_saw,
    )

    if args.model_input:
        print_model_input(contents)
        return 0
    from callbacks.replay import paced

    speed = None if args.instant else args.speed
    if args.serve is not None:
        return _serve(contents, path, args, settings, speed)
    if args.jsonl:
        for pause, event in paced(contents.events, speed):
            time.sleep(pause)
            sys.stdout.write(to_jsonl(event))
            sys.stdout.flush()
        return 0
    print_what_the_model_saw(contents)
    print_replay_text(paced(contents.events, speed))
    return 0


def _serve(
    contents: LogContents, path: Path, args: argparse.Namespace, settings: Settings,
    speed: float | None,
) -> int:  # fmt: skip
    from app.http.middleware.transport import run_server
    from app.http.replay_app import create_replay_app
    from app.http.settings import load_server_settings
    from callbacks.log_view import log_view

    server = load_server_settings()
    view = log_view(contents, feedback=read_feedback(path), trace_url=settings.trace_url)
    app = create_replay_app(
        contents.events, speed=speed, settings=settings, server=server, log_view=view
    )
    print(
        f"reactome-answers: replaying {path.name} ({len(contents.events)} events) on "
        f"http://{args.host}:{args.serve}/ (the stream: POST or GET /v1/answer/stream; "
        f"the log page: /logs/{view['request_id']})",
        file=sys.stderr,
    )
    run_server(app, server, host=args.host, port=args.serve)
    return 0
