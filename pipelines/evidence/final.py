"""The finalizer's policy: which text, references and evidence an answer's ``done`` carries,
given how it ended, what the model wrote, the sources it was given and the judge's rulings.

Pure functions over strings and lists, called by the event handler
(:meth:`callbacks.handler.AnswerEventHandler.finish`), which keeps the state; tested without
a model or a store (tests/evidence/test_verdicts.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipelines.citations.finalize import (
    cited_numbers,
    finalize_citations,
    strip_out_of_range_markers,
)
from pipelines.citations.sources import Source
from pipelines.evidence.claims import Evidence, Verdicts, drop_unsupported, evidence_items

__all__ = ["FinalAnswer", "final_answer", "live_references"]

# The states whose text is the model's and may cite: a refusal or "nothing found" never does.
_GROUNDED = ("answered", "failed")


@dataclass(frozen=True)
class FinalAnswer:
    text: str
    references: list[Source]  # in the text's numbering: the first is [1]
    evidence: list[Evidence]


def final_answer(
    state: str,
    text: str,
    sources: Sequence[Source],
    verdicts: Verdicts,
    *,
    drop: bool = False,
) -> FinalAnswer:
    """The ``done`` of an answer numbered after it ended (not live).

    Markers outside the sources are removed and the rest renumbered in first-citation order
    (:func:`finalize_citations`). An answer that cites nothing keeps the untouched list of its
    sources; a failed one that cites nothing keeps none, for the untouched list is a grounded
    answer's; a refused or empty one has none and no markers. With ``drop``, markers ruled
    unsupported go first, so a source cited by nothing else leaves the references, and an
    answer whose every marker was unsupported cites nothing it can stand on: it keeps none."""
    grounded = list(sources) if state in _GROUNDED else []
    stripped = strip_out_of_range_markers(text, len(grounded))
    if drop and verdicts:
        kept_markers = drop_unsupported(stripped, grounded, verdicts)
        if cited_numbers(stripped) and not cited_numbers(kept_markers):
            grounded = []
        stripped = kept_markers
    final_text, kept = finalize_citations(stripped, grounded)
    if not grounded or (state == "failed" and not cited_numbers(stripped)):
        kept = []
    evidence = evidence_items(final_text, kept, verdicts) if verdicts else []
    return FinalAnswer(final_text, kept, evidence)


def live_references(state: str, cited: Sequence[Source], sources: Sequence[Source]) -> list[Source]:
    """The references of an answer numbered live, whose ``cited`` went out as it streamed: a
    grounded answer that cited nothing keeps the untouched list, a failed one none."""
    return list(cited) if cited or state == "failed" else list(sources)
