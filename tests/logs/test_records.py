"""The log's retrieval and finish records typed (pipelines/retrieval/retrieval_record.py,
callbacks/finish_record.py): what is written reads back as itself, and a record altered by
hand reads as what it still says, each field it cannot use named, by the log header's one
tolerance rule."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from callbacks.finish_record import FinishRecord
from pipelines.evidence.claims import Claim, Verdict
from pipelines.retrieval.retrieval_record import (
    OUTCOMES,
    Candidate,
    CandidateRanks,
    RetrievalRecord,
    candidate_outcomes,
)


def written(multilingual: bool) -> RetrievalRecord:
    return RetrievalRecord(
        queries=("What does ABCA1 do?", "ABCA1 cholesterol efflux"),
        collections=("reactome",),
        bound=50,
        considered=12,
        ranked=9,
        candidates=(
            Candidate(
                collection="reactome",
                chunk_id="reactome:R-HSA-1:0",
                st_id="R-HSA-1",
                title="ABCA1 transports cholesterol",
                ranks=(CandidateRanks(1, 2, 3 if multilingual else None), CandidateRanks()),
                fused=0.0325,
                similarity=0.71,
                keyword_evidence=0.05,
                score=0.76,
                outcome="kept",
                n=1,
            ),
            Candidate(
                collection="userguide",
                chunk_id="userguide:/x:0",
                url="/x",
                ranks=(CandidateRanks(keyword=4), CandidateRanks(dense=7)),
                fused=0.01,
                similarity=0.2,
                keyword_evidence=0.0,
                score=0.2,
                outcome="below_threshold",
            ),
        ),
        multilingual=multilingual,
    )


def test_a_written_record_reads_back_as_itself_through_json() -> None:
    for multilingual in (False, True):
        record = written(multilingual)
        data = json.loads(json.dumps(record.record()))
        assert RetrievalRecord.read(data) == record
        ranks = [rank for candidate in data["candidates"] for rank in candidate["ranks"]]
        # An English question's record has no multilingual rank at all, as before.
        assert all(("multilingual" in rank) is multilingual for rank in ranks)
        assert data["read"] == 9  # the log's name for how many were read and ranked


def test_an_altered_record_reads_what_it_still_says_and_names_the_rest() -> None:
    data: dict[str, Any] = written(False).record()
    data["bound"] = "50"
    data["queries"] = "not a list"
    data["candidates"][0].update(fused=float("nan"), outcome="promoted", n=True)
    data["candidates"][0]["score"] = 10**400  # JSON reads it whole: too large for a float
    data["candidates"][1]["ranks"] = [{"dense": "7"}, "first"]
    data["candidates"].append("not an object")
    read = RetrievalRecord.read(data)
    assert (read.bound, read.queries, read.considered, read.ranked) == (None, (), 12, 9)
    first, second, third = read.candidates
    assert (first.fused, first.outcome, first.n) == (None, None, None)
    assert (first.st_id, first.similarity, first.ranks[0].dense) == ("R-HSA-1", 0.71, 1)
    assert second.ranks == (CandidateRanks(), CandidateRanks())
    assert third == Candidate()
    assert set(read.problems) == {
        "bound",
        "queries",
        "candidate 1.fused",
        "candidate 1.score",
        "candidate 1.outcome",
        "candidate 1.n",
        "candidate 2 rank 1.dense",
        "candidate 2.rank 2",
        "candidate 3",
    }
    assert read.problems["candidate 1.fused"] == "candidate 1's fused is not a finite number"
    assert read.problems["bound"] == "its bound is not a whole number"


def test_a_record_of_the_wrong_shape_is_empty_with_its_problem() -> None:
    read = RetrievalRecord.read({"candidates": {"a": 1}})
    assert read.candidates == ()
    assert read.problems == {"candidates": "its candidates are not a list"}
    assert RetrievalRecord.read({}) == RetrievalRecord()


def test_a_finish_record_reads_back_as_itself_and_writes_only_what_it_has() -> None:
    ruling = (Claim("ABCA1 exports cholesterol.", 2, ""), Verdict((4, 31), 0.81, True))
    for finish in (
        FinishRecord("answered"),
        FinishRecord("refused", "I can't advise on your own care."),
        FinishRecord("answered", None, (ruling,), drop=True),
    ):
        data = json.loads(json.dumps(finish.record()))
        assert FinishRecord.read(data) == finish
    assert FinishRecord("answered").record() == {"state": "answered", "text": None}


def test_an_altered_finish_record_names_what_replay_cannot_use() -> None:
    read = FinishRecord.read(
        {"state": "weird", "text": 7, "drop": "yes", "verdicts": [{"sentence": "x"}]}
    )
    assert (read.state, read.text, read.verdicts, read.drop) == (None, None, (), False)
    assert read.problems == {
        "state": "state: Input should be 'answered' or 'nothing_found' or 'refused' or 'failed'",
        "text": "its text is not text",
        "drop": "its drop is not true or false",
        "verdict 1": "it has no 'source_n'",
    }
    assert FinishRecord.read({}).problems == {"state": "it has no 'state'"}
    huge = {"sentence": "x", "source_n": 1, "quote_span": [0, 1], "score": 10**400}
    huge["supported"] = True
    assert FinishRecord.read({"state": "answered", "verdicts": [huge]}).problems == {
        "verdict 1": "its score is not a finite number"
    }


class _Whole(int):
    """An int of another type, as a record handed over in the process may hold (an enum's)."""


# What a log altered by hand may hold in a candidate's field: what we write, and what we never
# do (a number as text, a bool, NaN, an integer too large for a float, a list).
_ANY_VALUE = st.one_of(
    st.none(),
    st.text(max_size=3),
    st.booleans(),
    st.integers(-3, 3),
    st.integers(-3, 3).map(_Whole),
    st.just(10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.lists(st.integers(), max_size=1),
)
_ROW = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "st_id": _ANY_VALUE,
            "url": _ANY_VALUE,
            "chunk_id": _ANY_VALUE,
            "score": _ANY_VALUE,
            "n": _ANY_VALUE,
            "outcome": st.one_of(st.sampled_from(OUTCOMES), _ANY_VALUE),
        },
    ),
    _ANY_VALUE,  # not an object
)


@given(st.lists(_ROW, max_size=6))
def test_the_outcomes_a_trace_reads_are_what_the_full_reading_says(rows: list[Any]) -> None:
    data = {"candidates": rows}
    assert [tuple(item) for item in candidate_outcomes(data)] == [
        (c.st_id or c.url or c.chunk_id, c.outcome, c.score, c.n)
        for c in RetrievalRecord.read(data).candidates
        if c.outcome is not None
    ]
    # Read briefly, the record leaves its candidates to candidate_outcomes.
    assert RetrievalRecord.read(data, brief=True).candidates == ()
