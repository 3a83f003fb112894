"""Evidence through the whole pipeline: a real OpenAI-compatible client talking to a fake
model on 127.0.0.1 that copies sentences from the retrieved sources and cites some of them
with the wrong one, the real embedding model and the real sample collections."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings

from callbacks.log import read_log
from pipelines.core.settings import load_settings
from pipelines.core.tags import EVIDENCE_FAILED
from pipelines.pipeline import AnswerPipeline
from tests.support.fake_openai import Behaviour, FakeChat, fake_chat
from tests.support.invariants import check_stream

QUESTIONS = [
    "What causes Tangier disease?",
    "How is cholesterol made?",
    "What is the role of insulin receptor signaling?",
]


@pytest.fixture
def chat(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeChat]:
    behaviour: Behaviour = getattr(request, "param", "miscite")
    with fake_chat(behaviour) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        yield fake


def _pipeline(sample_home: Path, home: Path, minilm: Embeddings, **settings: Any) -> AnswerPipeline:
    # The sample's collections, this test's own logs (each is replayed after the test).
    chosen = load_settings(
        home=sample_home, logs_path=home / "logs", llm="openai:fake-model", **settings
    )
    return AnswerPipeline(chosen, embeddings=minilm)


def _by_sentence(result: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for item in result["evidence"]:
        start, end = item["sentence"]
        found.setdefault(result["text"][start:end], []).append(item)
    return found


def _answered_without_evidence(
    pipeline: AnswerPipeline, home: Path, request_id: str
) -> list[dict[str, Any]]:
    """Ask the first question: the answer stands, without evidence; what its log says why."""
    result = pipeline.invoke(QUESTIONS[0], request_id=request_id)
    assert result["state"] == "answered"
    assert result["references"]
    assert result["evidence"] == []
    (path,) = (home / "logs").glob(f"*-{request_id}.jsonl")
    return [
        record["data"]
        for record in read_log(path).callbacks
        if record.get("name") == EVIDENCE_FAILED
    ]


def _item_for(result: dict[str, Any], sentence: str) -> dict[str, Any]:
    (item,) = [
        item
        for written, items in _by_sentence(result).items()
        if written.startswith(sentence.rstrip("."))
        for item in items
    ]
    return item


@pytest.mark.slow
@pytest.mark.parametrize("question", QUESTIONS)
def test_each_sentence_cited_with_another_source_is_flagged_and_each_right_one_is_not(
    chat: FakeChat, sample_home: Path, isolated_home: Path, minilm: Embeddings, question: str
) -> None:
    pipeline = _pipeline(sample_home, isolated_home, minilm)
    events = list(pipeline.stream(question))
    done = check_stream(events)
    result = done.data.model_dump(mode="json")
    assert len(chat.written) == 4
    for sentence, cites, came_from in chat.written:
        item = _item_for(result, sentence)
        assert item["supported"] is (cites == came_from), (sentence, item)
        if cites == came_from:
            # The quote is the sentence it was copied from, as the source writes it.
            assert item["quote"].startswith(sentence.rstrip(".")[:40])


@pytest.mark.slow
def test_drop_removes_the_wrong_markers_and_keeps_the_right_ones(
    chat: FakeChat, sample_home: Path, isolated_home: Path, minilm: Embeddings
) -> None:
    pipeline = _pipeline(sample_home, isolated_home, minilm, evidence="drop")
    done = check_stream(list(pipeline.stream(QUESTIONS[0])))
    text = done.data.text
    assert len(done.data.evidence) == 2
    assert all(item.supported for item in done.data.evidence)
    for sentence, cites, came_from in chat.written:
        start = text.index(sentence.rstrip(".")[:40])
        end = text.index(".", start + len(sentence) - 2) + 1
        has_marker = "[" in text[start + len(sentence.rstrip(".")) - 1 : end]
        assert has_marker is (cites == came_from), text


@pytest.mark.slow
def test_a_model_judge_rules_on_every_pair(
    chat: FakeChat, sample_home: Path, isolated_home: Path, minilm: Embeddings
) -> None:
    pipeline = _pipeline(sample_home, isolated_home, minilm, evidence_judge="openai:fake-judge")
    result = pipeline.invoke(QUESTIONS[1])
    graded = [r for r in chat.requests if r["model"] == "fake-judge"]
    assert len(graded) == len(result["evidence"]) == 4
    for sentence, cites, came_from in chat.written:
        assert _item_for(result, sentence)["supported"] is (cites == came_from)


@pytest.mark.slow
@pytest.mark.parametrize("chat", ["lenient_grader"], indirect=True)
@pytest.mark.usefixtures("chat")
def test_the_model_judge_rules_and_the_offline_judge_quotes(
    sample_home: Path, isolated_home: Path, minilm: Embeddings
) -> None:
    # A grader that says yes to everything: every pair is supported, though the offline
    # judge, whose quotes and scores are kept, rules two of them out.
    offline = _pipeline(sample_home, isolated_home, minilm).invoke(QUESTIONS[1])
    judged = _pipeline(
        sample_home, isolated_home, minilm, evidence_judge="openai:fake-judge"
    ).invoke(QUESTIONS[1])
    assert [item["supported"] for item in offline["evidence"]].count(False) == 2
    assert all(item["supported"] for item in judged["evidence"])
    keep = ("n", "sentence", "quote", "quote_span", "score")
    assert [{k: item[k] for k in keep} for item in judged["evidence"]] == [
        {k: item[k] for k in keep} for item in offline["evidence"]
    ]


@pytest.mark.slow
@pytest.mark.parametrize("chat", ["judge_fails"], indirect=True)
def test_a_failing_model_judge_leaves_the_offline_verdicts(
    chat: FakeChat, sample_home: Path, isolated_home: Path, minilm: Embeddings
) -> None:
    offline = _pipeline(sample_home, isolated_home, minilm).invoke(QUESTIONS[1])
    judged = _pipeline(
        sample_home, isolated_home, minilm, evidence_judge="openai:fake-judge"
    ).invoke(QUESTIONS[1])
    assert judged["state"] == "answered"
    assert judged["evidence"] == offline["evidence"]
    assert any(r["model"] == "fake-judge" for r in chat.requests)


@pytest.mark.slow
@pytest.mark.usefixtures("chat")
def test_a_judge_that_breaks_costs_the_evidence_not_the_answer(
    sample_home: Path,
    isolated_home: Path,
    minilm: Embeddings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pipeline = _pipeline(sample_home, isolated_home, minilm)

    def broken(_: object) -> object:
        raise RuntimeError("the judge fell over")

    assert pipeline.evidence_judge is not None
    monkeypatch.setattr(pipeline.evidence_judge, "verdicts", broken)
    assert _answered_without_evidence(pipeline, isolated_home, "broken-judge") == [
        {"message": "RuntimeError: the judge fell over"}
    ]


@pytest.mark.slow
@pytest.mark.usefixtures("chat")
def test_evidence_off_judges_nothing(
    sample_home: Path, isolated_home: Path, minilm: Embeddings
) -> None:
    pipeline = _pipeline(sample_home, isolated_home, minilm, evidence="off")
    assert pipeline.evidence_judge is None
    result = pipeline.invoke(QUESTIONS[0])
    assert result["references"]
    assert result["evidence"] == []


def test_the_default_offline_pipeline_backs_its_own_quotes(
    sample_home: Path, isolated_home: Path, minilm: Embeddings
) -> None:
    # The extractive model copies its sentences: each is supported, by the sentence it took.
    settings = load_settings(home=sample_home, logs_path=isolated_home / "logs")
    result = AnswerPipeline(settings, embeddings=minilm).invoke(
        "What causes Tangier disease, and what does ABCA1 do?"
    )
    assert result["evidence"]
    assert all(item["supported"] for item in result["evidence"])
    for item in result["evidence"]:
        start, end = item["sentence"]
        assert item["quote"].rstrip(".")[:40] in result["text"][start:end]
    assert os.environ.get("REACTOME_ANSWERS_EVIDENCE") is None


class _HangingJudge:
    async def judge(self, claims: object) -> object:
        await asyncio.Event().wait()  # never rules
        raise AssertionError("unreachable")


def test_a_judge_that_never_rules_costs_the_evidence_after_one_model_call_s_limit(
    sample_home: Path, isolated_home: Path, minilm: Embeddings
) -> None:
    settings = load_settings(home=sample_home, logs_path=isolated_home / "logs", model_timeout_s=1)
    pipeline = AnswerPipeline(settings, embeddings=minilm)
    pipeline.__dict__["evidence_judge"] = _HangingJudge()
    assert _answered_without_evidence(pipeline, isolated_home, "hanging-judge") == [
        {"message": "no ruling within 1 s"}
    ]
