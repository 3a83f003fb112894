"""The stream invariants of docs/contract.md, checked on every stream a test produces."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from callbacks.events import (
    CitationEvent,
    DoneEvent,
    ErrorEvent,
    Event,
    ReferenceEvent,
    StartEvent,
    TokenEvent,
)
from pipelines.citations.finalize import cited_numbers, marker_clusters


def check_stream(events: Sequence[Event]) -> DoneEvent:
    """Assert every invariant a client may rely on; return the ``done`` event."""
    assert events, "no events"
    assert [e.seq for e in events] == list(range(1, len(events) + 1)), "seq must be 1..n"
    assert len({e.request_id for e in events}) == 1, "one request_id per stream"
    assert isinstance(events[0], StartEvent), "start comes first"
    done = events[-1]
    assert isinstance(done, DoneEvent), "done comes last"
    assert sum(isinstance(e, DoneEvent) for e in events) == 1, "done is unique"
    errors = [i for i, e in enumerate(events) if isinstance(e, ErrorEvent)]
    assert errors in ([], [len(events) - 2]), "an error comes right before done, at most once"
    assert (done.data.state == "failed") == bool(errors), "failed exactly when there was an error"
    assert all(b.t_ms >= a.t_ms for a, b in itertools.pairwise(events))

    citations = [e for e in events if isinstance(e, CitationEvent)]
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    if citations and tokens:
        assert citations[-1].seq < tokens[0].seq, "every citation precedes the first token"
    assert [c.data.n for c in citations] == list(range(1, len(citations) + 1))

    references = done.data.references
    assert [r.n for r in references] == list(range(1, len(references) + 1))
    assert all(1 <= n <= len(references) for n in cited_numbers(done.data.text)), (
        "every marker in done.text points at a reference"
    )
    early = {c.data.n: c.data for c in citations}
    for reference in references:
        source = early.get(reference.source_n)
        assert source is not None, "a reference comes from an early citation"
        assert (source.st_id, source.url, source.display_name) == (
            reference.st_id,
            reference.url,
            reference.display_name,
        )
    if done.data.state == "answered" and cited_numbers(done.data.text):
        assert len(references) == len(set(cited_numbers(done.data.text)))
    _check_evidence(done)
    live = events[0].data.options.get("live_citations") is True
    if live:
        _check_live(events, done)
    else:
        assert not any(isinstance(e, ReferenceEvent) for e in events), "reference: live only"
    return done


def _check_live(events: Sequence[Event], done: DoneEvent) -> None:
    """The invariants of live citation numbering (docs/contract.md)."""
    sent: list[ReferenceEvent] = []
    announced: set[int] = set()  # references sent since the last token
    streamed = ""
    for event in events:
        if isinstance(event, ReferenceEvent):
            assert event.data.n == len(sent) + 1, "references come in final order"
            sent.append(event)
            announced.add(event.data.n)
        elif isinstance(event, TokenEvent):
            before = set(cited_numbers(streamed))
            streamed += event.data.text
            new = {n for n in cited_numbers(streamed) if n not in before}
            assert all(1 <= n <= len(sent) for n in new), (
                "every marker in a token names a reference already sent"
            )
            assert new == announced, "a reference comes right before the token first citing it"
            announced = set()
    assert not announced, "no reference without a token citing it"
    if done.data.state in ("answered", "failed"):
        assert streamed == done.data.text, "the token texts joined are exactly done.text"
    else:
        assert not streamed, "a refused or nothing-found answer streams no tokens"
    if sent:
        assert [r.data for r in sent] == done.data.references, "references are what was sent"
        last_citation = max(e.seq for e in events if isinstance(e, CitationEvent))
        assert sent[0].seq > last_citation, "references follow every citation"
    else:
        assert not cited_numbers(done.data.text), "a cited source was announced"
        early = [e.data for e in events if isinstance(e, CitationEvent)]
        if done.data.state == "answered":
            assert [(r.source_n, r.n) for r in done.data.references] == [
                (c.n, c.n) for c in early
            ], "nothing cited: the untouched list"
        else:
            assert not done.data.references, "a failed answer lists only what it cites"


def _check_evidence(done: DoneEvent) -> None:
    """Evidence (docs/contract.md): only an answer has it, one item per (sentence, cited
    reference), each sentence a piece of done.text that cites the item's reference."""
    data = done.data
    if data.state != "answered":
        assert not data.evidence, "only an answer carries evidence"
    pairs = [(tuple(item.sentence), item.n) for item in data.evidence]
    assert len(pairs) == len(set(pairs)), "one item per (sentence, cited reference)"
    assert pairs == sorted(pairs, key=lambda pair: pair[0][0]), "evidence in reading order"
    # Markers as the whole text reads them: a piece alone can pair backticks differently.
    markers = marker_clusters(data.text, len(data.references))
    for item in data.evidence:
        start, end = item.sentence
        assert any(
            start <= first and last <= end and item.n in numbers for first, last, numbers in markers
        ), "the sentence cites the item's n"
        assert item.quote_span[1] - item.quote_span[0] == len(item.quote)
