"""The ``ask`` command: one question, answered from the ingested collections."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.commands.ingest import collection_list
from app.cli.terminal.evidence import evidence_lines, no_evidence_line
from callbacks.events import DoneData, DoneEvent, Event, TokenEvent, to_jsonl
from pipelines.core.errors import InputError
from pipelines.core.json_text import UnreadableJSONError, parse_json
from pipelines.core.options import checked_language
from pipelines.core.settings import Settings
from pipelines.language import SUPPORTED_LANGUAGES

if TYPE_CHECKING:
    from pipelines.pipeline import AnswerPipeline

__all__ = ["SUMMARY", "add_answer_options", "add_arguments", "print_answer", "read_history", "run"]

SUMMARY = "answer a question from the ingested collections, streaming, with its sources"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("question", help="the question, in quotes")
    output = parser.add_mutually_exclusive_group()
    output.add_argument(
        "--json", action="store_true", help="print the result as JSON (the done data + request_id)"
    )
    output.add_argument(
        "--events", action="store_true", help="print every event as one JSON line, as it happens"
    )
    add_answer_options(parser)
    parser.add_argument(
        "--history",
        type=Path,
        metavar="FILE",
        help='earlier turns of the conversation, as JSON: [{"role": "user" or "assistant", '
        '"content": "..."}, ...]',
    )
    parser.add_argument(
        "--evidence",
        dest="show_evidence",
        action="store_true",
        help="under each source, print the quotes from it that back the answer's sentences; a "
        "citation the evidence check found unsupported is marked 'unsupported:', with the "
        "sentence it was cited for (--json and --events always carry the evidence)",
    )


def add_answer_options(parser: argparse.ArgumentParser) -> None:
    """The options ``ask`` and ``chat`` share."""
    parser.add_argument(
        "--live-citations",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="print markers already in their final numbering as the answer streams (the "
        "default); --no-live-citations prints the model's own and the final text after it",
    )
    parser.add_argument(
        "--collections",
        type=collection_list,
        metavar="A,B",
        help="search these collections instead of letting the expander route the question",
    )
    parser.add_argument(
        "--language",
        type=_language,
        metavar="TAG",
        help="answer in this language, a BCP 47 tag (es, pt-BR, zh-Hans: one of "
        f"{', '.join(SUPPORTED_LANGUAGES)}) instead of the one detected in the question",
    )


def _language(value: str) -> str:
    try:
        return checked_language(value)
    except InputError as error:  # argparse's one-line usage error
        raise argparse.ArgumentTypeError(str(error)) from None


# More than any history the pipeline takes (50 turns of at most 20,000 characters, each up
# to six bytes as a JSON escape): a larger file is a mistake (or /dev/zero), not a history.
_MAX_HISTORY_BYTES = 8 * 1024 * 1024
_HISTORY_FIX = (
    'give a JSON list like [{"role": "user", "content": "..."}, {"role": "assistant", ...}]'
)


def _history_json(path: Path) -> object:
    """The JSON in ``path``; an :class:`InputError` naming it for anything else."""
    try:
        with path.open("rb") as stream:
            raw = stream.read(_MAX_HISTORY_BYTES + 1)
    except OSError as error:
        raise InputError(
            f"--history {path}: cannot read it ({error.strerror or error})", fix=_HISTORY_FIX
        ) from None
    if len(raw) > _MAX_HISTORY_BYTES:
        raise InputError(
            f"--history {path}: over {_MAX_HISTORY_BYTES:,} bytes, more than any history holds",
            fix=_HISTORY_FIX,
        )
    try:
        return parse_json(raw)
    except UnreadableJSONError as error:
        problem = {
            "encoding": error.reason,
            "syntax": f"not JSON ({error.reason})",
        }.get(error.kind, f"not JSON we can read ({error.reason})")
    raise InputError(f"--history {path}: {problem}", fix=_HISTORY_FIX)


def read_history(path: Path) -> list[tuple[str, str]]:
    """Earlier turns from a JSON file: ``[{"role": "user" or "assistant", "content": "..."}]``,
    as the HTTP API's ``history`` takes them."""
    fix = _HISTORY_FIX
    turns = _history_json(path)
    if not isinstance(turns, list):
        raise InputError(f"--history {path}: not a list of turns", fix=fix)
    history = []
    for number, turn in enumerate(turns, start=1):
        role = turn.get("role") if isinstance(turn, dict) else None
        content = turn.get("content") if isinstance(turn, dict) else None
        if role not in ("user", "assistant") or not isinstance(content, str):
            raise InputError(
                f"--history {path}: turn {number} needs a role (user or assistant) and a "
                "content string",
                fix=fix,
            )
        history.append((role, content))
    return history


def print_answer(
    pipeline: AnswerPipeline,
    question: str,
    args: argparse.Namespace,
    history: Sequence[tuple[str, str]] = (),
) -> DoneData:
    """Stream one answer to stdout as ``ask`` shows it (a failure's message to stderr); the
    ``done`` data."""
    from app.links import reference_link
    from pipelines.core.options import RequestOptions
    from pipelines.language import fixed_text
    from pipelines.pipeline import answer_result

    # chat has none of these options: it always prints the answer as text.
    as_json, as_events = getattr(args, "json", False), getattr(args, "events", False)
    show_evidence = getattr(args, "show_evidence", False)
    streamed: list[str] = []
    events: list[Event] = []
    options = RequestOptions(
        history=tuple(history or ()),
        collections=args.collections,
        live_citations=args.live_citations,
        language=args.language,
        # A program that starts us inside its own trace passes it as the environment
        # carrier does (OpenTelemetry's TRACEPARENT and TRACESTATE variables).
        traceparent=os.environ.get("TRACEPARENT"),
        tracestate=os.environ.get("TRACESTATE"),
        surface="cli",
    )
    answer = pipeline.stream_options(question, options)
    for event in answer:
        events.append(event)
        if as_events:
            sys.stdout.write(to_jsonl(event))
            sys.stdout.flush()
        elif isinstance(event, TokenEvent) and not as_json:
            streamed.append(event.data.text)
            sys.stdout.write(event.data.text)
            sys.stdout.flush()
    result = answer_result(events)  # done is last, as the stream guarantees
    done = events[-1]
    assert isinstance(done, DoneEvent)
    data = done.data
    if as_json:
        print(json.dumps(result, indent=2))
    elif not as_events:
        if not streamed:
            print(data.text)
        elif data.text != "".join(streamed):
            # Markers were renumbered or removed after generation: show the final text so it
            # matches the Sources list below.
            print(f"\n\nWith the final numbering:\n{data.text}")
        else:
            print()
        if data.references:
            print(f"\n{fixed_text('sources_heading', data.language)}")
            for reference in data.references:
                print(f"[{reference.n}] {reference.display_name} <{reference_link(reference)}>")
                if show_evidence:
                    for line in evidence_lines(data.text, data.evidence, reference.n):
                        print(line)
            if show_evidence and not data.evidence:
                print(no_evidence_line(pipeline.settings.evidence))
    if data.state == "failed":
        message = result.get("error", {}).get("message") or "the answer failed"
        print(f"reactome-answers: error: {message}", file=sys.stderr)
    return data


def run(args: argparse.Namespace, settings: Settings) -> int:
    from pipelines.pipeline import AnswerPipeline

    history = read_history(args.history) if args.history else []
    data = print_answer(AnswerPipeline(settings), args.question, args, history)
    # A refused question is the caller's input to fix, as with any bad argument.
    return 1 if data.state in ("failed", "refused") else 0
