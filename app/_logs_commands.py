"""The ``logs`` and ``replay`` commands: look into what happened in one answer."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from callbacks.events import CitationEvent, DoneEvent, ErrorEvent, TokenEvent, to_jsonl
from callbacks.log import LogContents, read_log
from pipelines.errors import EventLogError
from pipelines.settings import Settings

__all__ = ["add_logs_arguments", "add_replay_arguments", "cmd_logs", "cmd_replay", "log_stats"]


def add_logs_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="list recorded requests, newest first")
    listing.add_argument("--json", action="store_true", help="print JSON")
    show = actions.add_parser("show", help="print one log's events as JSON lines")
    show.add_argument("log", help="a log file, or a request id")
    actions.add_parser("path", help="print the folder the logs are written to")
    stats = actions.add_parser("stats", help="state, timings, counts and the citation gate")
    stats.add_argument("log", help="a log file, or a request id")
    stats.add_argument("--json", action="store_true", help="print JSON")


def add_replay_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("log", help="a log file, or a request id")
    parser.add_argument(
        "--check",
        action="store_true",
        help="drive a fresh handler from the recorded callbacks and diff its events against "
        "the recorded ones (timing ignored); exit 1 on any difference",
    )
    parser.add_argument("--jsonl", action="store_true", help="print events as JSON lines")
    pace = parser.add_mutually_exclusive_group()
    pace.add_argument(
        "--speed", type=float, default=1.0, help="replay at this many times real time"
    )
    pace.add_argument("--instant", action="store_true", help="no waiting between events")


def _find(settings: Settings, log: str) -> Path:
    path = Path(log)
    if path.is_file():
        return path
    matches = sorted(settings.logs_dir.glob(f"*-{log}.jsonl"))
    if not matches:
        raise EventLogError(
            f"no log file {log} and no request {log!r} in {settings.logs_dir}",
            fix="see 'reactome-answers logs list'",
        )
    return matches[-1]


def log_stats(contents: LogContents) -> dict[str, Any]:
    events = contents.events
    done = next((e for e in events if isinstance(e, DoneEvent)), None)
    citations = [e for e in events if isinstance(e, CitationEvent)]
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    return {
        "request_id": contents.header.get("request_id"),
        "question": contents.header.get("question"),
        "state": done.data.state if done else None,
        "first_token_ms": done.data.timings.first_token_ms if done else None,
        "total_ms": done.data.timings.total_ms if done else None,
        "token_events": len(tokens),
        "answer_tokens": done.data.usage.answer_tokens if done else None,
        "citations_early": len(citations),
        "citations_final": len(done.data.references) if done else None,
        "last_citation_seq": citations[-1].seq if citations else None,
        "first_token_seq": tokens[0].seq if tokens else None,
        "errors": [e.data.message for e in events if isinstance(e, ErrorEvent)],
    }


def cmd_logs(args: argparse.Namespace, settings: Settings) -> int:
    if args.action == "path":
        print(settings.logs_dir)
        return 0
    if args.action == "list":
        rows = []
        for path in sorted(settings.logs_dir.glob("*.jsonl"), reverse=True):
            try:
                stats = log_stats(read_log(path))
            except EventLogError as error:
                stats = {"error": str(error)}
            rows.append({"file": str(path), **stats})
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            for row in rows:
                print(f"{Path(row['file']).name}  {row.get('state') or row.get('error')}  "
                      f"{row.get('question', '')!s:.70}")  # fmt: skip
        return 0
    contents = read_log(_find(settings, args.log))
    if args.action == "show":
        for event in contents.events:
            sys.stdout.write(to_jsonl(event))
        return 0
    stats = log_stats(contents)
    if args.json:
        print(json.dumps(stats, indent=2))
    else:
        for key, value in stats.items():
            print(f"{key:>18}: {value}")
    return 0


def cmd_replay(args: argparse.Namespace, settings: Settings) -> int:
    path = _find(settings, args.log)
    contents = read_log(path)
    if args.check:
        from callbacks.replay import replay_diff

        diff = replay_diff(contents)
        if diff:
            print("\n".join(diff))
            print(f"{path}: the replayed events differ from the recorded ones", file=sys.stderr)
            return 1
        print(f"{path}: {len(contents.events)} events replayed identically")
        return 0
    previous = 0.0
    for event in contents.events:
        if not args.instant and args.speed > 0:
            time.sleep(max(event.t_ms - previous, 0) / 1000 / args.speed)
        previous = event.t_ms
        if args.jsonl:
            sys.stdout.write(to_jsonl(event))
        elif isinstance(event, TokenEvent):
            sys.stdout.write(event.data.text)
        elif isinstance(event, DoneEvent):
            print(f"\n[done: {event.data.state}, {len(event.data.references)} references]")
        else:
            print(f"[{event.type}] {event.data.model_dump_json()}")
        sys.stdout.flush()
    return 0
