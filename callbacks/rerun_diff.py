"""Re-asking a logged question: what the log says to ask, and how the new answer differs.

:func:`recorded_request` reads a log header into the question and options to ask again (the
question as logged, its history, collections and citation options; never the releases, so a
rerun answers from whatever the current home holds). :func:`compare_answers` sets two ``done``
events' data side by side: the state, the references added, removed or moved (by their
``st_id`` or ``url``), and a diff of the text. :func:`summarize_reruns` counts many such
comparisons. All of it is arithmetic on values: no file, store or model.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from callbacks.events import DoneData, Reference
from callbacks.log_header import LogHeader
from pipelines.core.errors import EventLogError
from pipelines.core.options import RequestOptions

__all__ = [
    "AnswerChange",
    "MovedReference",
    "RecordedRequest",
    "compare_answers",
    "recorded_request",
    "reference_id",
    "summarize_reruns",
    "summary_line",
    "text_diff",
]

_FIX = "rerun a log written by reactome-answers, unaltered"


@dataclass(frozen=True)
class RecordedRequest:
    """What a log's header says was asked: the question and the options to ask it with."""

    question: str
    options: RequestOptions
    model: str | None = None  # the options' ``llm`` that answered, when the log names it


def recorded_request(header: LogHeader, source: str = "the log") -> RecordedRequest:
    """The question (as logged, so with any pasted secret still redacted; else its normalized
    form), history, collections (``["auto"]``: the expander's routing) and citation options
    of a log header. A header missing the question, or holding something other than what we
    write, is an :class:`EventLogError` naming ``source``."""
    for asked_with in ("history", "collections"):
        if asked_with in header.problems:
            raise EventLogError(f"{source}: {header.problems[asked_with]}", fix=_FIX)
    question = header.question or header.normalized_question
    if not question:
        raise EventLogError(f"{source} names no question to ask again", fix=_FIX)
    collections = list(header.collections)
    options = header.options
    cite_urls = options.get("cite_urls")
    model = options.get("llm")
    # A language the request named is named again; a detected one is detected again.
    language = options.get("language") if options.get("language_from") == "request" else None
    return RecordedRequest(
        model=model if isinstance(model, str) and model else None,
        question=question,
        options=RequestOptions(
            history=header.history,
            # "auto" is how a log says the expander chose: a rerun lets it choose again.
            collections=None if collections in ([], ["auto"]) else tuple(collections),
            cite_urls=cite_urls if isinstance(cite_urls, bool) else None,
            live_citations=options.get("live_citations") is True,
            language=language if isinstance(language, str) and language.isalpha() else None,
        ),
    )


def reference_id(reference: Reference) -> str:
    """What a reference is known by across answers: its stable id, or a user-guide url."""
    return reference.st_id or reference.url or ""


@dataclass(frozen=True)
class MovedReference:
    """A reference both answers give, in another place among the ones they share."""

    id: str
    before: int  # its number (the marker) in the recorded answer
    after: int  # and in the rerun


@dataclass(frozen=True)
class AnswerChange:
    """How a rerun's answer differs from the recorded one (nothing, when all is empty)."""

    state_before: str
    state_after: str
    added: tuple[Reference, ...] = ()
    removed: tuple[Reference, ...] = ()
    moved: tuple[MovedReference, ...] = ()
    text_diff: tuple[str, ...] = ()
    # The answer model of each (``openai:gpt-4o``, ``extractive``), None when unknown: an
    # answer recorded by another model than the rerun's may change for that reason alone.
    model_before: str | None = None
    model_after: str | None = None

    @property
    def model_changed(self) -> bool:
        """Whether the log names a model, and not the one the rerun asked."""
        return self.model_before is not None and self.model_before != self.model_after

    @property
    def state_changed(self) -> bool:
        return self.state_before != self.state_after

    @property
    def references_changed(self) -> bool:
        return bool(self.added or self.removed or self.moved)

    @property
    def text_changed(self) -> bool:
        return bool(self.text_diff)

    @property
    def differs(self) -> bool:
        """What the exit status follows: the state or the references (a reworded text with
        the same sources is shown, not counted)."""
        return self.state_changed or self.references_changed

    def as_json(self) -> dict[str, Any]:
        def listed(references: tuple[Reference, ...]) -> list[dict[str, Any]]:
            return [
                {"id": reference_id(r), "n": r.n, "display_name": r.display_name,
                 "collection": r.collection}
                for r in references
            ]  # fmt: skip

        return {
            "state": {"before": self.state_before, "after": self.state_after},
            "references": {
                "added": listed(self.added),
                "removed": listed(self.removed),
                "moved": [{"id": m.id, "before": m.before, "after": m.after} for m in self.moved],
            },
            "text_changed": self.text_changed,
            "differs": self.differs,
            "model": {"before": self.model_before, "after": self.model_after},
        }


def _by_id(references: Sequence[Reference]) -> dict[str, Reference]:
    """Each id's reference in marker order; an id given twice (never by our finalizer)
    counts once, at its first number."""
    found: dict[str, Reference] = {}
    for reference in sorted(references, key=lambda r: r.n):
        found.setdefault(reference_id(reference), reference)
    return found


def _longest_common_order(first: list[str], second: list[str]) -> set[str]:
    """The ids of a longest subsequence common to both orders: the ones that kept their
    place relative to each other (a few references: quadratic is nothing)."""
    lengths = [[0] * (len(second) + 1) for _ in range(len(first) + 1)]
    for i in range(len(first) - 1, -1, -1):
        for j in range(len(second) - 1, -1, -1):
            lengths[i][j] = (
                lengths[i + 1][j + 1] + 1
                if first[i] == second[j]
                else max(lengths[i + 1][j], lengths[i][j + 1])
            )
    kept: set[str] = set()
    i = j = 0
    while i < len(first) and j < len(second):
        if first[i] == second[j]:
            kept.add(first[i])
            i, j = i + 1, j + 1
        elif lengths[i + 1][j] >= lengths[i][j + 1]:
            i += 1
        else:
            j += 1
    return kept


def compare_answers(
    before: DoneData,
    after: DoneData,
    *,
    model_before: str | None = None,
    model_after: str | None = None,
) -> AnswerChange:
    """The recorded answer's ``done`` data against the rerun's (and the answer model of each,
    when known).

    Added and removed are the ids only one answer gives. Moved are the ids both give whose
    order among the ids both give changed: the fewest that explain the new order, so a
    reference added or removed ahead of another, which renumbers it, does not move it."""
    old, new = _by_id(before.references), _by_id(after.references)
    shared_before = [key for key in old if key in new]
    shared_after = [key for key in new if key in old]
    in_place = _longest_common_order(shared_before, shared_after)
    return AnswerChange(
        state_before=before.state,
        state_after=after.state,
        added=tuple(reference for key, reference in new.items() if key not in old),
        removed=tuple(reference for key, reference in old.items() if key not in new),
        moved=tuple(
            MovedReference(key, old[key].n, new[key].n)
            for key in shared_before
            if key not in in_place
        ),
        text_diff=tuple(text_diff(before.text, after.text)),
        model_before=model_before,
        model_after=model_after,
    )


# A sentence ends at . ! or ? and a space (our answers put their markers before the stop).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _sentences(text: str) -> list[str]:
    """The text one sentence a line: an answer is a paragraph or two, and a diff of whole
    paragraphs would show every change as the whole answer replaced."""
    return [
        sentence for line in text.splitlines() for sentence in _SENTENCE_END.split(line) if sentence
    ]


def text_diff(before: str, after: str) -> list[str]:
    """A unified diff of the two texts, one sentence a line; empty when they are equal."""
    if before == after:
        return []
    return list(
        difflib.unified_diff(
            _sentences(before), _sentences(after), "recorded", "rerun", lineterm=""
        )
    )


def summarize_reruns(changes: Sequence[AnswerChange | None]) -> dict[str, Any]:
    """Counts over many reruns; ``None`` stands for a log that could not be rerun (unreadable,
    or without the ``done`` to compare with). ``model_changed`` counts the answers recorded
    by another model than the rerun's, ``recorded_models`` names those models (with how many
    answers each) and ``current_model`` the rerun's."""
    compared = [change for change in changes if change is not None]
    other_model = [change for change in compared if change.model_changed]
    current = sorted({str(change.model_after) for change in other_model if change.model_after})
    return {
        "logs": len(changes),
        "compared": len(compared),
        "skipped": len(changes) - len(compared),
        "changed": sum(change.differs for change in compared),
        "references_changed": sum(change.references_changed for change in compared),
        "state_changed": sum(change.state_changed for change in compared),
        "text_changed": sum(change.text_changed for change in compared),
        "model_changed": len(other_model),
        "recorded_models": dict(
            sorted(Counter(str(change.model_before) for change in other_model).items())
        ),
        "current_model": ", ".join(current) or None,
    }


def summary_line(summary: Mapping[str, Any]) -> str:
    """``12 of 120 answers changed their references, 3 their state`` (and what was skipped,
    and how many answers another model recorded)."""
    line = (
        f"{summary['references_changed']} of {summary['compared']} answers changed their "
        f"references, {summary['state_changed']} their state"
        f" ({summary['text_changed']} their text)"
    )
    if summary["skipped"]:
        line += f"; {summary['skipped']} log(s) skipped: unreadable or without a done event"
    if summary.get("model_changed"):
        count, current = summary["model_changed"], summary["current_model"]
        models = ", ".join(
            f"{model} ({number})" if len(summary["recorded_models"]) > 1 else model
            for model, number in summary["recorded_models"].items()
        )
        line += f"; {count} recorded with another model than the current {current}: {models}"
    return line
