"""``reactome-answers logs``: list, show, view, measure, re-ask, export (as OpenTelemetry
traces) and prune the recorded event logs; the home of every look into what happened in one
answer (``replay`` keeps its older spellings of two of them, :mod:`app.cli.commands.replay`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.cli.log_selection import add_selection_arguments, find_log, selected_log_paths
from callbacks.events import to_jsonl
from callbacks.feedback import RATINGS, read_feedback
from callbacks.log import list_log_files, prune_configured_logs, read_log
from callbacks.log_summary import answered_by, log_stats, stats_lines, summarize, summary_lines
from callbacks.log_view import trace_link
from pipelines.core.errors import EventLogError, InputError
from pipelines.core.settings import Settings

__all__ = ["CANDIDATES_HELP", "SUMMARY", "add_arguments", "print_candidates", "run"]

SUMMARY = "list, show, view, measure, re-ask, export and prune the recorded event logs"

CANDIDATES_HELP = (
    "print the candidates the retriever considered, as a table (ranks, scores, and kept with "
    "its number or why each was dropped), instead of the events"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from app.cli.commands.rerun import add_rerun_action

    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="list recorded requests, newest first")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.add_argument(
        "--feedback", choices=RATINGS, help="only answers users rated so (up or down)"
    )
    show = actions.add_parser("show", help="print one log's events as JSON lines")
    show.add_argument("log", help="a log file, or a request id")
    show.add_argument("--candidates", action="store_true", help=CANDIDATES_HELP)
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
    export = actions.add_parser(
        "export",
        help="turn recorded logs into OpenTelemetry traces: sent to the collector the "
        "OTEL_EXPORTER_OTLP_* variables name, or written as OTLP JSON lines",
        description="Each log becomes the spans its live answer made (docs/operations.md), "
        "with the recorded times: sent to the collector OTEL_EXPORTER_OTLP_ENDPOINT (or "
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) names, or with --output written to FILE as OTLP "
        "JSON lines, one line per log, which a collector's otlpjsonfile receiver reads. A log "
        "of a traced answer lands in its own trace; the others get ids from their request id, "
        "so exporting twice sends the same spans. Without LOG, the logs --last, --since and "
        "--state select (all by default).",
    )
    export.add_argument(
        "--otlp",
        action="store_true",
        required=True,
        help="as OpenTelemetry spans (OTLP), the one format there is",
    )
    export.add_argument("logs", nargs="*", metavar="LOG", help="log files or request ids")
    add_selection_arguments(export)
    export.add_argument(
        "--output",
        type=Path,
        metavar="FILE",
        help="append OTLP JSON lines to FILE ('-': standard output) instead of sending them",
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
    add_rerun_action(actions)


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


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.action == "path":
        print(settings.logs_dir)
        return 0
    if args.action == "prune":
        return _prune(args, settings)
    if args.action == "rerun":
        from app.cli.commands.rerun import run_rerun

        return run_rerun(args, settings)
    if args.action == "view":
        from app.http.routes.log_page import write_log_page

        print(write_log_page(find_log(settings, args.log), args.output, settings.trace_url))
        return 0
    if args.action == "list":
        return _list(args, settings)
    if args.action == "export":
        return _export(args, settings)
    if args.action == "stats" and args.log is None:
        return _stats_of_many(args, settings)
    if args.action == "stats" and (args.last or args.since or args.state or args.plot):
        raise InputError(
            "--last, --since, --state and --plot are for many logs",
            fix="leave out the log to summarize a selection, or the options to see one log",
        )
    path = find_log(settings, args.log)
    if args.action == "show" and args.candidates:
        print_candidates(path)
        return 0
    contents = read_log(path)
    if args.action == "show":
        for event in contents.events:
            sys.stdout.write(to_jsonl(event))
        link = trace_link(contents.header.trace_id, settings.trace_url)
        if link is not None:  # beside the events, not among them: stdout stays JSON lines
            print(f"reactome-answers: its trace: {link}", file=sys.stderr)
        return 0
    stats = {**log_stats(contents), "feedback": read_feedback(path)}
    if args.json:
        print(json.dumps(stats, indent=2))
    else:
        print("\n".join(stats_lines(stats, answered_by(contents.header))))
    return 0


def print_candidates(path: Path) -> None:
    """``logs show LOG --candidates``: the retriever's candidates of one log, as a table."""
    from app.cli.terminal.candidates import candidates_text

    print(candidates_text(read_log(path)))


def _list(args: argparse.Namespace, settings: Settings) -> int:
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


def _export(args: argparse.Namespace, settings: Settings) -> int:
    from callbacks.tracing.log_export import export_logs
    from callbacks.tracing.settings import TraceSettings

    if args.logs and (args.last or args.since):
        raise InputError(
            "--last and --since select logs; LOG names them",
            fix="give either log names or the selection, not both",
        )
    paths = [find_log(settings, log) for log in args.logs] or selected_log_paths(
        args, settings.logs_dir
    )
    options: dict[str, Any] = {"content": settings.trace_content, "state": args.state}
    if args.output is not None:
        if str(args.output) == "-":
            summary = export_logs(paths, output=sys.stdout, **options)
            where = "standard output"
        else:
            try:
                with args.output.open("a", encoding="utf-8") as stream:
                    summary = export_logs(paths, output=stream, **options)
            except OSError as error:
                raise InputError(
                    f"cannot write {args.output} ({error.strerror or error})",
                    fix="give a file in a folder you can write to",
                ) from None
            where = str(args.output)
    else:
        traced = TraceSettings.from_environ()
        if traced is None:
            raise InputError(
                "no collector to send the spans to",
                fix="set OTEL_EXPORTER_OTLP_ENDPOINT (http://127.0.0.1:4318, say), or write "
                "them to a file with --output FILE",
            )
        from callbacks.tracing.otlp import make_exporter

        exporter = make_exporter(traced)
        try:
            summary = export_logs(paths, exporter=exporter, where=traced.endpoint, **options)
        finally:
            exporter.shutdown()
        where = traced.endpoint
    for path, why in summary.skipped:
        print(f"reactome-answers: skipped {path}: {why}", file=sys.stderr)
    logs = "1 log" if summary.logs == 1 else f"{summary.logs} logs"
    print(f"reactome-answers: exported {logs} ({summary.spans} spans) to {where}", file=sys.stderr)
    return 1 if summary.skipped else 0


def _prune(args: argparse.Namespace, settings: Settings) -> int:
    deleted = prune_configured_logs(
        settings, keep_days=args.older_than, keep_count=args.keep, dry_run=args.dry_run
    )
    for path in deleted:
        print(path)
    verb = "would delete" if args.dry_run else "deleted"
    print(f"{verb} {len(deleted)} log(s) from {settings.logs_dir}", file=sys.stderr)
    return 0
