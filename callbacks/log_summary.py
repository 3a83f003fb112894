"""What one event log says about its answer, and what many say together.

:func:`log_stats` reads one :class:`~callbacks.log.LogContents` into a flat row (state,
timings, citations, the seq of the last citation and of the first token, the refusal rule);
:func:`summarize` is arithmetic over such rows, with no file in sight: the numbers an operator
measured by hand before (did every answer with both send its citations before its first token,
are zero-citation answers the fastest, which rules refuse most).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from callbacks.events import CitationEvent, DoneEvent, ErrorEvent, ReferenceEvent, TokenEvent
from callbacks.log import LogContents
from callbacks.log_records import custom_data, mapping
from pipelines.core.tags import REFUSAL_EVENT

__all__ = ["log_stats", "percentiles", "summarize"]


def _refusal_rule(contents: LogContents) -> str | None:
    """Which rule refused the question: the rule's name (``too_long``, ``personal_care``...),
    or who judged it (``similar_examples``, ``expander``)."""
    data = custom_data(contents, REFUSAL_EVENT)
    if data is None:
        return None
    rule = mapping(data.get("detail")).get("rule") or data.get("reason")
    return str(rule) if rule else "unknown"


def log_stats(contents: LogContents) -> dict[str, Any]:
    """One log as a flat row; ``state`` is ``incomplete`` for a log without its ``done``."""
    events = contents.events
    done = next((e for e in events if isinstance(e, DoneEvent)), None)
    citations = [e for e in events if isinstance(e, CitationEvent)]
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    return {
        "request_id": contents.header.get("request_id"),
        "question": contents.header.get("question"),
        "created_at": contents.header.get("created_at"),
        "state": done.data.state if done else "incomplete",
        "first_token_ms": done.data.timings.first_token_ms if done else None,
        "total_ms": done.data.timings.total_ms if done else None,
        "token_events": len(tokens),
        "answer_tokens": done.data.usage.answer_tokens if done else None,
        "citations_early": len(citations),
        "citations_final": len(done.data.references) if done else None,
        "last_citation_seq": citations[-1].seq if citations else None,
        "first_token_seq": tokens[0].seq if tokens else None,
        "errors": [e.data.message for e in events if isinstance(e, ErrorEvent)],
        "refusal_rule": _refusal_rule(contents),
        # Live citation numbering: what was sent as final, and the longest text waited.
        "live_citations": bool(mapping(contents.header.get("options")).get("live_citations")),
        "references_streamed": sum(isinstance(e, ReferenceEvent) for e in events),
        "held_back_chars": done.data.timings.held_back_chars if done else None,
        "held_back_ms": done.data.timings.held_back_ms if done else None,
        # The judge's rulings on the answer's citations (docs/contract.md, evidence).
        "evidence_items": len(done.data.evidence) if done else 0,
        "evidence_unsupported": sum(not item.supported for item in done.data.evidence)
        if done
        else 0,
    }


def percentiles(values: Iterable[float]) -> dict[str, float | None]:
    """p50, p90 and p99 by the nearest-rank method (a value that occurred), None when empty."""
    ordered = sorted(values)

    def rank(share: float) -> float | None:
        if not ordered:
            return None
        return ordered[max(0, math.ceil(share * len(ordered)) - 1)]

    return {"p50": rank(0.50), "p90": rank(0.90), "p99": rank(0.99)}


def _counts(values: Iterable[Any]) -> dict[str, int]:
    counted = Counter(str(value) for value in values)
    return dict(sorted(counted.items(), key=lambda item: (-item[1], item[0])))


def _first_token_times(rows: Iterable[Mapping[str, Any]]) -> list[float]:
    return [float(row["first_token_ms"]) for row in rows if row.get("first_token_ms") is not None]


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Many :func:`log_stats` rows (unreadable logs as ``{"error": ...}``) as one summary;
    a row's ``feedback`` (:func:`callbacks.feedback.read_feedback`), when given, is counted."""
    readable = [row for row in rows if "error" not in row]
    both = [
        row
        for row in readable
        if row.get("last_citation_seq") is not None and row.get("first_token_seq") is not None
    ]
    held = [row for row in both if row["last_citation_seq"] < row["first_token_seq"]]
    by_state: dict[str, list[Mapping[str, Any]]] = {}
    for row in readable:
        by_state.setdefault(str(row["state"]), []).append(row)
    by_citations: dict[int, list[Mapping[str, Any]]] = {}
    for row in readable:
        if row.get("citations_final") is not None:
            by_citations.setdefault(int(row["citations_final"]), []).append(row)
    live = [
        row for row in readable if row.get("live_citations") and row.get("state") != "incomplete"
    ]
    return {
        "logs": len(rows),
        "unreadable": len(rows) - len(readable),
        "states": _counts(row["state"] for row in readable),
        # The stream's promise: in every answer with both, citations end before tokens start.
        "gate": {
            "held": len(held),
            "of": len(both),
            "last_citation_seq": _counts(row["last_citation_seq"] for row in both),
            "first_token_seq": _counts(row["first_token_seq"] for row in both),
        },
        "first_token_ms": percentiles(_first_token_times(readable)),
        "first_token_ms_by_state": {
            state: percentiles(_first_token_times(group)) for state, group in by_state.items()
        },
        "by_citations": {
            str(n): {
                "answers": len(group),
                "first_token_ms": percentiles(_first_token_times(group)),
            }
            for n, group in sorted(by_citations.items())
        },
        "refusals": _counts(row["refusal_rule"] for row in readable if row.get("refusal_rule")),
        # Users' ratings, when the command put each log's feedback in its row.
        "feedback": {
            rating: sum(mapping(row.get("feedback")).get("rating") == rating for row in rows)
            for rating in ("up", "down")
        },
        "references_per_answer": _counts(
            row["citations_final"] for row in by_state.get("answered", [])
        ),
        "evidence": {
            "items": sum(int(row.get("evidence_items") or 0) for row in readable),
            "unsupported": sum(int(row.get("evidence_unsupported") or 0) for row in readable),
            "answers_with_unsupported": sum(
                bool(row.get("evidence_unsupported")) for row in readable
            ),
        },
        "held_back": {
            "answers": len(live),
            "chars": percentiles(float(row["held_back_chars"] or 0) for row in live),
            "ms": percentiles(float(row["held_back_ms"] or 0) for row in live),
        },
    }
