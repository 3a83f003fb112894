"""Why each source: the retrieval record in the event log, through the real pipeline (the
sample corpus in a real Chroma folder, real embeddings, the extractive provider) and the real
``replay --candidates`` / ``logs show --candidates`` commands.

The invariant the record promises: its ``kept`` candidates, in order of ``n``, are exactly the
citation events, in order; every other candidate says why it was not cited.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.embeddings import Embeddings

from callbacks.events import CitationEvent
from callbacks.log import LogContents, read_log
from callbacks.log_records import custom_data, read_retrieval_record, searched_queries
from pipelines.core.options import RequestOptions
from pipelines.core.settings import load_settings
from pipelines.core.tags import RETRIEVAL_RECORD
from pipelines.pipeline import AnswerPipeline
from pipelines.retrieval.retrieval_record import (
    OUTCOMES,
    PendingRecord,
    RetrievalRecord,
    candidate_outcomes,
)
from tests.support.cli import cli
from tests.support.fake_pipeline import ABCA1, make_pipeline

pytestmark = pytest.mark.slow  # real embeddings and Chroma; the CLI tests start processes

# Whose text the model was given: always in the record, whatever its bound.
GIVEN = {"kept", "context", "runner_up"}


def pipeline_for(home: Path, embeddings: Embeddings, **settings: Any) -> AnswerPipeline:
    return AnswerPipeline(
        load_settings(home=home, **settings), embeddings=embeddings, raise_handler_errors=True
    )


def answer(
    pipeline: AnswerPipeline, question: str, request_id: str, **options: Any
) -> tuple[Path, LogContents]:
    list(pipeline.stream(question, request_id=request_id, **options))
    (path,) = (pipeline.settings.logs_dir).glob(f"*-{request_id}.jsonl")
    return path, read_log(path)


def checked_record(path: Path, contents: LogContents) -> dict[str, Any]:
    """The log's record, checked against its citation events and its own rules."""
    typed = read_retrieval_record(contents)
    assert typed is not None, f"{path} has no retrieval record"
    assert not typed.problems
    record = typed.record()
    # The one reader reads back exactly what the retriever wrote.
    assert record == custom_data(contents, RETRIEVAL_RECORD)
    candidates = record["candidates"]
    citations = [e.data for e in contents.events if isinstance(e, CitationEvent)]
    kept = sorted((c for c in candidates if c["outcome"] == "kept"), key=lambda c: c["n"])
    assert [(c["n"], c["st_id"], c["url"], c["collection"], c["title"]) for c in kept] == [
        (data.n, data.st_id, data.url, data.collection, data.display_name) for data in citations
    ]
    assert {c["outcome"] for c in candidates} <= set(OUTCOMES)
    assert all(c["n"] is None for c in candidates if c["outcome"] not in GIVEN)
    assert all(c["n"] is None for c in candidates if c["outcome"] == "context")
    assert {c["n"] for c in candidates if c["outcome"] == "runner_up"} <= {
        *(c["n"] for c in kept),
        None,
    }
    assert len(candidates) <= record["bound"] + sum(c["outcome"] in GIVEN for c in candidates)
    assert record["considered"] >= record["read"] >= len(candidates)
    assert record["queries"] == searched_queries(contents)
    for c in candidates:
        assert len(c["ranks"]) == len(record["queries"])
        # Found by some search, or it would not be a candidate at all.
        assert any(rank["dense"] or rank["keyword"] for rank in c["ranks"])
    # Written before the retriever returned: the log holds it before the first citation.
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    (at,) = [
        number
        for number, line in enumerate(lines)
        if line.get("hook") == "custom_event" and line.get("name") == RETRIEVAL_RECORD
    ]
    first_citation = next(
        (n for n, line in enumerate(lines) if line.get("event", {}).get("type") == "citation"),
        len(lines),
    )
    assert at < first_citation
    return record


def outcomes(record: dict[str, Any]) -> dict[str, int]:
    counted: dict[str, int] = {}
    for candidate in record["candidates"]:
        counted[candidate["outcome"]] = counted.get(candidate["outcome"], 0) + 1
    return counted


@pytest.mark.parametrize(
    ("question", "options", "expected"),
    [
        ("What causes Tangier disease?", {}, {"kept", "below_threshold"}),
        # The user guide's pages go to the model uncited unless urls are cited.
        ("How do I use the pathway browser?", {}, {"context", "runner_up", "duplicate"}),
        ("How do I use the pathway browser?", {"cite_urls": True}, {"kept", "runner_up"}),
        ("What does the BRAF V600E mutation do?", {}, {"kept", "context", "collection_cut"}),
        ("What is the capital of Peru?", {}, {"below_threshold"}),
    ],
    ids=["tangier", "guide-uncited", "guide-cited", "variant", "off-topic"],
)
def test_the_kept_candidates_are_the_citations_in_order(
    request: pytest.FixtureRequest,
    sample_home: Path,
    minilm: Embeddings,
    question: str,
    options: dict[str, Any],
    expected: set[str],
) -> None:
    pipeline = pipeline_for(sample_home, minilm)
    request_id = f"record-{request.node.callspec.id}"
    path, contents = answer(pipeline, question, request_id, **options)
    record = checked_record(path, contents)
    assert expected <= set(outcomes(record))
    if "context" in expected:  # the model got it, unnumbered
        assert all(c["n"] is None for c in record["candidates"] if c["outcome"] == "context")
    if question.startswith("What is the capital"):
        assert not [e for e in contents.events if isinstance(e, CitationEvent)]


def test_a_cut_collection_and_the_cap_say_why_a_candidate_was_dropped(
    sample_home: Path, minilm: Embeddings
) -> None:
    pipeline = pipeline_for(sample_home, minilm)
    path, contents = answer(
        pipeline,
        "What is the role of CDK5 in Alzheimer's disease?",
        "record-cut-and-cap",
        collections=["reactome", "userguide"],
    )
    record = checked_record(path, contents)
    candidates = record["candidates"]
    cut = [c for c in candidates if c["outcome"] == "collection_cut"]
    assert cut
    assert {c["collection"] for c in cut} == {"userguide"}
    # Cut for trailing the other collection's best by more than the margin (0.08).
    best = max(c["similarity"] for c in candidates if c["collection"] == "reactome")
    assert max(c["similarity"] for c in cut) < best - 0.08
    kept = [c for c in candidates if c["outcome"] == "kept"]
    over = [c for c in candidates if c["outcome"] == "over_cap"]
    assert len(kept) == 10  # max_sources, then the rest scored lower
    assert over
    assert max(c["score"] for c in over) <= min(c["score"] for c in kept)


def test_a_smaller_cap_drops_more_over_cap(sample_home: Path, minilm: Embeddings) -> None:
    pipeline = pipeline_for(sample_home, minilm, max_sources=2)
    path, contents = answer(pipeline, "What causes Tangier disease?", "record-cap-2")
    record = checked_record(path, contents)
    assert [c["n"] for c in record["candidates"] if c["outcome"] == "kept"] == [1, 2]
    assert outcomes(record).get("over_cap", 0) >= 3


class _Records(BaseCallbackHandler):
    def __init__(self) -> None:
        self.records: list[Any] = []

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if name == RETRIEVAL_RECORD:
            self.records.append(data)


class _Later(_Records):
    """A handler that reads its records only once the answer has ended, as a trace does."""

    reads_records_later = True


@pytest.mark.parametrize(
    ("question", "options"),
    [
        ("What causes Tangier disease?", {}),
        ("How do I use the pathway browser?", {}),
        ("How do I use the pathway browser?", {"cite_urls": True}),
        ("What does the BRAF V600E mutation do?", {}),
        ("¿Qué causa la enfermedad de Tangier?", {}),
        ("What is the capital of Peru?", {}),
    ],
    ids=["tangier", "guide-uncited", "guide-cited", "variant", "spanish", "off-topic"],
)
def test_a_record_read_later_is_made_later_and_shows_what_the_record_holds(
    sample_home: Path, minilm: Embeddings, question: str, options: dict[str, Any]
) -> None:
    retriever = pipeline_for(sample_home, minilm).own_retriever
    assert retriever is not None
    asked = RequestOptions(**options)
    now, later, beside = _Records(), _Later(), _Later()
    retriever.invoke(question, config={"callbacks": [now]}, options=asked)
    asyncio.run(retriever.ainvoke(question, config={"callbacks": [later]}, options=asked))
    # Sent to handlers that all read later: the record to be made, and made it is the one
    # a handler reading now is sent.
    (pending,) = later.records
    assert isinstance(pending, PendingRecord)
    (record,) = now.records
    assert pending.record() == record
    # What a trace shows of it, made without the ranks, as reading the record gives it.
    brief, kept = pending.brief()
    # Read briefly, a record cannot tell whether the multilingual model searched (that is in
    # its candidates' ranks); made briefly, it still knows.
    made = pending.made()
    assert brief == replace(
        RetrievalRecord.read(record, brief=True), multilingual=made.multilingual
    )
    assert kept == candidate_outcomes(record)
    assert len(kept) == len(record["candidates"])
    # One handler that reads now is enough for every handler to be sent the record itself.
    retriever.invoke(question, config={"callbacks": [beside, _Records()]}, options=asked)
    assert beside.records == [record]


def test_sync_and_async_retrieval_send_the_same_record_in_document_order(
    sample_home: Path, minilm: Embeddings
) -> None:
    retriever = pipeline_for(sample_home, minilm).own_retriever
    assert retriever is not None
    options = RequestOptions(cite_urls=True)
    question = "What does the BRAF V600E mutation do?"
    sync, async_ = _Records(), _Records()
    documents = retriever.invoke(question, config={"callbacks": [sync]}, options=options)
    asyncio.run(retriever.ainvoke(question, config={"callbacks": [async_]}, options=options))
    assert len(sync.records) == 1
    assert sync.records == async_.records
    # Each returned document is one kept (numbered) or context (unnumbered) lead.
    leads = [c for c in sync.records[0]["candidates"] if c["outcome"] in ("kept", "context")]
    by_chunk = {c["chunk_id"]: c for c in leads}
    assert sorted(by_chunk) == sorted(d.id for d in documents if d.id)
    numbers = [by_chunk[str(d.id)]["n"] for d in documents]
    assert [n for n in numbers if n is not None] == list(
        range(1, len([*filter(None, numbers)]) + 1)
    )

    retriever.record_candidates = False
    quiet = _Records()
    assert retriever.invoke(question, config={"callbacks": [quiet]}, options=options) == documents
    assert quiet.records == []


def test_without_a_log_the_record_still_reaches_a_handler_that_listens(
    sample_home: Path, minilm: Embeddings
) -> None:
    # With no log and no trace the pipeline's own handler takes no custom events, and the
    # retriever makes no record for it; a handler of the caller's that takes them gets it.
    question = "What does the BRAF V600E mutation do?"
    listening = _Records()
    quiet = AnswerPipeline(
        load_settings(home=sample_home, event_logs=False), embeddings=minilm,
        callbacks=[listening], raise_handler_errors=True,
    )  # fmt: skip
    events = list(quiet.stream(question))
    assert len(listening.records) == 1
    kept = [c for c in listening.records[0]["candidates"] if c["outcome"] == "kept"]
    citations = [e.data for e in events if isinstance(e, CitationEvent)]
    assert [(c["n"], c["st_id"]) for c in sorted(kept, key=lambda c: c["n"])] == [
        (c.n, c.st_id) for c in citations
    ]
    # The same record the log holds when there is one.
    path, contents = answer(pipeline_for(sample_home, minilm), question, "with-a-log")
    assert listening.records[0] == checked_record(path, contents)


def test_without_a_log_or_a_listener_no_record_is_made(
    sample_home: Path, minilm: Embeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unwanted(**_: Any) -> None:
        raise AssertionError("a record nobody takes was made")

    monkeypatch.setattr("pipelines.retrieval.retriever.PendingRecord", unwanted)
    quiet = AnswerPipeline(
        load_settings(home=sample_home, event_logs=False), embeddings=minilm,
        raise_handler_errors=True,
    )  # fmt: skip
    done = list(quiet.stream("What does the BRAF V600E mutation do?"))[-1]
    assert done.data.state == "answered"  # type: ignore[union-attr]


def test_a_retriever_called_without_the_requests_options_records_nothing(
    sample_home: Path, minilm: Embeddings
) -> None:
    # Handed to a pipeline from outside, it is called with the question alone: it cannot know
    # the request's cite_urls, so numbers it wrote could disagree with the citations.
    own = pipeline_for(sample_home, minilm).own_retriever
    assert own is not None
    outside = AnswerPipeline(
        load_settings(home=sample_home), embeddings=minilm, retriever=own,
        raise_handler_errors=True,
    )  # fmt: skip
    events = list(outside.stream("How do I use the pathway browser?", cite_urls=True))
    (path,) = (sample_home / "logs").glob(f"*-{events[-1].request_id}.jsonl")
    contents = read_log(path)
    assert any(isinstance(e, CitationEvent) for e in contents.events)
    assert read_retrieval_record(contents) is None
    shown = cli(sample_home, "replay", path.name, "--candidates")
    assert shown.stdout.startswith("no retrieval record in this log")


def test_replay_and_logs_show_print_the_candidates_as_a_table(
    sample_home: Path, minilm: Embeddings
) -> None:
    pipeline = pipeline_for(sample_home, minilm)
    path, contents = answer(
        pipeline,
        "What is the role of CDK5 in Alzheimer's disease?",
        "record-table",
        collections=["reactome", "userguide"],
    )
    record = checked_record(path, contents)

    replayed = cli(sample_home, "replay", "--candidates", str(path))
    shown = cli(sample_home, "logs", "show", "--candidates", "record-table")
    assert replayed.returncode == shown.returncode == 0, replayed.stderr + shown.stderr
    assert replayed.stdout == shown.stdout
    lines = replayed.stdout.splitlines()
    assert lines[0] == f"searched for (q1) {record['queries'][0]}"
    (header,) = [line for line in lines if line.lstrip().startswith("n  outcome")]
    assert "q1 d/k" in header
    assert "similarity" in header
    citations = [e.data for e in contents.events if isinstance(e, CitationEvent)]
    rows = [line for line in lines if line.lstrip().startswith("[")]
    # One numbered row per citation, each naming its id and why (kept), in the record's order.
    kept_rows = [row for row in rows if " kept " in row]
    assert sorted(int(row.split("]")[0].strip(" [")) for row in kept_rows) == [
        data.n for data in citations
    ]
    for data in citations:
        assert any(f"[{data.n}]" in row and str(data.st_id) in row for row in kept_rows)
    assert any("collection_cut" in line and "userguide" in line for line in lines)
    assert any("over_cap" in line for line in lines)
    assert len(lines) == 2 + len(record["queries"]) + 1 + len(record["candidates"])

    check = cli(sample_home, "replay", "--check", str(path))
    assert check.returncode == 0, check.stdout + check.stderr
    assert "replayed identically" in check.stdout


def test_a_log_without_the_record_says_so_in_one_line(isolated_home: Path) -> None:
    # A retriever from outside sends no record.
    pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 exports cholesterol [1].")
    list(pipeline.stream("What does ABCA1 do?", request_id="no-record"))
    (path,) = (isolated_home / "logs").glob("*-no-record.jsonl")
    assert read_retrieval_record(read_log(path)) is None
    for command in (
        ["replay", "--candidates", str(path)],
        ["logs", "show", "--candidates", str(path)],
    ):
        done = cli(isolated_home, *command)
        assert done.returncode == 0, done.stderr
        (line,) = done.stdout.splitlines()
        assert line.startswith("no retrieval record in this log")
