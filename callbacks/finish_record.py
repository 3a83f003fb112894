"""The log's ``finish`` record: how the handler was told the answer ended.

:class:`FinishRecord` is written by one function (:meth:`FinishRecord.record`, which the
handler's :meth:`~callbacks.handler.AnswerEventHandler.finish` logs) and read by one
(:meth:`FinishRecord.read`), which replay and the log's model text use. The tolerance rule is
the log header's (``callbacks.log_header``): a field that is missing takes its default, and a
field holding what this program never writes is read as missing and named in ``problems``, so
a reader that needs it (replay, which must call ``finish`` as it was called) refuses the
record with that problem, in words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

from callbacks.events import DoneState
from pipelines.core.json_text import finite_number
from pipelines.evidence.claims import Claim, Verdict

__all__ = ["FinishRecord"]

_STATES: tuple[DoneState, ...] = get_args(DoneState)


@dataclass(frozen=True)
class FinishRecord:
    state: DoneState | None = None  # None: missing, or none we write
    text: str | None = None  # replaces the streamed answer (a refusal, a reply not streamed)
    verdicts: tuple[tuple[Claim, Verdict], ...] = ()  # a judge's rulings, in its order
    drop: bool = False  # markers ruled unsupported were removed
    # Each field read as missing because it held what we never write: why, in words.
    problems: Mapping[str, str] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The record's fields as the log writes them (the writer adds ``hook``)."""
        written: dict[str, Any] = {"state": self.state, "text": self.text}
        if self.verdicts:
            written["verdicts"] = [_verdict(claim, verdict) for claim, verdict in self.verdicts]
        if self.drop:
            written["drop"] = True
        return written

    @classmethod
    def read(cls, record: Mapping[str, Any]) -> FinishRecord:
        """The record in ``record`` (a log's ``finish`` line, parsed), by the module's rule."""
        problems: dict[str, str] = {}
        state = record.get("state")
        if state not in _STATES:
            shown = " or ".join(repr(name) for name in _STATES)
            why = (
                "it has no 'state'" if "state" not in record else f"state: Input should be {shown}"
            )
            problems["state"] = why
            state = None
        text = record.get("text")
        if text is not None and not isinstance(text, str):
            problems["text"] = "its text is not text"
            text = None
        drop = record.get("drop", False)
        if not isinstance(drop, bool):
            problems["drop"] = "its drop is not true or false"
            drop = False
        return cls(
            state=state,
            text=text,
            verdicts=_verdicts(record.get("verdicts") or [], problems),
            drop=drop,
            problems=problems,
        )


def _verdict(claim: Claim, verdict: Verdict) -> dict[str, Any]:
    # The passage is in the log already (the retrieval's documents): its source's n finds it.
    return {
        "sentence": claim.sentence,
        "source_n": claim.source_n,
        "quote_span": list(verdict.quote_span),
        "score": verdict.score,
        "supported": verdict.supported,
    }


def _verdicts(value: object, problems: dict[str, str]) -> tuple[tuple[Claim, Verdict], ...]:
    if not isinstance(value, list):
        problems["verdicts"] = "its verdicts are not a list"
        return ()
    read = []
    for number, item in enumerate(value, start=1):
        ruling = _ruling(item)
        if isinstance(ruling, str):
            problems[f"verdict {number}"] = ruling
            return ()
        read.append(ruling)
    return tuple(read)


def _ruling(item: object) -> tuple[Claim, Verdict] | str:
    """One verdict as the handler was given it, or why it cannot be."""
    if not isinstance(item, Mapping):
        return "it is not an object"
    for name in ("sentence", "source_n", "quote_span", "score", "supported"):
        if name not in item:
            return f"it has no {name!r}"
    sentence, source_n, span = item["sentence"], item["source_n"], item["quote_span"]
    score, supported = item["score"], item["supported"]
    if not isinstance(sentence, str):
        return "its sentence is not text"
    if not _whole(source_n):
        return "its source_n is not a whole number"
    if not isinstance(span, Sequence) or len(span) != 2 or not all(map(_whole, span)):
        return "its quote_span is not two whole numbers"
    number = finite_number(score)
    if number is None:
        return "its score is not a finite number"
    if not isinstance(supported, bool):
        return "its supported is not true or false"
    claim = Claim(sentence, source_n, "")
    return claim, Verdict((span[0], span[1]), number, supported)


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
