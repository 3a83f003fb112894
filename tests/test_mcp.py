"""`reactome-answers mcp`: the tools over MCP's stdio transport, driven by the SDK's own
client (`mcp.Client`) in both protocol eras (the 2026 one and the legacy handshake desktop
assistants still speak), against the same answers `POST /v1/answer` gives."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.embeddings import Embeddings
from mcp import Client, MCPError, StdioServerParameters
from mcp_types import INVALID_PARAMS

from app.server import create_app
from callbacks.events import CitationEvent
from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline
from tests.support.fake_openai import fake_chat, serving_env
from tests.support.servers import serve
from tests.support.sse import parse_sse

pytestmark = pytest.mark.slow  # `reactome-answers mcp` in a subprocess, answering for real

QUESTION = "What causes Tangier disease?"
FOLLOW_UP = "Which disease follows when it is defective?"
ADVICE = "Should I stop taking my statins if my HDL is low?"
OFF_TOPIC = "What is the capital of Peru?"
COMMAND = str(Path(sys.executable).parent / "reactome-answers")


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def http_base(sample_home: Path, minilm: Embeddings) -> Iterator[str]:
    """`POST /v1/answer` over the same home, to compare with."""
    settings = load_settings(home=sample_home)
    yield from serve(create_app(settings, pipeline=AnswerPipeline(settings, embeddings=minilm)))


def _over_http(base: str, question: str, history: list[dict[str, str]] | None = None) -> Any:
    body: dict[str, Any] = {"question": question}
    if history:
        body["history"] = history
    return httpx.post(f"{base}/v1/answer", json=body, timeout=120).json()


def _citations(base: str, question: str, *, cite_urls: bool = False) -> list[str | None]:
    body = {"question": question, "cite_urls": cite_urls}
    response = httpx.post(f"{base}/v1/answer/stream", json=body, timeout=120)
    return [
        event.data.st_id or event.data.url
        for event in parse_sse(response.text)
        if isinstance(event, CitationEvent)
    ]


@asynccontextmanager
async def _client(home: Path, mode: str, **env: str) -> AsyncIterator[Client]:
    # The SDK starts the server with a bare environment; the settings are passed on.
    passed = {k: v for k, v in os.environ.items() if k.startswith("REACTOME_")}
    params = StdioServerParameters(
        command=COMMAND, args=["--home", str(home), "mcp"], env={**passed, **env}
    )
    async with Client(params, mode=mode) as client:
        yield client


async def test_the_tools_and_the_collections_resource_are_listed(
    sample_home: Path, mode: str
) -> None:
    async with _client(sample_home, mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == {"ask_reactome", "search_reactome"}
        ask = tools["ask_reactome"]
        assert ask.input_schema["required"] == ["question"]
        assert set(ask.input_schema["properties"]) == {
            "question",
            "history",
            "collections",
            "cite_urls",
        }
        assert "Reactome" in (ask.description or "")
        # Each argument is explained to the model that picks the tool.
        for name, schema in ask.input_schema["properties"].items():
            assert schema.get("description"), name
        assert ask.output_schema is not None
        assert {"state", "text", "references"} <= set(ask.output_schema["properties"])
        search = tools["search_reactome"]
        assert search.input_schema["required"] == ["query"]
        assert set(search.input_schema["properties"]) == {"query", "collections", "k"}
        resource = await client.read_resource("reactome://collections")
        listed = json.loads(resource.contents[0].text)  # type: ignore[union-attr]
        assert {entry["name"] for entry in listed} >= {"reactome", "disease_variants"}
        assert all(entry["release"] for entry in listed)


async def test_ask_reactome_gives_the_answer_of_v1_answer_with_progress_first(
    sample_home: Path, http_base: str, mode: str
) -> None:
    expected = _over_http(http_base, QUESTION)
    citations = _citations(http_base, QUESTION)
    heard: list[tuple[str, Any]] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        del progress, total  # the count and total the SDK passes; the messages tell
        heard.append(("progress", message))

    async with _client(sample_home, mode) as client:
        result = await client.call_tool(
            "ask_reactome", {"question": QUESTION}, progress_callback=progress
        )
        heard.append(("result", result))
    assert not result.is_error
    answer = result.structured_content
    assert answer is not None
    assert answer["state"] == "answered"
    assert answer["text"] == expected["text"]
    assert answer["references"] == expected["references"]
    assert answer["evidence"] == expected["evidence"]
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith(expected["text"] + "\n\nSources:\n")
    for reference in expected["references"]:
        assert f"{reference['n']}. [" in text
        assert reference["st_id"] in text
    # Retrieval first, then the answer as it streams, all before the result.
    assert heard[0] == ("progress", f"retrieval done: {len(citations)} sources")
    assert [kind for kind, _ in heard[:-1]] == ["progress"] * (len(heard) - 1)
    assert heard[-1][0] == "result"
    # The streamed text carries the final markers: it reads as the result does.
    assert "".join(str(message) for _, message in heard[1:-1]) == expected["text"]


# The tests below speak one era each (the two above speak both): a server start apiece.


async def test_search_reactome_gives_the_answers_citations_in_order(
    sample_home: Path, http_base: str
) -> None:
    mode = "auto"
    # It numbers user-guide pages too, as an answer citing by url does.
    citations = _citations(http_base, QUESTION, cite_urls=True)
    async with _client(sample_home, mode) as client:
        result = await client.call_tool("search_reactome", {"query": QUESTION})
        advice = await client.call_tool("search_reactome", {"query": ADVICE})
    assert not result.is_error
    found = result.structured_content
    assert found is not None
    assert [hit["st_id"] or hit["url"] for hit in found["sources"]] == citations
    assert [hit["n"] for hit in found["sources"]] == list(range(1, len(citations) + 1))
    assert all(hit["title"] and hit["snippet"] for hit in found["sources"])
    relevance = [hit["relevance"] for hit in found["sources"]]
    assert all(0 < value <= 1 for value in relevance)
    # A request for personal advice is not searched either, and says why.
    assert not advice.is_error
    assert advice.structured_content is not None
    assert advice.structured_content["sources"] == []
    assert "doctor" in advice.structured_content["refused"]


async def test_a_follow_up_a_refusal_nothing_found_and_bad_arguments(
    sample_home: Path, http_base: str
) -> None:
    mode = "legacy"  # the handshake desktop assistants use
    history = [
        {"role": "user", "content": "What does ABCA1 do in Tangier disease?"},
        {"role": "assistant", "content": "It moves cholesterol out of cells."},
    ]
    expected = _over_http(http_base, FOLLOW_UP, history)
    async with _client(sample_home, mode) as client:
        follow_up = await client.call_tool(
            "ask_reactome", {"question": FOLLOW_UP, "history": history}
        )
        assert follow_up.structured_content is not None
        assert follow_up.structured_content["text"] == expected["text"]
        assert "R-HSA-5682113" in {r["st_id"] for r in follow_up.structured_content["references"]}

        # Not a failure: an ordinary result that says why.
        refused = await client.call_tool("ask_reactome", {"question": ADVICE})
        assert not refused.is_error
        assert refused.structured_content is not None
        assert refused.structured_content["state"] == "refused"
        assert "doctor" in refused.content[0].text  # type: ignore[union-attr]
        nothing = await client.call_tool("ask_reactome", {"question": OFF_TOPIC})
        assert not nothing.is_error
        assert nothing.structured_content is not None
        assert nothing.structured_content["state"] == "nothing_found"
        assert nothing.structured_content["references"] == []

        # A call that does not fit the schema is the protocol's invalid params, naming it.
        for arguments, named in (
            ({}, "question"),
            ({"question": ""}, "question"),
            ({"question": QUESTION, "collections": ["nope"]}, "collections"),
            ({"query": QUESTION, "k": 0}, "k"),
            ({"question": "x" * 2001}, "question"),
        ):
            tool = "search_reactome" if "query" in arguments else "ask_reactome"
            with pytest.raises(MCPError) as caught:
                await client.call_tool(tool, arguments)
            assert caught.value.error.code == INVALID_PARAMS
            assert caught.value.error.message.startswith(named), caught.value.error.message


async def test_a_failed_answer_is_a_tool_error_with_our_one_line_message(
    sample_home: Path,
) -> None:
    mode = "auto"
    with fake_chat("fail_before") as fake:
        async with _client(sample_home, mode, **serving_env(fake)) as client:
            result = await client.call_tool("ask_reactome", {"question": QUESTION})
    assert result.is_error
    message = result.content[0].text  # type: ignore[union-attr]
    assert "\n" not in message
    assert message
    assert "sk-test" not in message  # the model server echoed its key: never passed on
