"""The lines ``ask --evidence`` prints under a Sources entry: the quotes from that source that
back the answer's sentences citing it.

A supported citation shows its quote, once per source however many sentences it backs. One
the judge found unsupported is marked ``unsupported:``, with the sentence it was cited for
below: the quote is only the closest passage the source has, and what the reader needs to
know is which sentence the source does not back. Whitespace is collapsed, so a quote that
spans lines in its source keeps the indentation. (The terminal is not colored: the command
line shows escape sequences instead of obeying them, :mod:`app.cli.terminal.guard`.)
"""

from __future__ import annotations

from collections.abc import Sequence

from callbacks.events import EvidenceData

__all__ = ["UNSUPPORTED", "evidence_lines", "no_evidence_line"]

UNSUPPORTED = "unsupported: "
_INDENT = "    "


def _one_line(text: str) -> str:
    return " ".join(text.split())


def evidence_lines(text: str, evidence: Sequence[EvidenceData], n: int) -> list[str]:
    """The lines for reference ``n`` of an answer whose text is ``text``, in reading order."""
    lines: list[str] = []
    shown: set[str] = set()
    for item in evidence:
        if item.n != n:
            continue
        quote = f'"{_one_line(item.quote)}"'
        if item.supported:
            if quote not in shown:
                shown.add(quote)
                lines.append(f"{_INDENT}{quote}")
            continue
        start, end = item.sentence
        lines.append(f"{_INDENT}{UNSUPPORTED}{quote}")
        lines.append(f'{_INDENT}  does not back: "{_one_line(text[start:end])}"')
    return lines


def no_evidence_line(check: str) -> str:
    """What ``--evidence`` prints for an answer with sources and no evidence, given the
    ``evidence`` setting."""
    if check == "off":
        return "(No quotes: the evidence check is off; REACTOME_ANSWERS_EVIDENCE=flag turns it on.)"
    return "(No quotes: no citation was judged for this answer; its event log says why.)"
