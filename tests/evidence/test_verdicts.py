"""Evidence per citation without a judge: which sentence cites what, what a verdict does to
the markers (flag, drop, live), and that the log replays it. The judges themselves are in
tests/evidence/test_offline_judge.py; the whole pipeline with a miscited answer in
tests/evidence/test_through_the_pipeline.py."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.documents import Document

from callbacks.events import DoneEvent, Event
from callbacks.handler import AnswerEventHandler
from callbacks.log import LogContents
from callbacks.log_header import LogHeader
from callbacks.replay import replay_events
from pipelines.citations.finalize import finalize_citations, strip_out_of_range_markers
from pipelines.citations.sources import Source, number_sources
from pipelines.evidence.claims import (
    Claim,
    Verdict,
    cited_sentences,
    claims_of,
    drop_unsupported,
    evidence_items,
)
from pipelines.evidence.final import final_answer, live_references
from tests.support.invariants import check_stream

PASSAGES = [
    "ABCA1 exports cholesterol to apoA-I. Loss of ABCA1 causes Tangier disease.",
    "CYP11A1 cuts the side chain of cholesterol. It makes pregnenolone.",
    "LCAT esterifies cholesterol in HDL particles.",
]


def _sources(count: int = 3) -> list[Source]:
    documents = [
        Document(page_content=text, metadata={"st_id": f"R-HSA-{n}", "display_name": f"P{n}"})
        for n, text in enumerate(PASSAGES[:count], start=1)
    ]
    return number_sources(documents, cite_urls=False)[0]


def test_a_marker_belongs_to_its_sentence_and_one_opening_a_sentence_to_the_one_before() -> None:
    text = "ABCA1 exports cholesterol [1]. Tangier disease follows. [1][3] LCAT acts [3]."
    found = cited_sentences(text, 3)
    assert [(text[s.span[0] : s.span[1]], s.numbers) for s in found] == [
        ("ABCA1 exports cholesterol [1].", (1,)),
        ("Tangier disease follows. [1][3]", (1, 3)),
        ("LCAT acts [3].", (3,)),
    ]
    assert [s.claim for s in found] == [
        "ABCA1 exports cholesterol.",
        "Tangier disease follows.",
        "LCAT acts.",
    ]


def test_markers_in_code_or_links_or_out_of_range_cite_nothing() -> None:
    text = "Write `[1]` to cite. See [2](https://example.org). Nothing [9]. Real one [2]."
    found = cited_sentences(text, 3)
    assert [(s.claim, s.numbers) for s in found] == [("Real one.", (2,))]


def test_a_sentence_cited_twice_with_one_source_is_one_claim() -> None:
    text = "ABCA1 exports cholesterol [1] to apoA-I [1]."
    assert [(c.sentence, c.source_n) for c in claims_of(text, _sources())] == [
        ("ABCA1 exports cholesterol to apoA-I.", 1)
    ]


_WORDS = st.sampled_from(["ABCA1", "exports", "cholesterol", "LCAT", "acts", "in", "HDL"])
# Where a sentence's markers stand, as models write them: before its full stop, after it,
# or opening a line, a paragraph or a list item (then they cite the sentence they open).
_PLACES = ["inside", "after", "line", "paragraph", "item"]
_SENTENCE = st.tuples(
    st.lists(_WORDS, min_size=2, max_size=6).map(" ".join),
    st.lists(st.integers(1, 4), min_size=0, max_size=3),
    st.sampled_from(_PLACES),
    st.booleans(),  # two numbers written as a range
)


def _markers(numbers: list[int], as_range: bool) -> str:
    if as_range and len(numbers) == 2 and numbers[0] < numbers[1]:
        return f"[{numbers[0]}-{numbers[1]}]"
    return "".join(f"[{n}]" for n in numbers)


def _answer(parts: Sequence[tuple[str, list[int], str, bool]]) -> str:
    pieces = []
    for words, numbers, where, as_range in parts:
        sentence = f"{words[0].upper()}{words[1:]}"
        markers = _markers(numbers, as_range)
        if not markers:
            pieces.append(f"{sentence}.")
        elif where == "inside":
            pieces.append(f"{sentence} {markers}.")
        elif where == "after":
            pieces.append(f"{sentence}. {markers}")
        else:
            opening = {"line": "\n", "paragraph": "\n\n", "item": "\n- "}[where]
            pieces.append(f"{opening}{markers} {sentence}.")
    return " ".join(pieces)


@given(st.lists(_SENTENCE, min_size=1, max_size=5))
def test_the_claims_read_before_the_finalizer_are_the_claims_after_it(
    parts: list[tuple[str, list[int], str, bool]],
) -> None:
    # Verdicts are found on the model's text and looked up on the final one.
    sources = _sources()
    raw = strip_out_of_range_markers(_answer(parts), len(sources))
    final, kept = finalize_citations(raw, sources)
    before = {(c.sentence, c.source_n) for c in claims_of(raw, sources)}
    after = {(c.sentence, c.source_n) for c in claims_of(final, kept)}
    assert after == before
    # So every (sentence, reference) the final text cites finds its verdict.
    cited = {(s.claim, kept[n - 1].n) for s in cited_sentences(final, len(kept)) for n in s.numbers}
    assert {pair for pair in cited if pair[0]} <= before


def test_a_marker_opening_a_line_or_list_item_cites_the_sentence_it_opens() -> None:
    text = "Genes:\n- [1] ABCA1 exports cholesterol.\n- [3] LCAT acts.\n\n[2] HDL forms."
    assert [(s.claim, s.numbers) for s in cited_sentences(text, 3)] == [
        ("ABCA1 exports cholesterol.", (1,)),
        ("LCAT acts.", (3,)),
        ("HDL forms.", (2,)),
    ]


def _verdicts(
    sources: Sequence[Source], text: str, unsupported: set[int]
) -> list[tuple[Claim, Verdict]]:
    return [
        (claim, Verdict((0, 5), 0.2 if claim.source_n in unsupported else 0.9, False))
        if claim.source_n in unsupported
        else (claim, Verdict((0, 5), 0.9, True))
        for claim in claims_of(text, sources)
    ]


def test_drop_removes_only_the_unsupported_numbers_of_a_sentence() -> None:
    sources = _sources()
    text = "ABCA1 exports cholesterol [1, 2]. LCAT acts [2]."
    ruled = {(c.sentence, c.source_n): v for c, v in _verdicts(sources, text, {2})}
    assert drop_unsupported(text, sources, ruled) == "ABCA1 exports cholesterol [1]. LCAT acts."


def test_evidence_items_quote_the_source_exactly_and_number_as_the_text_does() -> None:
    sources = _sources()
    text = "LCAT esterifies cholesterol [1]."
    claim = Claim("LCAT esterifies cholesterol.", 3, PASSAGES[2])
    (item,) = evidence_items(text, [sources[2]], {(claim.sentence, 3): Verdict((0, 45), 0.9, True)})
    assert (item.n, item.sentence, item.quote) == (1, (0, len(text)), PASSAGES[2])


class _Recorder:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.callbacks: list[dict[str, object]] = []

    def record(self, hook: str, arguments: dict[str, object]) -> None:
        self.callbacks.append({"hook": hook, **arguments})


def _answer_with(
    tokens: Sequence[str], unsupported: set[int], *, drop: bool = False, live: bool = False
) -> tuple[DoneEvent, _Recorder]:
    recorder = _Recorder()
    handler = AnswerEventHandler(
        request_id="r1",
        emit=recorder.events.append,
        live_citations=live,
        raise_error=True,
        record=recorder.record,
    )
    handler.start("q", ["auto"], {"live_citations": live})
    retrieval, answer = uuid.uuid4(), uuid.uuid4()
    handler.on_retriever_start(None, "q", run_id=retrieval, tags=["reactome-answers:retrieval"])
    documents = [source.document for source in _sources()]
    handler.on_retriever_end(documents, run_id=retrieval)
    handler.on_chat_model_start(None, [[]], run_id=answer, tags=["reactome-answers:answer"])
    for token in tokens:
        handler.on_llm_new_token(token, run_id=answer)
    verdicts = _verdicts(_sources(), handler.raw_text, unsupported)
    assert [claim for claim, _ in verdicts] == handler.claims()
    done = handler.finish("answered", verdicts=verdicts, drop=drop)
    check_stream(recorder.events)
    return done, recorder


TOKENS = ["LCAT esterifies ", "cholesterol [3]. ", "ABCA1 exports cholesterol [1][2]."]


def test_flag_keeps_an_unsupported_marker_and_says_so() -> None:
    done, _ = _answer_with(TOKENS, unsupported={2})
    data = done.data
    assert data.text == "LCAT esterifies cholesterol [1]. ABCA1 exports cholesterol [2][3]."
    assert [r.source_n for r in data.references] == [3, 1, 2]
    assert [(e.n, e.supported) for e in data.evidence] == [(1, True), (2, True), (3, False)]
    first = data.evidence[0]
    assert data.text[first.sentence[0] : first.sentence[1]] == "LCAT esterifies cholesterol [1]."


def test_drop_removes_the_marker_and_a_source_cited_by_nothing_else() -> None:
    done, _ = _answer_with(TOKENS, unsupported={2}, drop=True)
    data = done.data
    assert data.text == "LCAT esterifies cholesterol [1]. ABCA1 exports cholesterol [2]."
    assert [r.source_n for r in data.references] == [3, 1]
    assert all(e.supported for e in data.evidence)


def test_drop_of_every_marker_leaves_no_references_rather_than_all() -> None:
    done, _ = _answer_with(TOKENS, unsupported={1, 2, 3}, drop=True)
    assert done.data.text == "LCAT esterifies cholesterol. ABCA1 exports cholesterol."
    assert done.data.references == []
    assert done.data.evidence == []


def test_live_answers_carry_the_same_evidence_and_drop_flags_instead() -> None:
    flagged, _ = _answer_with(TOKENS, unsupported={2})
    live, _ = _answer_with(TOKENS, unsupported={2}, drop=True, live=True)
    assert live.data.text == flagged.data.text
    assert live.data.evidence == flagged.data.evidence


@pytest.mark.parametrize("live", [False, True])
def test_a_replay_of_the_log_reproduces_the_evidence(live: bool) -> None:
    done, recorder = _answer_with(TOKENS, unsupported={2}, drop=not live, live=live)
    header = LogHeader(request_id="r1", options={"live_citations": live})
    contents = LogContents(header=header, callbacks=recorder.callbacks, events=recorder.events)
    last = replay_events(contents)[-1]
    assert isinstance(last, DoneEvent)
    assert last.data == done.data.model_copy(update={"timings": last.data.timings})


# --- the finalizer's policy, without a handler ----------------------------------------------


def _ids(sources: Sequence[Source]) -> list[str | None]:
    return [source.st_id for source in sources]


def test_an_answer_keeps_what_it_cites_in_first_citation_order() -> None:
    final = final_answer("answered", "LCAT acts [3]. ABCA1 too [1][9].", _sources(), {})
    assert final.text == "LCAT acts [1]. ABCA1 too [2]."
    assert _ids(final.references) == ["R-HSA-3", "R-HSA-1"]
    assert final.evidence == []


def test_an_answer_citing_nothing_keeps_every_source_and_a_failure_none() -> None:
    assert _ids(final_answer("answered", "No markers.", _sources(), {}).references) == [
        "R-HSA-1",
        "R-HSA-2",
        "R-HSA-3",
    ]
    assert final_answer("failed", "Cut off before a marker", _sources(), {}).references == []
    failed = final_answer("failed", "Cut off after [2] and", _sources(), {})
    assert (failed.text, _ids(failed.references)) == ("Cut off after [1] and", ["R-HSA-2"])


def test_a_refusal_has_no_references_and_no_markers() -> None:
    refused = final_answer("refused", "I cannot advise on that [1].", _sources(), {})
    assert (refused.text, refused.references) == ("I cannot advise on that.", [])


def test_dropping_every_unsupported_marker_leaves_no_references() -> None:
    sources, text = _sources(), "ABCA1 exports cholesterol [2]."
    ruled = {(c.sentence, c.source_n): v for c, v in _verdicts(sources, text, {2})}
    dropped = final_answer("answered", text, sources, ruled, drop=True)
    assert (dropped.text, dropped.references) == ("ABCA1 exports cholesterol.", [])
    flagged = final_answer("answered", text, sources, ruled)
    assert [item.supported for item in flagged.evidence] == [False]


def test_live_references_are_what_was_cited_or_else_the_untouched_list() -> None:
    sources = _sources()
    assert live_references("answered", sources[2:], sources) == sources[2:]
    assert live_references("answered", [], sources) == sources
    assert live_references("failed", [], sources) == []
