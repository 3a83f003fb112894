"""Isolation under load: 200 concurrent streams with distinct questions against the real
`serve` command on 127.0.0.1, answered by an OpenAI-compatible model server that streams some
answers slowly and some at once. No stream may carry another's events, and every answer
must be its own question's, citing its own sources."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from callbacks.events import CitationEvent, Event, StartEvent
from callbacks.log import read_log
from callbacks.replay import comparable
from pipelines.core.tags import ADVICE_RECORD, EVIDENCE_STARTED, RETRIEVAL_RECORD
from pipelines.retrieval.retriever import EXPANSION
from tests.support.fake_openai import FakeChat, fake_chat
from tests.support.invariants import check_stream
from tests.support.servers import serve_command
from tests.support.sse import parse_sse

pytestmark = pytest.mark.slow  # 200 concurrent streams, and the soak script, against `serve`

STREAMS = 200


def distinct_questions(count: int) -> list[str]:
    """Questions about the sample's pathways; every other one asks for a slow answer."""
    names = []
    listing = Path(__file__).parents[2] / "collections/reactome/ReactomePathways.txt"
    for line in listing.read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[2] == "Homo sapiens":
            names.append(parts[1])
    templates = ["What is {}?", "Explain {}, slowly.", "Which genes act in {}?",
                 "Tell me slowly about {}."]  # fmt: skip
    questions = [template.format(name) for template in templates for name in names]
    assert len(set(questions)) >= count
    return questions[:count]


@pytest.fixture
def chat(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeChat]:
    with fake_chat("ok") as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-local-isolation")
        monkeypatch.setenv("REACTOME_ANSWERS_LLM", "openai:fake-model")
        yield fake


async def _one(client: httpx.AsyncClient, base: str, question: str) -> list[Event]:
    response = await client.post(f"{base}/v1/answer/stream", json={"question": question})
    assert response.status_code == 200
    return parse_sse(response.text)


async def _all(base: str, questions: list[str]) -> list[list[Event]]:
    limits = httpx.Limits(max_connections=len(questions))
    async with httpx.AsyncClient(timeout=300, limits=limits) as client:
        return list(await asyncio.gather(*(_one(client, base, q) for q in questions)))


def cited_ids(events: list[Event]) -> list[str | None]:
    return [e.data.st_id for e in events if isinstance(e, CitationEvent)]


def test_two_hundred_concurrent_streams_stay_apart(sample_home: Path, chat: FakeChat) -> None:
    questions = distinct_questions(STREAMS)
    with serve_command(sample_home) as served:
        streams = asyncio.run(_all(served.base, questions))
        # Each question again, alone, for the sources it retrieves when nothing else runs.
        alone = {
            question: asyncio.run(_all(served.base, [question]))[0]
            for question in random.Random(7).sample(questions, 40)
        }
    assert not [line for line in served.stderr.splitlines() if "Traceback" in line]

    request_ids = set()
    slow = 0
    for question, events in zip(questions, streams, strict=True):
        done = check_stream(events)  # seq 1..n, one request_id, start first, done last
        assert done.data.state == "answered", (question, done.data)
        start = events[0]
        assert isinstance(start, StartEvent)
        assert start.data.question == question
        request_ids.add(done.request_id)
        # The model echoes the question it was asked: this answer is this question's.
        assert done.data.text.startswith(f"About {question}: see [1]")
        # And it cites this stream's own citations, never another stream's.
        own = {e.data.n: e.data.st_id for e in events if isinstance(e, CitationEvent)}
        assert [r.st_id for r in done.data.references] == [
            own[r.source_n] for r in done.data.references
        ]
        assert done.data.references
        if question in alone:
            assert cited_ids(events) == cited_ids(alone[question])
        slow += "slowly" in question
        # The log of this request holds exactly this stream, and the expander answered it.
        (path,) = (sample_home / "logs").glob(f"*-{done.request_id}.jsonl")
        log = read_log(path)
        assert [comparable(e) for e in log.events] == [comparable(e) for e in events]
        custom = [r["name"] for r in log.callbacks if r["hook"] == "custom_event"]
        # What was searched for, the advice gate's ruling, what the search considered and
        # when the judge began; no fallback, no refusal.
        assert custom == [EXPANSION, ADVICE_RECORD, RETRIEVAL_RECORD, EVIDENCE_STARTED]
    assert len(request_ids) == STREAMS
    # One expander call and one answer call per request: no retries, nothing asked twice.
    assert len(chat.requests) == 2 * (STREAMS + len(alone))
    assert 0 < slow < STREAMS  # fast and slow answers were interleaved


def _soak(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    from tests.benchmarks import soak

    assert soak.main([*args, "--streams", "20", "--tokens", "10"]) == 0
    out = capsys.readouterr().out
    summary: dict[str, Any] = json.loads(out[out.index("{\n") :])
    assert summary["completed"] == summary["requests"] == 20 * summary["rounds"]
    assert summary["errors"] == summary["mixed"] == 0
    assert summary["rss_last_mb"] > 0
    return summary


def test_the_soak_script_stops_at_its_time_or_round_limit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Rounds of 20 short streams take a fraction of a second: 0.6 s allows a few, not 1000.
    assert 1 <= _soak(capsys, "--minutes", "0.01", "--max-rounds", "1000")["rounds"] < 100
    assert _soak(capsys, "--minutes", "5", "--max-rounds", "2")["rounds"] == 2
