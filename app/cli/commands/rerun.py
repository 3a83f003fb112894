"""``logs rerun [LOG]`` (and its alias ``replay --rerun LOG``): ask logged questions again,
say what changed.

Each logged question is asked again with its history, collections and citation options,
against the current home and model (``--home``, ``--chroma-host``, ``--llm`` point it at a new
release or model; the releases the log names are not pinned), and its ``done`` compared with
the recorded one (:mod:`callbacks.rerun_diff`). Exit status: 0 when every state and reference
list is the same, 1 when any differs, 2 when the command cannot start (a usage mistake, or a
log that cannot be found or read). The reruns write no event log unless ``--log`` is given,
so that the next ``logs rerun`` does not rerun the reruns.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.log_selection import add_selection_arguments, find_log, selected_log_paths
from callbacks.events import DoneData, DoneEvent, ErrorEvent, Event, Timings
from callbacks.log import LogContents, read_log
from callbacks.rerun_diff import (
    AnswerChange,
    RecordedRequest,
    compare_answers,
    recorded_request,
    reference_id,
    summarize_reruns,
    summary_line,
)
from pipelines.core.errors import EventLogError, InputError, ReactomeAnswersError
from pipelines.core.redaction import redact_secrets
from pipelines.core.settings import Settings

if TYPE_CHECKING:
    from pipelines.pipeline import AnswerPipeline

__all__ = ["add_rerun_action", "rerun_one", "run_rerun"]

_NOT_LOGGED = (
    "The reruns write no event log (so a later 'logs rerun' does not rerun them); give --log "
    "to keep them."
)
_LOGS_RERUN_DESCRIPTION = (
    "Ask a logged question again (LOG), or each selected one (all logs by default; --last, "
    "--since, --state select as for 'logs stats'), against the current home and model. For "
    "one log: what changed (the state, the references added, removed or moved, a diff of the "
    "text); for many: each log's verdict, then how many answers changed their references and "
    "their state. 'replay LOG --rerun' is an alias of 'logs rerun LOG'. "
    "Point --home or --chroma-host at a new release (and --logs at the recorded traffic, "
    "when it lives elsewhere) to check the release before it goes live. Exit 0 when every "
    "state and reference list is the same, 1 when any differs, 2 for a usage mistake. "
    + _NOT_LOGGED
)


def add_rerun_action(actions: Any) -> None:
    """``logs rerun`` under ``actions``, the ``logs`` command's subparsers."""
    parser = actions.add_parser(
        "rerun",
        help="ask logged questions again on the current release and model: which answers "
        "changed their references or state",
        description=_LOGS_RERUN_DESCRIPTION,
    )
    parser.add_argument(
        "log", nargs="?", help="a log file, or a request id (omit: the selected logs)"
    )
    add_selection_arguments(parser)
    parser.add_argument(
        "--json",
        action="store_true",
        help="print JSON: each log's changes and the counts (progress still goes to stderr)",
    )
    parser.add_argument(
        "--logs",
        type=Path,
        metavar="FOLDER",
        help="the recorded logs to rerun (default: the logs folder of the settings in effect)",
    )


@dataclass(frozen=True)
class Rerun:
    """One log, asked again: what changed, or why it could not be compared."""

    path: Path
    request_id: str | None
    question: str | None
    change: AnswerChange | None = None
    error: str | None = None  # the rerun's own error message, when it failed
    skipped: str | None = None  # why there is nothing to compare

    def as_json(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "file": str(self.path),
            "request_id": self.request_id,
            "question": self.question,
        }
        if self.change is not None:
            row |= self.change.as_json()
        if self.error is not None:
            row["error"] = self.error
        if self.skipped is not None:
            row["skipped"] = self.skipped
        return row


def _usage_error(error: ReactomeAnswersError) -> int:
    """One line, as the CLI prints any error, but exit 2: 1 means "the answers differ"."""
    print(f"reactome-answers: error: {redact_secrets(str(error))}", file=sys.stderr)
    return 2


def _rerun_settings(args: argparse.Namespace, settings: Settings) -> Settings:
    """The settings in effect, with event logs off unless ``--log`` was given here."""
    keep = getattr(args, "event_logs", None) is True
    return settings if keep else settings.model_copy(update={"event_logs": False})


def _pipeline(args: argparse.Namespace, settings: Settings) -> AnswerPipeline:
    """The pipeline ``ask`` builds, from the settings in effect (imported only now: a
    usage mistake is reported without loading LangChain and Chroma)."""
    from pipelines.pipeline import AnswerPipeline

    return AnswerPipeline(_rerun_settings(args, settings))


def _recorded_done(contents: LogContents) -> DoneData:
    contents.check_complete()
    done = contents.events[-1]
    assert isinstance(done, DoneEvent)  # check_complete says so
    return done.data


def _ask_again(pipeline: AnswerPipeline, recorded: RecordedRequest) -> tuple[DoneData, str | None]:
    """The rerun's ``done`` data and its error message (None when it did not fail)."""
    try:
        events: list[Event] = list(pipeline.stream_options(recorded.question, recorded.options))
    except InputError as error:
        # Checked before the answer starts: the log names a collection these settings do
        # not declare. The release cannot answer it, which is a change like any failure.
        message = redact_secrets(str(error))
        return DoneData(state="failed", timings=Timings(total_ms=0.0)), message
    done = events[-1]
    assert isinstance(done, DoneEvent)  # the stream always ends with done
    errors = [event.data.message for event in events if isinstance(event, ErrorEvent)]
    return done.data, errors[0] if errors else None


def _rerun(pipeline: AnswerPipeline, path: Path, contents: LogContents) -> Rerun:
    unasked = Rerun(path, contents.header.request_id, contents.header.question)
    try:
        before = _recorded_done(contents)
        recorded = recorded_request(contents.header, str(path))
    except EventLogError as error:
        return dataclasses.replace(unasked, skipped=error.message)
    after, error_message = _ask_again(pipeline, recorded)
    change = compare_answers(
        before, after, model_before=recorded.model, model_after=pipeline.settings.llm
    )
    return dataclasses.replace(unasked, change=change, error=error_message)


# --- logs rerun LOG ----------------------------------------------------------------------


def rerun_one(args: argparse.Namespace, settings: Settings) -> int:
    """One log asked again, its changes printed in full."""
    try:
        path = find_log(settings, args.log)
        contents = read_log(path)
        contents.check_complete()
        recorded_request(contents.header, str(path))
    except (EventLogError, InputError) as error:
        return _usage_error(error)
    rerun = _rerun(_pipeline(args, settings), path, contents)
    assert rerun.change is not None  # what could be skipped was checked above
    print(f"question: {rerun.question}")
    _print_change(rerun.change, rerun.error, indent="")
    _print_text_diff(rerun.change)
    if rerun.change.differs:
        print(f"{path}: the rerun's state or references differ from the log's", file=sys.stderr)
        return 1
    print(f"{path}: the rerun has the log's state and references", file=sys.stderr)
    return 0


def _model_note(change: AnswerChange) -> str:
    """Why the answer may differ before any release was changed: another answer model."""
    return f"recorded with {change.model_before}, rerun with {change.model_after}"


def _print_change(change: AnswerChange, error: str | None, *, indent: str) -> None:
    if change.model_changed:
        print(f"{indent}model: {change.model_before} -> {change.model_after} (not the model "
              "that answered the log: a change may be the model's)")  # fmt: skip
    if change.state_changed:
        print(f"{indent}state: {change.state_before} -> {change.state_after}")
    else:
        print(f"{indent}state: {change.state_after} (the same)")
    if error is not None:
        print(f"{indent}rerun error: {error}")
    if not change.references_changed:
        print(f"{indent}references: the same")
    for reference in change.added:
        print(f"{indent}+ {reference_id(reference)}  [{reference.n}] {reference.display_name}")
    for reference in change.removed:
        print(f"{indent}- {reference_id(reference)}  [{reference.n}] {reference.display_name}")
    for moved in change.moved:
        print(f"{indent}~ {moved.id}  [{moved.before}] -> [{moved.after}]")


def _print_text_diff(change: AnswerChange) -> None:
    if not change.text_changed:
        print("text: the same")
        return
    print("text:")
    for line in change.text_diff:
        print(line)


# --- logs rerun ------------------------------------------------------------------------------


def _selection(
    args: argparse.Namespace, settings: Settings
) -> list[tuple[Path, LogContents | str]]:
    """The selected logs, read (or why not), before any rerun: a rerun that writes its own
    log (``--log``) never adds itself to the selection."""
    folder = settings.logs_dir if args.logs is None else args.logs
    if args.logs is not None and not args.logs.is_dir():
        raise InputError(f"--logs {args.logs} is not a folder", fix="give the folder of the logs")
    selected: list[tuple[Path, LogContents | str]] = []
    for path in selected_log_paths(args, folder):
        try:
            # Only the header and the events: the callback records are never read here.
            contents = read_log(path, callbacks=False)
        except EventLogError as error:
            if args.state is None:
                selected.append((path, error.message))
            continue
        if args.state is None or _state(contents) == args.state:
            # The header and the last event are all a rerun reads: a thousand logs' tokens
            # and callbacks need not wait in memory for their turn.
            kept = LogContents(contents.header, events=contents.events[-1:], source=str(path))
            selected.append((path, kept))
    return selected


def _state(contents: LogContents) -> str:
    last = contents.events[-1] if contents.events else None
    return last.data.state if isinstance(last, DoneEvent) else "incomplete"


def _verdict(rerun: Rerun) -> str:
    change = rerun.change
    if change is None:
        return f"skipped ({rerun.skipped})"
    what = [
        name
        for name, changed in (
            ("state", change.state_changed),
            ("references", change.references_changed),
            ("text", change.text_changed),
        )
        if changed
    ]
    if not what:
        verdict = "the same"
    elif len(what) > 1:
        verdict = f"{', '.join(what[:-1])} and {what[-1]} changed"
    else:
        verdict = f"{what[0]} changed"
    return f"{verdict} ({_model_note(change)})" if change.model_changed else verdict


def run_rerun(args: argparse.Namespace, settings: Settings) -> int:
    """``logs rerun``: the one log named, or the selected ones."""
    if args.log is None:
        return _rerun_many(args, settings)
    if args.last or args.since or args.state or args.logs or args.json:
        return _usage_error(
            InputError(
                "--last, --since, --state, --logs and --json are for many logs",
                fix="leave out the log to rerun a selection, or the options to rerun one log",
            )
        )
    return rerun_one(args, settings)


def _rerun_many(args: argparse.Namespace, settings: Settings) -> int:
    try:
        selection = _selection(args, settings)
    except (EventLogError, InputError) as error:
        return _usage_error(error)
    pipeline: AnswerPipeline | None = None
    reruns: list[Rerun] = []
    for number, (path, contents) in enumerate(selection, start=1):
        if isinstance(contents, str):
            rerun = Rerun(path, None, None, skipped=contents)
        else:
            # Built at the first log that needs it: loading the models takes a few seconds.
            pipeline = pipeline or _pipeline(args, settings)
            rerun = _rerun(pipeline, path, contents)
        reruns.append(rerun)
        print(f"[{number}/{len(selection)}] {path.name}: {_verdict(rerun)}", file=sys.stderr)
        sys.stderr.flush()
    summary = summarize_reruns([rerun.change for rerun in reruns])
    if args.json:
        print(json.dumps({"logs": [r.as_json() for r in reruns], "summary": summary}, indent=2))
    else:
        _print_reruns(reruns)
        print(summary_line(summary))
    if summary["logs"] and not summary["compared"]:
        # Nothing compared is no evidence that nothing changed: 0 would read as "the same".
        print("reactome-answers: no selected log could be rerun and compared "
              "(see the skipped ones above)", file=sys.stderr)  # fmt: skip
        return 2
    return 1 if summary["changed"] else 0


def _print_reruns(reruns: Sequence[Rerun]) -> None:
    """Each answer whose state or references changed, then the logs that were skipped."""
    for rerun in reruns:
        if rerun.change is not None and rerun.change.differs:
            print(f"{rerun.path.name}  {rerun.question!s:.70}")
            _print_change(rerun.change, rerun.error, indent="  ")
    for rerun in reruns:
        if rerun.skipped is not None:
            print(f"{rerun.path.name}  skipped: {rerun.skipped}")
