"""The ``ask`` command: one question, answered from the ingested collections."""

from __future__ import annotations

import argparse
import json
import sys

from app._ingest_commands import collection_list
from app._links import reference_link
from callbacks.events import DoneEvent, Event, TokenEvent, to_jsonl
from pipelines.settings import Settings

__all__ = ["add_ask_arguments", "cmd_ask"]


def add_ask_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("question", help="the question, in quotes")
    output = parser.add_mutually_exclusive_group()
    output.add_argument(
        "--json", action="store_true", help="print the result as JSON (the done data + request_id)"
    )
    output.add_argument(
        "--events", action="store_true", help="print every event as one JSON line, as it happens"
    )
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


def cmd_ask(args: argparse.Namespace, settings: Settings) -> int:
    from pipelines.pipeline import AnswerPipeline, answer_result

    pipeline = AnswerPipeline(settings)
    streamed: list[str] = []
    events: list[Event] = []
    answer = pipeline.stream(
        args.question, collections=args.collections, live_citations=args.live_citations
    )
    for event in answer:
        events.append(event)
        if args.events:
            sys.stdout.write(to_jsonl(event))
            sys.stdout.flush()
        elif isinstance(event, TokenEvent) and not args.json:
            streamed.append(event.data.text)
            sys.stdout.write(event.data.text)
            sys.stdout.flush()
    result = answer_result(events)  # done is last, as the stream guarantees
    done = events[-1]
    assert isinstance(done, DoneEvent)
    data = done.data
    if args.json:
        print(json.dumps(result, indent=2))
    elif not args.events:
        if not streamed:
            print(data.text)
        elif data.text != "".join(streamed):
            # Markers were renumbered or removed after generation: show the final text so it
            # matches the Sources list below.
            print(f"\n\nWith the final numbering:\n{data.text}")
        else:
            print()
        if data.references:
            print("\nSources:")
            for reference in data.references:
                print(f"[{reference.n}] {reference.display_name} <{reference_link(reference)}>")
    if data.state == "failed":
        message = result.get("error", {}).get("message") or "the answer failed"
        print(f"reactome-answers: error: {message}", file=sys.stderr)
        return 1
    # A refused question is the caller's input to fix, as with any bad argument.
    return 1 if data.state == "refused" else 0
