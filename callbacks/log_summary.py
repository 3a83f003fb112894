"""What one event log says about its answer, and what many say together.

:func:`log_stats` reads one :class:`~callbacks.log.LogContents` into a flat row (state,
timings, citations, the seq of the last citation and of the first token, the refusal rule);
:func:`summarize` is arithmetic over such rows, with no file in sight: the numbers an operator
measured by hand before (did every answer with both send its citations before its first token,
are zero-citation answers the fastest, which rules refuse most). :func:`stats_lines` and
:func:`summary_lines` say the same in words, for ``logs stats`` without ``--json``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from callbacks.events import CitationEvent, DoneEvent, ErrorEvent, ReferenceEvent, TokenEvent
from callbacks.log import LogContents
from callbacks.log_header import LogHeader
from callbacks.log_records import custom_data, mapping
from pipelines.core.tags import REFUSAL_EVENT

__all__ = ["answered_by", "log_stats", "percentiles", "stats_lines", "summarize", "summary_lines"]


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
        "request_id": contents.header.request_id,
        "question": contents.header.question,
        "created_at": contents.header.created_at,
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
        "live_citations": bool(contents.header.options.get("live_citations")),
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


# --- in words --------------------------------------------------------------------------------


def _plural(count: int, noun: str, plural: str | None = None) -> str:
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def _ms(value: object) -> str:
    """A time as people read it: ``5.4 ms``, ``299 ms``, ``1,204 ms``."""
    number = float(value)  # type: ignore[arg-type]
    return f"{number:.1f} ms" if abs(number) < 10 else f"{number:,.0f} ms"


def _spread(times: Mapping[str, Any], unit: Any = _ms) -> str | None:
    """``p50 5.4 ms, p90 299 ms, p99 299 ms``, or None when nothing was measured."""
    if times.get("p50") is None:
        return None
    return ", ".join(f"{name} {unit(times[name])}" for name in ("p50", "p90", "p99"))


def answered_by(header: LogHeader) -> str | None:
    """Which process wrote a log: ``host-a, process 5333``; a log written before headers named
    the host gives its process alone, and one that names neither gives None."""
    parts = [header.host] if header.host else []
    if header.process is not None:
        parts.append(f"process {header.process}")
    return ", ".join(parts) or None


def _feedback_text(feedback: object) -> str:
    rating = mapping(feedback).get("rating")
    if not rating:
        return "none"
    comment, at = mapping(feedback).get("comment"), mapping(feedback).get("at")
    text = str(rating) + (f' "{comment}"' if comment else "")
    return text + (f" ({at})" if at else "")


def stats_lines(stats: Mapping[str, Any], answered_by: str | None = None) -> list[str]:
    """One log's :func:`log_stats` row (with its ``feedback``) as labelled lines."""
    rows: list[tuple[str, str]] = [
        ("request id", str(stats.get("request_id"))),
        ("question", str(stats.get("question"))),
        ("created at", str(stats.get("created_at") or "unknown")),
    ]
    if answered_by:
        rows.append(("answered by", answered_by))
    rows.append(("state", str(stats.get("state"))))
    if stats.get("refusal_rule"):
        rows.append(("refused by", str(stats["refusal_rule"])))
    first, seq = stats.get("first_token_ms"), stats.get("first_token_seq")
    if first is not None:
        rows.append(("first token", _ms(first) + (f", event {seq}" if seq is not None else "")))
    else:
        rows.append(("first token", "none: no answer text was streamed"))
    if stats.get("total_ms") is not None:
        rows.append(("total", _ms(stats["total_ms"])))
    answer_tokens = stats.get("answer_tokens")
    rows.append((
        "tokens",
        _plural(int(stats.get("token_events") or 0), "token event")
        + (f", {_plural(int(answer_tokens), 'answer token')}" if answer_tokens is not None else ""),
    ))  # fmt: skip
    early, last = int(stats.get("citations_early") or 0), stats.get("last_citation_seq")
    citations = (
        _plural(early, "citation")
        + " sent"
        + (f", the last as event {last}" if last is not None else "")
    )
    if stats.get("citations_final") is not None:
        citations += f"; {_plural(int(stats['citations_final']), 'reference')} in the answer"
    rows.append(("citations", citations))
    if last is not None and seq is not None:
        held = last < seq
        rows.append((
            "citation gate",
            "held: every citation before the first token" if held
            else "broken: a citation came after the first token",
        ))  # fmt: skip
    errors = stats.get("errors") or []
    rows.append(("errors", "; ".join(str(error) for error in errors) if errors else "none"))
    if stats.get("live_citations"):
        live = _plural(int(stats.get("references_streamed") or 0), "reference event")
        if stats.get("held_back_chars") is not None:
            live += (
                f", text held back at most {_plural(int(stats['held_back_chars']), 'character')}"
                f" and {_ms(stats.get('held_back_ms') or 0)}"
            )
        rows.append(("live numbering", live))
    else:
        rows.append(("live numbering", "off"))
    items, unsupported = int(stats.get("evidence_items") or 0), stats.get("evidence_unsupported")
    rows.append((
        "evidence",
        f"{_plural(items, 'citation')} judged, {int(unsupported or 0)} unsupported" if items
        else "no citation judged",
    ))  # fmt: skip
    rows.append(("feedback", _feedback_text(stats.get("feedback"))))
    width = max(len(label) for label, _ in rows) + 1
    return [f"{label + ':':<{width}} {value}" for label, value in rows]


def summary_lines(summary: Mapping[str, Any]) -> list[str]:
    """:func:`summarize`'s summary as the lines ``logs stats`` prints."""
    lines = [f"{_plural(summary['logs'], 'log')} ({summary['unreadable']} unreadable)"]
    states: Mapping[str, int] = summary["states"]
    lines.append(
        "states: " + (", ".join(f"{state} {count}" for state, count in states.items()) or "none")
    )
    gate = summary["gate"]
    lines.append(
        f"citations before the first token: {gate['held']} of "
        f"{_plural(gate['of'], 'answer')} with both"
    )
    lines.append("first token: " + (_spread(summary["first_token_ms"]) or "none was streamed"))
    by_state: Mapping[str, Any] = summary["first_token_ms_by_state"]
    order = {state: place for place, state in enumerate(states)}  # the states line's order
    for state in sorted(by_state, key=lambda name: (order.get(name, len(order)), name)):
        lines.append(
            f"  {state} ({_plural(int(states.get(state, 0)), 'answer')}): "
            + (_spread(by_state[state]) or "no first token")
        )
    if summary["by_citations"]:
        # Every log with its done counts here, refusals and failures too (with 0, or what a
        # failed answer cited); the line says so, since references per answer does not.
        lines.append("first token by references (answers in every state):")
        for n, group in summary["by_citations"].items():
            times = _spread(group["first_token_ms"])
            lines.append(
                f"  {_plural(int(n), 'reference')}: {_plural(group['answers'], 'answer')}, "
                + (f"first token {times}" if times else "no first token")
            )
    per_answer: Mapping[str, int] = summary["references_per_answer"]
    lines.append(
        "references per answered answer: "
        + (
            ", ".join(
                f"{_plural(count, 'answer')} with {_plural(int(n), 'reference')}"
                for n, count in sorted(per_answer.items(), key=lambda item: int(item[0]))
            )
            or "no answered answer"
        )
    )
    evidence = summary["evidence"]
    lines.append(
        f"citations judged unsupported: {evidence['unsupported']} of {evidence['items']} judged"
        + (
            f", in {_plural(evidence['answers_with_unsupported'], 'answer')}"
            if evidence["unsupported"]
            else ""
        )
    )
    if summary["refusals"]:
        lines.append(
            "refusals by rule: "
            + ", ".join(f"{rule} {count}" for rule, count in summary["refusals"].items())
        )
    held_back = summary["held_back"]
    if held_back["answers"]:
        chars = _spread(held_back["chars"], lambda value: f"{float(value):,.0f}")
        lines.append(
            f"held back with live numbering ({_plural(held_back['answers'], 'answer')}): "
            f"characters {chars}; time {_spread(held_back['ms'])}"
        )
    feedback = summary["feedback"]
    lines.append(f"feedback: {feedback['up']} up, {feedback['down']} down")
    return lines
