"""The log page's view of one log (callbacks/log_view.py), built from logs made in memory:
what the page will say about an answer, without a file, a server or a browser."""

from __future__ import annotations

import json
from typing import Any

from callbacks.events import (
    CitationData,
    CitationEvent,
    DoneData,
    DoneEvent,
    ErrorData,
    ErrorEvent,
    Event,
    Reference,
    ReferenceEvent,
    StartData,
    StartEvent,
    Timings,
    TokenData,
    TokenEvent,
    Usage,
)
from callbacks.log import LogContents
from callbacks.log_header import LogHeader
from callbacks.log_view import SUMMARY_CHARS, log_view, shorten, timeline
from pipelines.core.tags import ANSWER_TAG, EXPANSION_RECORD, RETRIEVAL_RECORD

RID = "req-view"
QUESTION = "What does ABCA1 do, and <b>why</b>?"
ABCA1 = {"st_id": "R-HSA-5682113", "display_name": "Defective ABCA1 causes TGD"}
VARIANT = {"st_id": "R-HSA-5682201", "display_name": "ABCA1 W590S [plasma membrane]"}
CDK5 = {"st_id": "R-HSA-8862803", "display_name": "Deregulated CDK5 in AD"}


class Recorder:
    """Events numbered and timed as a handler numbers them."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, kind: type[Any], data: Any, t_ms: float) -> None:
        seq = len(self.events) + 1
        self.events.append(kind(seq=seq, request_id=RID, t_ms=t_ms, data=data))


def candidate(source: dict[str, str], outcome: str, n: int | None, **extra: Any) -> dict[str, Any]:
    return {
        "collection": "reactome", "st_id": source["st_id"], "url": None,
        "title": source["display_name"], "chunk_id": f"reactome:{source['st_id']}:0",
        "ranks": [{"dense": 1, "keyword": 2}, {"dense": 3, "keyword": None}],
        "fused": 0.0325, "similarity": 0.61, "keyword_evidence": 0.1, "score": 0.71,
        "outcome": outcome, "n": n, **extra,
    }  # fmt: skip


RECORD = {
    "queries": [QUESTION, "ABCA1"],
    "collections": ["reactome"],
    "bound": 50,
    "considered": 120,
    "read": 40,
    "candidates": [
        candidate(CDK5, "kept", 1),
        candidate(ABCA1, "kept", 2),
        candidate(ABCA1, "runner_up", 2),
        candidate(VARIANT, "kept", 3),
        candidate(VARIANT, "below_threshold", None),
    ],
}

MESSAGES = [
    {"role": "system", "content": "Answer from the sources."},
    {"role": "user", "content": f"<sources>…</sources>\n{QUESTION}"},
]


def answered_log(*, record: Any = RECORD, tokens: int = 3) -> LogContents:
    """An answer that cited citations 2 and 3 of three, as [1] and [2] (live numbering)."""
    run = "run-answer"
    log = Recorder()
    log.add(StartEvent, StartData(question=QUESTION, collections=["auto"]), 0.1)
    for n, source in enumerate((CDK5, ABCA1, VARIANT), start=1):
        log.add(CitationEvent, CitationData(n=n, collection="reactome", **source), 10.0 + n)
    first = Reference(n=1, source_n=2, collection="reactome", **ABCA1)
    second = Reference(n=2, source_n=3, collection="reactome", **VARIANT)
    log.add(ReferenceEvent, first, 20.0)
    for index in range(tokens):
        log.add(TokenEvent, TokenData(text=f" word{index}"), 21.0 + index)
    log.add(ReferenceEvent, second, 30.0 + tokens)
    log.add(TokenEvent, TokenData(text=" [2]."), 31.0 + tokens)
    text = "ABCA1 exports cholesterol [1]; W590S breaks it [2]."
    timings = Timings(first_token_ms=21.0, retrieval_ms=13.0, total_ms=40.0 + tokens)
    done = DoneData(
        state="answered", text=text, references=[first, second],
        usage=Usage(answer_tokens=tokens + 1, prompt_tokens=12), timings=timings,
    )  # fmt: skip
    log.add(DoneEvent, done, 40.0 + tokens)
    callbacks: list[dict[str, Any]] = [
        {"kind": "callback", "hook": "custom_event", "name": EXPANSION_RECORD,
         "data": {"queries": [QUESTION, "ABCA1"], "collections": ["reactome"]}},
        {"kind": "callback", "hook": "custom_event", "name": RETRIEVAL_RECORD, "data": record},
        {"kind": "callback", "hook": "model_start", "run_id": run, "tags": [ANSWER_TAG],
         "name": "answer_model", "prompt_tokens": 12, "messages": MESSAGES},
        {"kind": "callback", "hook": "llm_new_token", "run_id": run, "token": "ABCA1 [2] "},
        {"kind": "callback", "hook": "llm_new_token", "run_id": run, "token": "W590S [3]."},
    ]  # fmt: skip
    header = {
        "kind": "header", "schema": 1, "request_id": RID, "question": QUESTION,
        "normalized_question": QUESTION, "collections": ["auto"],
        "history": [{"role": "user", "content": "Earlier?"},
                    {"role": "assistant", "content": "Yes [1]."}],
        "releases": {"reactome": {"release": "94", "version": "ra_reactome__1",
                                  "indexes": ["vectors", "bm25"]}},
        "created_at": "2026-12-03T10:00:00.000+00:00",
    }  # fmt: skip
    return LogContents(header=LogHeader.read(header), callbacks=callbacks, events=log.events)


def test_the_view_carries_what_the_page_shows_of_an_answer() -> None:
    feedback = {"request_id": RID, "rating": "down", "comment": "wrong variant", "at": "now"}
    view = log_view(answered_log(), feedback=feedback)
    assert view["request_id"] == RID
    assert view["state"] == "answered"
    assert view["created_at"] == "2026-12-03T10:00:00.000+00:00"
    assert view["question"] == QUESTION  # as asked: the page, not the view, keeps markup inert
    assert [turn["role"] for turn in view["history"]] == ["user", "assistant"]
    assert view["searched"] == {"queries": [QUESTION, "ABCA1"], "collections": ["reactome"]}
    assert view["releases"] == [
        {"collection": "reactome", "release": "94", "version": "ra_reactome__1",
         "indexes": ["vectors", "bm25"]}
    ]  # fmt: skip
    assert view["answer"]["text"] == "ABCA1 exports cholesterol [1]; W590S breaks it [2]."
    assert [(r["n"], r["source_n"]) for r in view["answer"]["references"]] == [(1, 2), (2, 3)]
    assert view["answer"]["error"] is None
    assert view["model"]["input"] == MESSAGES
    assert view["model"]["raw_text"] == "ABCA1 [2] W590S [3]."  # before renumbering
    assert view["timings"]["total_ms"] == 43.0
    assert view["usage"] == {"answer_tokens": 4, "prompt_tokens": 12}
    assert view["feedback"] == feedback
    # What a browser's JSON.parse takes: strict JSON, nothing Python-only.
    assert json.loads(json.dumps(view, allow_nan=False)) == view


def test_the_cited_candidates_are_the_kept_ones_whose_number_a_reference_came_from() -> None:
    candidates = log_view(answered_log())["candidates"]
    assert (candidates["considered"], candidates["read"], candidates["bound"]) == (120, 40, 50)
    rows = [(c["st_id"], c["outcome"], c["n"], c["cited"], c["reference_n"])
            for c in candidates["candidates"]]  # fmt: skip
    assert rows == [
        ("R-HSA-8862803", "kept", 1, False, None),  # kept, numbered, but the answer did not cite it
        ("R-HSA-5682113", "kept", 2, True, 1),  # citation 2 became reference [1]
        ("R-HSA-5682113", "runner_up", 2, False, None),  # context of the same source
        ("R-HSA-5682201", "kept", 3, True, 2),
        ("R-HSA-5682201", "below_threshold", None, False, None),
    ]
    assert candidates["candidates"][0]["ranks"] == [
        {"dense": 1, "keyword": 2},
        {"dense": 3, "keyword": None},
    ]


def test_a_log_without_a_retrieval_record_has_no_candidates() -> None:
    contents = answered_log()
    contents.callbacks = [c for c in contents.callbacks if c.get("name") != RETRIEVAL_RECORD]
    assert log_view(contents)["candidates"] is None


def test_a_long_answer_is_a_few_timeline_rows_and_its_first_token_keeps_its_seq() -> None:
    rows = timeline(answered_log(tokens=5000).events)
    assert [row["type"] for row in rows] == [
        "start", "citation", "citation", "citation", "reference", "token", "reference",
        "token", "done",
    ]  # fmt: skip
    tokens = rows[5]
    assert (tokens["seq"], tokens["seq_last"], tokens["count"]) == (6, 5005, 5000)
    assert (tokens["t_ms"], tokens["t_ms_last"]) == (21.0, 5020.0)
    assert len(tokens["summary"]) <= len("5000 tokens: ") + SUMMARY_CHARS
    assert tokens["summary"].startswith("5000 tokens: word0 word1")
    assert rows[1]["summary"] == "[1] Deregulated CDK5 in AD (reactome, R-HSA-8862803)"
    assert rows[4]["summary"] == "[1] (source 2) Defective ABCA1 causes TGD"
    assert rows[-1]["summary"] == "answered, 2 references"
    assert [row["seq"] for row in rows] == sorted(row["seq"] for row in rows)


def test_the_timeline_is_in_time_order_and_one_token_is_one_row() -> None:
    log = Recorder()
    log.add(StartEvent, StartData(question="q", collections=[]), 0.0)
    log.add(TokenEvent, TokenData(text="only"), 5.0)
    log.add(ErrorEvent, ErrorData(code="timeout", message="the model took too long"), 4.0)
    rows = timeline(log.events)
    assert [(row["type"], row["seq"]) for row in rows] == [("start", 1), ("error", 3), ("token", 2)]
    assert rows[1]["summary"] == "timeout: the model took too long"
    assert rows[2]["summary"] == "1 token: only"


def test_a_log_cut_off_before_done_shows_what_it_had() -> None:
    contents = answered_log()
    contents.events = contents.events[:-1]
    view = log_view(contents)
    assert view["state"] == "incomplete"
    assert view["answer"]["text"] == " word0 word1 word2 [2]."  # the tokens that were sent
    assert [r["n"] for r in view["answer"]["references"]] == [1, 2]
    assert view["timings"] is None
    assert view["usage"] is None


def test_a_refusal_has_no_model_input_and_its_error_is_shown() -> None:
    log = Recorder()
    log.add(StartEvent, StartData(question="q", collections=[]), 0.0)
    log.add(ErrorEvent, ErrorData(code="personal_advice", message="ask a clinician"), 1.0)
    log.add(DoneEvent, DoneData(state="refused", timings=Timings(total_ms=1.0)), 1.0)
    view = log_view(LogContents(header=LogHeader(request_id=RID, question="q"), events=log.events))
    assert view["state"] == "refused"
    assert view["answer"]["error"] == {"code": "personal_advice", "message": "ask a clinician"}
    assert view["model"] == {"input": None, "raw_text": None}
    assert view["candidates"] is None
    assert view["history"] == []
    assert view["searched"]["queries"] == []


def test_a_record_altered_by_hand_reads_as_what_it_still_says() -> None:
    record = {
        "queries": "not a list",
        "bound": "50",
        "candidates": [
            "not an object",
            candidate(ABCA1, "kept", 2, ranks="none", fused=float("nan"), similarity={"x": 1}),
        ],
    }
    view = log_view(answered_log(record=record))
    candidates = view["candidates"]
    assert candidates["queries"] == []
    assert candidates["bound"] is None
    assert candidates["candidates"][0]["outcome"] == ""
    altered = candidates["candidates"][1]
    assert altered["ranks"] == []
    assert altered["fused"] is None
    assert altered["cited"] is True
    json.dumps(view, allow_nan=False)  # still strict JSON


def test_shorten_keeps_one_line_and_marks_a_cut() -> None:
    assert shorten("a\n  b\tc") == "a b c"
    assert shorten("x" * 10, limit=5) == "xxxx…"
