"""A recorded answer as a person reads it in the terminal (``replay LOG``), and what its
model was sent (``replay LOG --model-input``)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable

from callbacks.events import DoneEvent, ErrorEvent, Event, Reference, ReferenceEvent, TokenEvent
from callbacks.log import LogContents
from callbacks.log_records import model_input, model_raw_text, searched_queries

__all__ = ["print_model_input", "print_replay_text", "print_what_the_model_saw"]


def print_replay_text(events: Iterable[tuple[float, Event]]) -> None:
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


def print_model_input(contents: LogContents) -> None:
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


def print_what_the_model_saw(contents: LogContents) -> None:
    """The conversation before the question and what the retriever searched for: what the
    expander and the model saw besides the sources, which the events show."""
    for role, content in contents.header.history:
        print(f"[history] {role}: {content}")
    queries = searched_queries(contents)
    if queries:
        print(f"[searched for] {queries[0]}")
