"""`GET /metrics` scraped with prometheus-client's own parser after known traffic, from one
`serve` and from `serve --workers 2`; and a LangChain tracer's view of an answer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.tracers.run_collector import RunCollectorCallbackHandler
from langchain_core.tracers.schemas import Run
from prometheus_client.parser import text_string_to_metric_families

from callbacks.events import TokenEvent
from pipelines.core.settings import load_settings
from pipelines.core.tags import ANSWER_TAG, EXPANDER_TAG, RETRIEVAL_TAG
from pipelines.pipeline import AnswerPipeline
from tests.support.servers import Served, serve_command
from tests.support.sse import parse_sse

QUESTIONS = ["What causes Tangier disease?", "What does ABCA1 do?", "What happens in apoptosis?"]
ADVICE = "Can I double my dose of insulin tonight?"
KEY = "metrics-key-0b9e1d"


def scrape(base: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample /metrics gives, by name and labels."""
    response = httpx.get(f"{base}/metrics", headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def requests(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], **labels: str) -> float:
    key = ("reactome_answers_requests_total", tuple(sorted(labels.items())))
    return found.get(key, 0.0)


def value(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str) -> float:
    return sum(v for (sample, _), v in found.items() if sample == name)


def traffic(base: str) -> int:
    """Known traffic: three streamed answers, one refusal, one request without a key; the
    token events the streams carried."""
    tokens = 0
    auth = {"Authorization": f"Bearer {KEY}"}
    for question in QUESTIONS:
        response = httpx.post(
            f"{base}/v1/answer/stream", json={"question": question}, headers=auth, timeout=120
        )
        assert response.status_code == 200
        tokens += sum(isinstance(e, TokenEvent) for e in parse_sse(response.text))
    refused = httpx.post(f"{base}/v1/answer", json={"question": ADVICE}, headers=auth, timeout=60)
    assert refused.json()["state"] == "refused"
    assert httpx.post(f"{base}/v1/answer", json={"question": ADVICE}, timeout=60).status_code == 401
    return tokens


@pytest.fixture(params=[1, 2], ids=["one-process", "two-workers"])
def served(request: pytest.FixtureRequest, sample_home: Path) -> Iterator[Served]:
    workers = ("--workers", str(request.param)) if request.param > 1 else ()
    env = {"REACTOME_ANSWERS_API_KEYS": KEY}
    with serve_command(sample_home, env=env, command=("serve", *workers, "--port")) as server:
        yield server


@pytest.mark.slow  # `serve` subprocesses, one and two workers
def test_metrics_count_the_traffic(served: Served) -> None:
    tokens = traffic(served.base)
    found = scrape(served.base)
    stream = {"endpoint": "/v1/answer/stream", "state": "answered", "status": "200"}
    assert requests(found, **stream) == len(QUESTIONS)
    assert requests(found, endpoint="/v1/answer", state="refused", status="200") == 1
    assert requests(found, endpoint="/v1/answer", state="", status="401") == 1
    assert value(found, "reactome_answers_rejections_total") == 1
    assert ("reactome_answers_rejections_total", (("reason", "unauthorized"),)) in found
    answers = len(QUESTIONS) + 1
    assert value(found, "reactome_answers_answer_seconds_count") == answers
    # The refusal was judged before any search or token.
    assert value(found, "reactome_answers_first_token_seconds_count") == len(QUESTIONS)
    assert value(found, "reactome_answers_retrieval_seconds_count") == len(QUESTIONS)
    assert value(found, "reactome_answers_tokens_streamed_total") == tokens > 0
    assert value(found, "reactome_answers_answers_in_progress") == 0
    # Histograms are cumulative: the +Inf bucket holds every answer.
    buckets = {labels: v for (n, labels), v in found.items() if n.endswith("answer_seconds_bucket")}
    assert sum(v for labels, v in buckets.items() if ("le", "+Inf") in labels) == answers


def test_a_tracer_sees_the_runs_with_their_tags(sample_home: Path, minilm: Embeddings) -> None:
    tracer = RunCollectorCallbackHandler()
    pipeline = AnswerPipeline(
        load_settings(home=sample_home, event_logs=False), embeddings=minilm, callbacks=[tracer]
    )
    result = pipeline.invoke(QUESTIONS[0])
    assert result["state"] == "answered"
    (root,) = tracer.traced_runs
    assert root.name == "reactome-answers"

    def named(run: Run, name: str) -> Run:
        (found,) = [child for child in run.child_runs if child.name == name]
        return found

    retrieval = named(root, "retrieval")
    assert RETRIEVAL_TAG in (retrieval.tags or [])
    assert retrieval.run_type == "retriever"
    expander = named(retrieval, "expander")
    assert EXPANDER_TAG in (expander.tags or [])
    answer = named(root, "answer_model")
    assert ANSWER_TAG in (answer.tags or [])
    assert answer.run_type in ("llm", "chat_model")
    # The retrieval run's output is what the answer cited from.
    documents = (retrieval.outputs or {})["documents"]
    cited = {document.metadata.get("st_id") for document in documents}
    assert {reference["st_id"] for reference in result["references"]} <= cited
