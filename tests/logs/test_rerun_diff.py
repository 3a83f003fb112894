"""What a rerun asks and how its answer compares with the log's (callbacks/rerun_diff.py):
values in, values out, no file, store or model."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callbacks.events import DoneData, DoneState, Reference, Timings
from callbacks.log_header import LogHeader
from callbacks.rerun_diff import (
    AnswerChange,
    compare_answers,
    recorded_request,
    summarize_reruns,
    summary_line,
    text_diff,
)
from pipelines.core.errors import EventLogError


def ref(key: str, n: int) -> Reference:
    """A reference by its id: ``R-HSA-...`` an entity, anything starting with / a page."""
    identifier = {"url": key} if key.startswith("/") else {"st_id": key}
    return Reference(n=n, source_n=n, display_name=f"name of {key}", collection="reactome",
                     **identifier)  # fmt: skip


def done(ids: list[str], state: DoneState = "answered", text: str = "An answer [1].") -> DoneData:
    references = [ref(key, n) for n, key in enumerate(ids, start=1)]
    return DoneData(state=state, text=text, references=references, timings=Timings(total_ms=1.0))


def ids(references: tuple[Reference, ...]) -> list[str]:
    return [reference.st_id or reference.url or "" for reference in references]


# --- comparing two answers -------------------------------------------------------------------


def test_the_same_answer_has_no_change() -> None:
    answer = done(["R-HSA-1", "/userguide/analysis", "R-HSA-3"])
    change = compare_answers(answer, answer)
    assert change == AnswerChange(state_before="answered", state_after="answered")
    assert not change.differs
    assert not change.text_changed


def test_added_and_removed_are_named_by_id_with_their_numbers() -> None:
    change = compare_answers(done(["R-HSA-1", "R-HSA-2"]), done(["R-HSA-2", "/userguide/faq"]))
    assert ids(change.added) == ["/userguide/faq"]
    assert [r.n for r in change.added] == [2]
    assert ids(change.removed) == ["R-HSA-1"]
    assert [r.n for r in change.removed] == [1]
    # R-HSA-2 went from [2] to [1] only because R-HSA-1 before it is gone: not a move.
    assert change.moved == ()
    assert change.references_changed
    assert change.differs
    assert not change.state_changed


def test_a_reference_put_ahead_of_the_others_is_the_one_that_moved() -> None:
    change = compare_answers(
        done(["R-HSA-1", "R-HSA-2", "R-HSA-3"]), done(["R-HSA-3", "R-HSA-1", "R-HSA-2"])
    )
    assert [(m.id, m.before, m.after) for m in change.moved] == [("R-HSA-3", 3, 1)]
    assert change.added == change.removed == ()
    assert change.differs


def test_a_state_change_alone_differs() -> None:
    change = compare_answers(done([], "nothing_found"), done([], "failed"))
    assert (change.state_before, change.state_after) == ("nothing_found", "failed")
    assert change.state_changed
    assert change.differs
    assert not change.references_changed


def test_new_wording_with_the_same_sources_is_shown_but_does_not_differ() -> None:
    before = done(["R-HSA-1"], text="ABCA1 exports cholesterol [1]. HDL stays low.")
    after = done(["R-HSA-1"], text="ABCA1 exports cholesterol [1]. HDL is almost absent.")
    change = compare_answers(before, after)
    assert change.text_changed
    assert not change.differs
    # One sentence a line: the unchanged first sentence is context, not a change.
    assert "-HDL stays low." in change.text_diff
    assert "+HDL is almost absent." in change.text_diff
    assert " ABCA1 exports cholesterol [1]." in change.text_diff


def test_text_diff_is_a_unified_diff_naming_both_sides() -> None:
    assert text_diff("Same.", "Same.") == []
    diff = text_diff("One. Two.\nThree!", "One. Two?\nThree!")
    assert diff[:2] == ["--- recorded", "+++ rerun"]
    assert [line for line in diff if line[:1] in "+-" and line[:3] not in ("---", "+++")] == [
        "-Two.",
        "+Two?",
    ]


def test_as_json_says_what_ci_reads() -> None:
    change = compare_answers(done(["R-HSA-1"]), done(["R-HSA-2"], "answered", "Other [1]."))
    assert change.as_json() == {
        "state": {"before": "answered", "after": "answered"},
        "references": {
            "added": [{"id": "R-HSA-2", "n": 1, "display_name": "name of R-HSA-2",
                       "collection": "reactome"}],
            "removed": [{"id": "R-HSA-1", "n": 1, "display_name": "name of R-HSA-1",
                         "collection": "reactome"}],
            "moved": [],
        },
        "text_changed": True,
        "differs": True,
        "model": {"before": None, "after": None},
    }  # fmt: skip


ID_LISTS = st.lists(st.integers(1, 12).map(lambda i: f"R-HSA-{i}"), unique=True, max_size=8)


@given(ID_LISTS, ID_LISTS)
def test_added_removed_and_moved_explain_the_new_order(first: list[str], second: list[str]) -> None:
    change = compare_answers(done(first), done(second))
    assert set(ids(change.added)) == set(second) - set(first)
    assert set(ids(change.removed)) == set(first) - set(second)
    moved = {m.id for m in change.moved}
    # What neither moved nor came or went keeps its order: the rest explain the new one.
    stayed = [key for key in first if key in second and key not in moved]
    assert stayed == [key for key in second if key in first and key not in moved]
    # ...and no fewer moves would: as many stay as in the longest order both share.
    assert len(stayed) == longest_shared_order(first, second)
    assert change.differs == (first != second)


def longest_shared_order(first: list[str], second: list[str]) -> int:
    """By brute force: the most of ``first``'s ids that ``second`` gives in the same order."""
    shared = [key for key in first if key in second]
    for size in range(len(shared), 0, -1):
        for kept in itertools.combinations(shared, size):
            if list(kept) == [key for key in second if key in kept]:
                return size
    return 0


# --- what the log says to ask ----------------------------------------------------------------


def header(**values: Any) -> LogHeader:
    base: dict[str, Any] = {
        "request_id": "r1",
        "question": "What does ABCA1 do?",
        "normalized_question": "what does abca1 do?",
        "history": [],
        "collections": ["auto"],
        "releases": {"reactome": {"version": "reactome__v1"}},
        "options": {"llm": "extractive", "cite_urls": False, "live_citations": True},
    }
    return LogHeader.read(base | values)


def test_a_header_asks_its_question_with_its_history_collections_and_options() -> None:
    recorded = recorded_request(
        header(
            history=[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
            collections=["reactome", "disease_variants"],
        )
    )
    assert recorded.question == "What does ABCA1 do?"
    options = recorded.options
    assert options.history == (("user", "Hi"), ("assistant", "Hello"))
    assert options.collections == ("reactome", "disease_variants")
    assert (options.cite_urls, options.live_citations) == (False, True)
    # The releases the log names are not pinned: the rerun answers from the current ones.
    assert options.versions is None


def test_auto_collections_let_the_expander_route_again() -> None:
    assert recorded_request(header()).options.collections is None
    bare = recorded_request(LogHeader.read({"request_id": "r2", "question": "What is apoptosis?"}))
    assert bare.options.collections is None
    assert (bare.options.cite_urls, bare.options.live_citations) == (None, False)


def test_the_normalized_question_stands_in_for_a_missing_one() -> None:
    assert recorded_request(header(question=None)).question == "what does abca1 do?"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"question": None, "normalized_question": None}, "names no question"),
        ({"question": 7, "normalized_question": ""}, "names no question"),
        ({"history": "earlier"}, "history is not a list"),
        ({"history": [{"role": "system", "content": "x"}]}, "history turn 1"),
        ({"history": [{"role": "user"}]}, "history turn 1"),
        ({"collections": "reactome"}, "collections are not a list"),
    ],
)
def test_a_header_we_did_not_write_is_a_log_error(values: dict[str, Any], message: str) -> None:
    with pytest.raises(EventLogError, match=message) as raised:
        recorded_request(header(**values), "x.jsonl")
    assert str(raised.value).startswith("x.jsonl")


# --- many reruns ----------------------------------------------------------------------------


def test_the_summary_counts_references_state_text_and_the_skipped() -> None:
    same = compare_answers(done(["R-HSA-1"]), done(["R-HSA-1"]))
    refs = compare_answers(done(["R-HSA-1"]), done(["R-HSA-2"]))
    state = compare_answers(done(["R-HSA-1"]), done([], "nothing_found"))
    worded = compare_answers(done(["R-HSA-1"]), done(["R-HSA-1"], text="Reworded [1]."))
    summary = summarize_reruns([same, refs, state, worded, None])
    assert summary == {
        "logs": 5,
        "compared": 4,
        "skipped": 1,
        "changed": 2,
        "references_changed": 2,
        "state_changed": 1,
        "text_changed": 1,
        "model_changed": 0,
        "recorded_models": {},
        "current_model": None,
    }
    assert summary_line(summary) == (
        "2 of 4 answers changed their references, 1 their state (1 their text); "
        "1 log(s) skipped: unreadable or without a done event"
    )
    assert summary_line(summarize_reruns([])) == (
        "0 of 0 answers changed their references, 0 their state (0 their text)"
    )


def test_an_answer_recorded_by_another_model_is_counted_and_named() -> None:
    def rerun(model_before: str | None) -> AnswerChange:
        return compare_answers(
            done([], "failed"), done(["R-HSA-1"]),
            model_before=model_before, model_after="extractive",
        )  # fmt: skip

    changes = [rerun("openai:fake-model")] * 8 + [rerun("extractive"), rerun(None)]
    assert changes[0].model_changed
    assert not changes[-2].model_changed
    assert not changes[-1].model_changed  # a log that names no model: nothing to say
    summary = summarize_reruns(changes)
    assert summary["model_changed"] == 8
    assert summary["recorded_models"] == {"openai:fake-model": 8}
    assert summary_line(summary) == (
        "10 of 10 answers changed their references, 10 their state (0 their text); "
        "8 recorded with another model than the current extractive: openai:fake-model"
    )
    two = summarize_reruns([rerun("openai:a"), rerun("openai:b"), rerun("openai:b")])
    assert summary_line(two).endswith(
        "3 recorded with another model than the current extractive: openai:a (1), openai:b (2)"
    )


def test_a_language_the_request_named_is_named_again_and_a_detected_one_detected_again() -> None:
    options = {"llm": "extractive", "language": "es", "language_from": "request"}
    assert recorded_request(header(options=options)).options.language == "es"
    detected = {**options, "language_from": "question"}
    assert recorded_request(header(options=detected)).options.language is None
    # An altered header's language is not passed on to be refused.
    altered = {**options, "language": "es-../../x"}
    assert recorded_request(header(options=altered)).options.language is None
