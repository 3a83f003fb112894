"""The ``logs`` and ``replay`` commands: look into what happened in one answer."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.cli.options import port_number
from callbacks.events import (
    DoneEvent,
    ErrorEvent,
    Event,
    Reference,
    ReferenceEvent,
    TokenEvent,
    to_jsonl,
)
from callbacks.feedback import RATINGS, read_feedback
from callbacks.log import (
    LogContents,
    find_request_logs,
    list_log_files,
    prune_configured_logs,
    read_log,
)
from callbacks.log_records import mapping, model_input, model_raw_text, searched_queries
from callbacks.log_summary import answered_by, log_stats, stats_lines, summarize, summary_lines
from pipelines.core.errors import EventLogError, InputError
from pipelines.core.settings import Settings

__all__ = ["add_logs_arguments", "add_replay_arguments", "cmd_logs", "cmd_replay", "log_stats"]


def add_logs_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="list recorded requests, newest first")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.add_argument(
        "--feedback", choices=RATINGS, help="only answers users rated so (up or down)"
    )
    show = actions.add_parser("show", help="print one log's events as JSON lines")
    show.add_argument("log", help="a log file, or a request id")
    show.add_argument(
        "--candidates",
        action="store_true",
        help="print the candidates the retriever considered, as a table (ranks, scores, and "
        "kept with its number or why each was dropped), instead of the events",
    )
    actions.add_parser("path", help="print the folder the logs are written to")
    view = actions.add_parser(
        "view",
        help="write one answer's log page (question, timeline, candidates, answer, model "
        "input, timings, feedback) as one self-contained HTML file, and print its path",
    )
    view.add_argument("log", help="a log file, or a request id")
    view.add_argument(
        "--output", type=Path, metavar="FILE", help="where (default: log-<request id>.html here)"
    )
    stats = actions.add_parser(
        "stats",
        help="state, timings, counts and the citation gate: of one log, or summed over many",
        description="With a log: its state, timings, counts and citation gate. Without one: a "
        "summary of the selected logs (all by default): states, in how many answers with "
        "both the citations came before the first token, first-token time p50/p90/p99 by "
        "state and by number of citations, refusals by rule, references per answered answer, "
        "hold-back.",
    )
    stats.add_argument("log", nargs="?", help="a log file, or a request id (omit: many logs)")
    stats.add_argument("--json", action="store_true", help="print JSON")
    add_selection_arguments(stats)
    stats.add_argument(
        "--plot",
        type=Path,
        metavar="FILE.png",
        help="also draw first-token time against the number of references, one dot per "
        "answer (needs matplotlib)",
    )
    prune = actions.add_parser(
        "prune",
        help="delete old logs now (requests also prune, about once a minute, by the settings)",
    )
    prune.add_argument(
        "--older-than",
        type=_at_least_zero(float),
        metavar="DAYS",
        help="delete logs older than this many days (default: REACTOME_ANSWERS_LOG_RETENTION_DAYS"
        ", 0 keeps them)",
    )
    prune.add_argument(
        "--keep",
        type=_at_least_zero(int),
        metavar="N",
        help="keep only the newest N logs (default: REACTOME_ANSWERS_LOG_RETENTION_COUNT, 0 "
        "keeps all)",
    )
    prune.add_argument("--dry-run", action="store_true", help="list what would be deleted")
    from app.cli.commands.rerun import add_logs_rerun_parser  # it uses the selection below

    add_logs_rerun_parser(actions)


def add_selection_arguments(parser: argparse.ArgumentParser) -> None:
    """--last, --since and --state: which logs an action over many reads (all by default)."""
    parser.add_argument("--last", type=_positive_int, metavar="N", help="only the newest N logs")
    parser.add_argument(
        "--since",
        type=_date_or_time,
        metavar="DATE",
        help="only logs written at or after DATE (2026-12-03 or 2026-12-03T14:00, UTC)",
    )
    parser.add_argument(
        "--state",
        choices=["answered", "nothing_found", "refused", "failed", "incomplete"],
        help="only answers that ended in this state",
    )


def selected_log_paths(args: argparse.Namespace, folder: Path) -> list[Path]:
    """The logs in ``folder`` that --since and --last select, newest first (--state needs
    each log read: the caller filters by it)."""
    paths = list_log_files(folder)  # newest first: names start with the time
    if args.since is not None:
        stamp = args.since.strftime("%Y%m%dT%H%M%S")
        paths = [path for path in paths if path.name[: len(stamp)] >= stamp]
    if args.last is not None:
        paths = paths[: args.last]
    return paths


def add_replay_arguments(parser: argparse.ArgumentParser) -> None:
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
        help="print the candidates the retriever considered, as a table (ranks, scores, and "
        "kept with its number or why each was dropped), instead of replaying the answer",
    )
    from app.cli.commands.rerun import REPLAY_RERUN_HELP

    mode.add_argument("--rerun", action="store_true", help=REPLAY_RERUN_HELP)
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


def _at_least_zero(kind: type[float] | type[int]) -> Callable[[str], float]:
    def parse(value: str) -> float:
        try:
            number = kind(value)
        except ValueError:
            number = -1
        if not 0 <= number < float("inf"):
            raise argparse.ArgumentTypeError(f"{value!r}: give a number, 0 or more (0: no limit)")
        return number

    return parse


_SPEEDS = (0.001, 1_000_000.0)


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


def _find(settings: Settings, log: str) -> Path:
    """A log by path, by the file name ``logs list`` prints, or by request id; all taken
    literally, never as a pattern."""
    candidates = [Path(log)]
    if Path(log).name == log and log not in ("", ".", ".."):
        candidates.append(settings.logs_dir / log)
    for candidate in candidates:
        try:
            if candidate.exists():
                return candidate  # whether it is a log at all is read_log's to say
        except OSError:  # a name too long for the system cannot name a file either
            continue
    matches = find_request_logs(settings.logs_dir, log)
    if not matches:
        shown = log if len(log) <= 80 else log[:79] + "…"
        raise EventLogError(
            f"no log file {shown!r} and no request {shown!r} in {settings.logs_dir}",
            fix="see 'reactome-answers logs list'",
        )
    return matches[-1]


def cmd_logs(args: argparse.Namespace, settings: Settings) -> int:
    if args.action == "path":
        print(settings.logs_dir)
        return 0
    if args.action == "prune":
        return _prune(args, settings)
    if args.action == "rerun":
        from app.cli.commands.rerun import cmd_logs_rerun

        return cmd_logs_rerun(args, settings)
    if args.action == "view":
        from app.http.routes.log_page import write_log_page

        print(write_log_page(_find(settings, args.log), args.output))
        return 0
    if args.action == "list":
        rows = []
        for path in list_log_files(settings.logs_dir):
            feedback = read_feedback(path)
            if args.feedback and (feedback or {}).get("rating") != args.feedback:
                continue  # the sidecar is read before the log: a selection costs little
            rows.append({"file": str(path), **_stats_row(path, feedback)})
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            for row in rows:
                print(f"{Path(row['file']).name}  {row.get('state') or row.get('error')}  "
                      f"{row.get('question', '')!s:.70}")  # fmt: skip
        return 0
    if args.action == "stats" and args.log is None:
        return _stats_of_many(args, settings)
    if args.action == "stats" and (args.last or args.since or args.state or args.plot):
        raise InputError(
            "--last, --since, --state and --plot are for many logs",
            fix="leave out the log to summarize a selection, or the options to see one log",
        )
    path = _find(settings, args.log)
    contents = read_log(path)
    if args.action == "show" and args.candidates:
        from app.cli.terminal.candidates import candidates_text

        print(candidates_text(contents))
        return 0
    if args.action == "show":
        for event in contents.events:
            sys.stdout.write(to_jsonl(event))
        return 0
    stats = {**log_stats(contents), "feedback": read_feedback(path)}
    if args.json:
        print(json.dumps(stats, indent=2))
    else:
        print("\n".join(stats_lines(stats, answered_by(contents.header))))
    return 0


def _stats_row(path: Path, feedback: dict[str, Any] | None) -> dict[str, Any]:
    """One log's stats row with its feedback; an unreadable log is a row saying why."""
    try:
        stats = log_stats(read_log(path, callbacks=False))
    except EventLogError as error:
        stats = {"file": str(path), "error": str(error)}
    return {**stats, "feedback": feedback}


def _stats_of_many(args: argparse.Namespace, settings: Settings) -> int:
    paths = selected_log_paths(args, settings.logs_dir)
    rows = [_stats_row(path, read_feedback(path)) for path in paths]
    if args.state is not None:
        rows = [row for row in rows if row.get("state") == args.state]
    summary = summarize(rows)
    if args.plot is not None:
        from app.cli.terminal.plot import plot_first_token_by_references

        drawn = plot_first_token_by_references(rows, args.plot)
        print(f"reactome-answers: plotted {drawn} answers to {args.plot}", file=sys.stderr)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print("\n".join(summary_lines(summary)))
    return 0


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of 1 or more")
    return number


def _date_or_time(value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a date or time like 2026-12-03 or 2026-12-03T14:00"
        ) from None
    return moment if moment.tzinfo is None else moment.astimezone(UTC).replace(tzinfo=None)


def _prune(args: argparse.Namespace, settings: Settings) -> int:
    deleted = prune_configured_logs(
        settings, keep_days=args.older_than, keep_count=args.keep, dry_run=args.dry_run
    )
    for path in deleted:
        print(path)
    verb = "would delete" if args.dry_run else "deleted"
    print(f"{verb} {len(deleted)} log(s) from {settings.logs_dir}", file=sys.stderr)
    return 0


def cmd_replay(args: argparse.Namespace, settings: Settings) -> int:
    if args.rerun:
        from app.cli.commands.rerun import cmd_replay_rerun

        return cmd_replay_rerun(args, settings)
    path = _find(settings, args.log)
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
    if args.model_input:
        _print_model_input(contents)
        return 0
    if args.candidates:
        from app.cli.terminal.candidates import candidates_text

        print(candidates_text(contents))
        return 0
    from callbacks.replay import paced

    speed = None if args.instant else args.speed
    if args.serve is not None:
        return _serve_replay(contents, path, args, settings, speed)
    if args.jsonl:
        for pause, event in paced(contents.events, speed):
            time.sleep(pause)
            sys.stdout.write(to_jsonl(event))
            sys.stdout.flush()
        return 0
    _print_what_the_model_saw(contents)
    _print_replay_text(paced(contents.events, speed))
    return 0


def _print_replay_text(events: Iterable[tuple[float, Event]]) -> None:
    """The events as a person reads them: the answer's tokens as running text, every other
    event on a line of its own. A ``reference`` event (live numbering) arrives right before
    the token that first cites it; printed there it would cut the sentence in two, so the
    references are held until the text ends, and then listed."""
    in_text = False  # the last thing printed was answer text, with no newline after it
    held: list[ReferenceEvent] = []

    def line(text: str) -> None:
        nonlocal in_text
        if in_text:
            sys.stdout.write("\n")
            in_text = False
        print(text)

    for pause, event in events:
        time.sleep(pause)
        if isinstance(event, TokenEvent):
            sys.stdout.write(event.data.text)
            in_text = in_text or bool(event.data.text)
        elif isinstance(event, ReferenceEvent):
            held.append(event)
        else:
            for reference in held:
                line(f"[reference] {_reference_text(reference.data)}")
            held.clear()
            if isinstance(event, DoneEvent):
                count = len(event.data.references)
                line(f"[done: {event.data.state}, {count} reference{'s' if count != 1 else ''}]")
            elif isinstance(event, ErrorEvent):
                line(f"[error] {event.data.code}: {event.data.message}")
            else:
                line(f"[{event.type}] {event.data.model_dump_json()}")
        sys.stdout.flush()
    for reference in held:  # a log cut off before its done
        line(f"[reference] {_reference_text(reference.data)}")
    if in_text:
        sys.stdout.write("\n")


def _reference_text(reference: Reference) -> str:
    """``[1] Deregulated CDK5 in AD (R-HSA-8862803, citation 2)``: its marker in the answer,
    its name, what it points at and the citation event it came from."""
    return (
        f"[{reference.n}] {reference.display_name} "
        f"({reference.st_id or reference.url}, citation {reference.source_n})"
    )


def _print_model_input(contents: LogContents) -> None:
    messages = model_input(contents)
    if messages is None:
        print(
            "the answer model was not asked (a refusal, nothing found, or a failure before "
            "it), or the log was written before its input was recorded"
        )
        return
    for message in messages:
        print(f"----- {message['role']} -----")
        print(message["content"])
    print("----- the model's raw text, before its markers were finalized -----")
    print(model_raw_text(contents) or "")


def _print_what_the_model_saw(contents: LogContents) -> None:
    """The conversation before the question and what the retriever searched for: what the
    expander and the model saw besides the sources, which the events show."""
    history = contents.header.get("history")
    for turn in history if isinstance(history, list) else []:
        turn = mapping(turn)
        print(f"[history] {turn.get('role')}: {turn.get('content')}")
    queries = searched_queries(contents)
    if queries:
        print(f"[searched for] {queries[0]}")


def _serve_replay(
    contents: LogContents, path: Path, args: argparse.Namespace, settings: Settings,
    speed: float | None,
) -> int:  # fmt: skip
    from app.http.middleware.transport import run
    from app.http.replay_app import create_replay_app
    from app.http.settings import load_server_settings
    from callbacks.log_view import log_view

    server = load_server_settings()
    view = log_view(contents, feedback=read_feedback(path))
    app = create_replay_app(
        contents.events, speed=speed, settings=settings, server=server, log_view=view
    )
    print(
        f"reactome-answers: replaying {path.name} ({len(contents.events)} events) on "
        f"http://{args.host}:{args.serve}/ (the stream: POST or GET /v1/answer/stream; "
        f"the log page: /logs/{view['request_id']})",
        file=sys.stderr,
    )
    run(app, server, host=args.host, port=args.serve)
    return 0
