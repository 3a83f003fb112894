"""The retrieval record as a table for the terminal: ``replay --candidates`` and
``logs show --candidates``.

One row per candidate, in the record's order (best fused first): the ``n`` it was cited by,
its outcome (``kept``, or why it was dropped), its collection and id, its title (cut to fit),
its fused score, its similarity to the question and its score, then its dense/keyword ranks
for each query searched (``-`` where that search did not find it). A log altered by hand
prints what can be read of it rather than failing.
"""

from __future__ import annotations

from collections.abc import Sequence

from callbacks.log import LogContents
from callbacks.log_records import read_retrieval_record
from pipelines.retrieval.retrieval_record import Candidate, CandidateRanks, RetrievalRecord

__all__ = ["TITLE_WIDTH", "candidates_table", "candidates_text"]

TITLE_WIDTH = 36
NO_RECORD = (
    "no retrieval record in this log: it predates the record, its request was refused or "
    "failed before the search, or another retriever answered it"
)


def candidates_text(contents: LogContents) -> str:
    """The table of the log's retrieval record, or one line saying it has none."""
    record = read_retrieval_record(contents)
    return NO_RECORD if record is None else candidates_table(record)


def _cut(text: str, width: int) -> str:
    text = " ".join(text.split())  # a title is one line, whatever it holds
    return text if len(text) <= width else text[: width - 1] + "…"


def _number(value: float | None) -> str:
    return "?" if value is None else f"{value:.4f}"


def _rank(value: int | None) -> str:
    return "-" if value is None else str(value)


def _row(candidate: Candidate, queries: int) -> list[str]:
    n = candidate.n
    ranks = [*candidate.ranks, *[CandidateRanks()] * (queries - len(candidate.ranks))]
    return [
        "" if n is None else f"[{n}]",
        candidate.outcome or "?",
        candidate.collection or "?",
        candidate.st_id or candidate.url or candidate.chunk_id or "?",
        _cut(candidate.title, TITLE_WIDTH),
        _number(candidate.fused),
        _number(candidate.similarity),
        _number(candidate.score),
        *(f"{_rank(rank.dense)}/{_rank(rank.keyword)}" for rank in ranks),
    ]


def _aligned(rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return [
        "  ".join(
            cell.rjust(width) if column in right else cell.ljust(width)
            for column, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]


def _known(value: int | None) -> str:
    return "?" if value is None else str(value)


def candidates_table(record: RetrievalRecord) -> str:
    """The record as text: what was searched, how many candidates, then the table."""
    queries = record.queries
    candidates = record.candidates
    lines = [f"searched for (q{number}) {query}" for number, query in enumerate(queries, start=1)]
    lines.append(
        f"in {', '.join(record.collections) or '?'}: {_known(record.considered)} candidates "
        f"found, {_known(record.ranked)} read in full and ranked, {len(candidates)} shown "
        f"(the {_known(record.bound)} best fused, and every one given to the model)"
    )
    width = max([len(queries), *(len(c.ranks) for c in candidates)])
    header = ["n", "outcome", "collection", "id", "title", "fused", "similarity", "score"]
    header += [f"q{number} d/k" for number in range(1, width + 1)]
    rows = [header, *(_row(candidate, width) for candidate in candidates)]
    lines += _aligned(rows, right={0, 5, 6, 7})
    kept = sum(1 for c in candidates if c.outcome == "kept")
    lines.append(
        f"{kept} kept (the citations, by n); d/k: the dense and keyword rank in its "
        "collection for each query, - where that search did not find it"
    )
    return "\n".join(lines)
