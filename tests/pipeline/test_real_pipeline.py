"""The whole pipeline for real: the sample corpus in a real Chroma folder, real embeddings,
the extractive provider, and the ``ask`` command as a user runs it."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings

from callbacks.events import CitationEvent, DoneEvent, ErrorEvent, Event, parse_event
from pipelines.catalog import bundled_dir
from pipelines.catalog.catalog import COLLECTION_NAMES
from pipelines.core.errors import InputError
from pipelines.core.options import RequestOptions
from pipelines.core.settings import load_settings
from pipelines.index import store
from pipelines.index.ingestion import ingest, locate_files
from pipelines.pipeline import AnswerPipeline
from pipelines.retrieval.expander import rule_expansion
from pipelines.retrieval.retriever import RANKINGS, Ranking, ReactomeRetriever
from tests.support.invariants import check_stream
from tests.support.waiting import wait_until

BIN = Path(sys.executable).parent


@pytest.fixture
def pipeline(sample_home: Path, minilm: Embeddings) -> AnswerPipeline:
    return AnswerPipeline(
        load_settings(home=sample_home), embeddings=minilm, raise_handler_errors=True
    )


def ask(pipeline: AnswerPipeline, question: str, **options: Any) -> tuple[list[Event], DoneEvent]:
    events = list(pipeline.stream(question, **options))
    return events, check_stream(events)


def st_ids(done: DoneEvent) -> list[str | None]:
    return [reference.st_id for reference in done.data.references]


def test_tangier_disease_is_answered_with_the_abca1_pathway(pipeline: AnswerPipeline) -> None:
    events, done = ask(pipeline, "What causes Tangier disease?")
    assert done.data.state == "answered"
    assert "R-HSA-5682113" in st_ids(done)
    assert "ABCA1" in done.data.text
    assert "[1]" in done.data.text
    assert any(isinstance(e, CitationEvent) for e in events)


def test_cdk5_in_alzheimers(pipeline: AnswerPipeline) -> None:
    _, done = ask(pipeline, "What is the role of CDK5 in Alzheimer's disease?")
    assert "R-HSA-8862803" in st_ids(done)


def test_a_variant_question_reaches_the_disease_variants(pipeline: AnswerPipeline) -> None:
    _, done = ask(pipeline, "What does the BRAF V600E mutation do?")
    assert done.data.state == "answered"
    assert "V600E" in done.data.text


def test_website_question_has_no_citations_unless_urls_are_cited(pipeline: AnswerPipeline) -> None:
    events, done = ask(pipeline, "How do I use the pathway browser?")
    assert [e for e in events if isinstance(e, CitationEvent)] == []
    assert done.data.state == "answered"
    assert done.data.references == []
    assert "Pathway Browser" in done.data.text

    events, done = ask(pipeline, "How do I use the pathway browser?", cite_urls=True)
    urls = [e.data.url for e in events if isinstance(e, CitationEvent)]
    assert "/userguide/pathway-browser" in urls
    assert all(reference.url and reference.st_id is None for reference in done.data.references)
    assert done.data.references


def test_a_follow_up_uses_the_history(pipeline: AnswerPipeline) -> None:
    history = [("user", "What does ABCA1 do in Tangier disease?"), ("assistant", "It moves...")]
    _, done = ask(pipeline, "Which disease follows when it is defective?", history=history)
    assert "R-HSA-5682113" in st_ids(done)


def test_an_off_topic_question_finds_nothing(pipeline: AnswerPipeline) -> None:
    _, done = ask(pipeline, "What is the capital of Peru?")
    assert done.data.state == "nothing_found"
    assert done.data.references == []


def test_collections_override_the_routing(pipeline: AnswerPipeline) -> None:
    events, _ = ask(pipeline, "What causes Tangier disease?", collections=["userguide"])
    assert all(e.data.collection == "userguide" for e in events if isinstance(e, CitationEvent))


def test_async_and_sync_agree(pipeline: AnswerPipeline) -> None:
    sync = pipeline.invoke("What causes Tangier disease?")
    async_ = asyncio.run(pipeline.ainvoke("What causes Tangier disease?"))
    assert (sync["text"], sync["references"]) == (async_["text"], async_["references"])


def test_not_ingested_is_a_failed_answer_that_says_what_to_do(
    tmp_path: Path, minilm: Embeddings
) -> None:
    empty = AnswerPipeline(load_settings(home=tmp_path / "empty"), embeddings=minilm)
    events = list(empty.stream("What causes Tangier disease?"))
    done = check_stream(events)
    (error,) = [e for e in events if isinstance(e, ErrorEvent)]
    assert error.data.code == "not_ingested"
    assert "ingest --sample" in error.data.message
    assert done.data.state == "failed"


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "reactome-answers"), "--home", str(home), *args],
        capture_output=True, text=True, timeout=300, check=False,
        env={k: v for k, v in os.environ.items() if k != "REACTOME_ANSWERS_HOME"},
    )  # fmt: skip


@pytest.mark.slow  # the installed command
def test_ask_prints_the_answer_then_its_sources(sample_home: Path) -> None:
    result = cli(sample_home, "ask", "What causes Tangier disease?")
    assert result.returncode == 0, result.stderr
    answer, _, sources = result.stdout.partition("\nSources:\n")
    assert "ABCA1" in answer
    assert "[1] Defective ABCA1 causes TGD <https://reactome.org/content/detail/R-HSA-5682113>" in (
        sources
    )


@pytest.mark.slow  # the installed command
def test_ask_events_for_a_website_question(sample_home: Path) -> None:
    # The issue's own check: zero citation events, and a done with no references.
    result = cli(sample_home, "ask", "--events", "How do I use the pathway browser?")
    assert result.returncode == 0, result.stderr
    events = [parse_event(line) for line in result.stdout.splitlines()]
    done = check_stream(events)
    assert not any(isinstance(e, CitationEvent) for e in events)
    assert done.data.references == []

    cited = cli(sample_home, "--cite-urls", "ask", "--events", "How do I use the pathway browser?")
    events = [parse_event(line) for line in cited.stdout.splitlines()]
    check_stream(events)
    assert any(isinstance(e, CitationEvent) and e.data.url for e in events)


@pytest.mark.slow  # the installed command
def test_ask_json_is_the_done_data_with_request_id(sample_home: Path) -> None:
    result = cli(sample_home, "ask", "--json", "What does IDH1 R132H do?")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert {"request_id", "state", "text", "references", "usage", "timings"} <= set(data)
    assert data["state"] == "answered"


@pytest.mark.slow  # the installed command, per failure
def test_ask_failures_are_one_line(tmp_path: Path) -> None:
    home = tmp_path / "nothing here"
    result = cli(home, "ask", "What causes Tangier disease?")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]  # one line
    # The home this command uses, quoted for a shell, so the hint works as it is pasted.
    assert f"reactome-answers --home '{home}' ingest --sample" in result.stderr
    refused = cli(tmp_path, "ask", "   ")
    assert refused.returncode == 1
    assert "empty" in refused.stdout


def test_every_logged_real_answer_replays_identically(
    sample_home: Path, minilm: Embeddings
) -> None:
    from callbacks.log import read_log
    from callbacks.replay import replay_diff
    from pipelines.index import store

    pipeline = AnswerPipeline(load_settings(home=sample_home), embeddings=minilm)
    questions = [
        "What causes Tangier disease?",
        "How do I use the pathway browser?",
        "What does IDH1 R132H do?",
        "What is the capital of Peru?",
        "",
    ]
    request_ids = [
        pipeline.invoke(q, cite_urls=i == 1)["request_id"] for i, q in enumerate(questions)
    ]
    ingested = {
        info.name: {"release": info.release, "version": info.version}
        for info in store.collection_infos(store.open_client(pipeline.settings))
    }
    assert sorted(ingested) == ["disease_variants", "reactome", "userguide"]
    for request_id in request_ids:
        (path,) = (sample_home / "logs").glob(f"*-{request_id}.jsonl")
        contents = read_log(path)
        assert contents.events
        assert replay_diff(contents) == [], path
        releases = contents.header.releases
        assert {
            name: {"release": found["release"], "version": found["version"]}
            for name, found in releases.items()
        } == ingested
        # Which indexes ranked each collection: both, with chunks read from the local table.
        assert all(found["indexes"] == ["vectors", "bm25"] for found in releases.values())
        assert all(found["chunks_from"] == "chunk table" for found in releases.values())


@pytest.mark.parametrize("ranking", RANKINGS)
def test_every_ranking_finds_the_pathway(pipeline: AnswerPipeline, ranking: Ranking) -> None:
    retriever = ReactomeRetriever(
        settings=pipeline.settings,
        client=store.open_client(pipeline.settings),
        embeddings=pipeline.embeddings,
        expander=pipeline.models[1],
        ranking=ranking,
    )
    found = retriever.invoke("What causes Tangier disease?", k=3)
    assert "R-HSA-5682113" in [d.metadata.get("st_id") for d in found]


def test_extra_collections_must_be_declared(pipeline: AnswerPipeline) -> None:
    with pytest.raises(InputError, match="reactions"):
        pipeline.retriever.invoke(
            "ABCA1", options=RequestOptions(collections=("reactome", "reactions"))
        )


@pytest.mark.slow  # ingests the sample twice more
def test_a_new_ingest_under_a_running_retriever(tmp_path: Path, minilm: Embeddings) -> None:
    # The retriever remembers each collection's live version for a few seconds; an ingest
    # that replaces it (and deletes the old one) in that time must not fail a question.
    corpus = tmp_path / "corpus"
    shutil.copytree(bundled_dir(), corpus)
    settings = load_settings(home=tmp_path / "home", event_logs=False)
    ingest(settings, locate_files(corpus, COLLECTION_NAMES, required=True), embeddings=minilm)
    pipeline = AnswerPipeline(settings, embeddings=minilm)
    before = pipeline.invoke("What causes Tangier disease?")
    summary = corpus / "reactome" / "pathway2summation.txt"
    summary.write_text(summary.read_text(encoding="utf-8").replace("Tangier", "Tangier (TD)"))
    ingest(settings, locate_files(corpus, COLLECTION_NAMES, required=True), embeddings=minilm)
    after = pipeline.invoke("What causes Tangier disease?")
    assert after["state"] == before["state"] == "answered"
    assert "R-HSA-5682113" in [r.get("st_id") for r in after["references"]]


def _removed_files_open(home: Path) -> list[str]:
    """This process's open files under ``home`` that were deleted meanwhile."""
    where = str(home.resolve())
    found = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = str(fd.readlink())
        except OSError:
            continue  # closed since it was listed
        if target.startswith(where) and target.endswith(" (deleted)"):
            found.append(target)
    return found


@pytest.mark.slow  # ingests the sample twice more
def test_a_search_pinned_to_a_replaced_version_keeps_none_of_its_files(
    tmp_path: Path, minilm: Embeddings
) -> None:
    # A request that began before an ingest finishes on the version it began on, even after
    # the retriever has moved on to the new one. Once that version is removed, the process
    # holds none of its files (it used to keep its chunk table open until the next ingest:
    # 2 more open files per straggling collection, seen by `serve` under load).
    corpus = tmp_path / "corpus"
    shutil.copytree(bundled_dir(), corpus)
    settings = load_settings(home=tmp_path / "home", event_logs=False)
    ingest(settings, locate_files(corpus, COLLECTION_NAMES, required=True), embeddings=minilm)
    pipeline = AnswerPipeline(settings, embeddings=minilm)
    retriever = pipeline.own_retriever
    assert retriever is not None
    pinned = {
        name: str(row["version"]) for name, row in pipeline.operator.collection_releases().items()
    }

    summary = corpus / "reactome" / "pathway2summation.txt"
    summary.write_text(summary.read_text(encoding="utf-8").replace("Tangier", "Tangier (TD)"))
    ingest(settings, locate_files(corpus, COLLECTION_NAMES, required=True), embeddings=minilm)
    # The retriever looks the live version up every few seconds: once it has seen the new
    # one, the next search reopens the store and lets go of what it held.
    wait_until(
        lambda: (
            pipeline.operator.collection_releases()["reactome"]["version"] != pinned["reactome"]
        ),
        every_s=0.5,
        what="the new version seen",
    )
    assert pipeline.invoke("What causes Tangier disease?")["state"] == "answered"

    # A straggler: a search pinned to the replaced version.
    expansion = rule_expansion("What causes Tangier disease?", max_queries=0)
    found = retriever.search(expansion, ["reactome"], 5, versions=pinned)
    assert "R-HSA-5682113" in [d.metadata.get("st_id") for d in found]
    assert all("(TD)" not in d.page_content for d in found)  # the old version's text

    later = time.time() + store.retirement_grace_s(settings) + 1
    client = store.open_client(settings)
    assert pinned["reactome"] in store.remove_retired_versions(client, settings, now=later)
    assert _removed_files_open(settings.home) == []
