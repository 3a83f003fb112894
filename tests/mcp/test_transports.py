"""The MCP tools driven by the SDK's own client (`mcp.Client`) over both transports: stdio
against `reactome-answers mcp`, and Streamable HTTP at `/mcp` against `serve` (behind its
keys and limits), in both protocol eras (the 2026 one and the legacy handshake desktop
assistants still speak), against the answers `POST /v1/answer` gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import INVALID_PARAMS

from app.http.models import MAX_TURN_CHARS, MAX_TURNS
from app.links import REACTOME_DETAIL
from callbacks.events import CitationEvent, ErrorEvent
from tests.support.fake_openai import fake_chat, serving_env
from tests.support.logs import logs_asking
from tests.support.servers import Served, serve_command
from tests.support.sse import parse_sse

pytestmark = pytest.mark.slow  # `reactome-answers mcp` and `serve` in subprocesses

QUESTION = "What causes Tangier disease?"
FOLLOW_UP = "Which disease follows when it is defective?"
ADVICE = "Should I stop taking my statins if my HDL is low?"
OFF_TOPIC = "What is the capital of Peru?"
COMMAND = str(Path(sys.executable).parent / "reactome-answers")
KEY = "mcp-test-key-3f9a1c"
KEYED = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def served(sample_home: Path) -> Iterator[Served]:
    """`serve` with API keys: `/mcp` for the HTTP transport, `/v1/answer` to compare with."""
    with serve_command(sample_home, env={"REACTOME_ANSWERS_API_KEYS": KEY}) as served:
        yield served


def _over_http(base: str, question: str, history: list[dict[str, str]] | None = None) -> Any:
    body: dict[str, Any] = {"question": question}
    if history:
        body["history"] = history
    return httpx.post(f"{base}/v1/answer", json=body, headers=KEYED, timeout=120).json()


def _citations(base: str, question: str, *, cite_urls: bool = False) -> list[str | None]:
    body = {"question": question, "cite_urls": cite_urls}
    response = httpx.post(f"{base}/v1/answer/stream", json=body, headers=KEYED, timeout=120)
    return [
        event.data.st_id or event.data.url
        for event in parse_sse(response.text)
        if isinstance(event, CitationEvent)
    ]


@asynccontextmanager
async def _stdio(home: Path, mode: str, **env: str) -> AsyncIterator[Client]:
    # The SDK starts the server with a bare environment; the settings are passed on.
    passed = {k: v for k, v in os.environ.items() if k.startswith("REACTOME_")}
    params = StdioServerParameters(
        command=COMMAND, args=["--home", str(home), "mcp"], env={**passed, **env}
    )
    async with Client(params, mode=mode) as client:
        yield client


@asynccontextmanager
async def _http(base: str, mode: str, key: str | None = KEY) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    # The SDK's own read timeout (an answer may go quiet for a while), not httpx's 5 s.
    timeout = httpx2.Timeout(30, read=300)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http), mode=mode) as client,
    ):
        yield client


def _client(
    transport: str, home: Path, served: Served, mode: str
) -> AbstractAsyncContextManager[Client]:
    return _stdio(home, mode) if transport == "stdio" else _http(served.base, mode)


async def test_the_tools_and_the_collections_resource_are_listed(
    sample_home: Path, served: Served, transport: str, mode: str
) -> None:
    async with _client(transport, sample_home, served, mode) as client:
        assert client.server_info is not None
        assert client.server_info.version == version("reactome-answers")
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == {"ask_reactome", "search_reactome"}
        ask = tools["ask_reactome"]
        assert ask.input_schema["required"] == ["question"]
        assert set(ask.input_schema["properties"]) == {
            "question",
            "history",
            "collections",
            "cite_urls",
            "language",
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
    sample_home: Path, served: Served, transport: str, mode: str
) -> None:
    expected = _over_http(served.base, QUESTION)
    citations = _citations(served.base, QUESTION)
    heard: list[tuple[str, Any]] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        del progress, total  # the count and total the SDK passes; the messages tell
        heard.append(("progress", message))

    async with _client(transport, sample_home, served, mode) as client:
        result = await client.call_tool(
            "ask_reactome", {"question": QUESTION}, progress_callback=progress
        )
        heard.append(("result", result))
    assert not result.is_error
    answer = result.structured_content
    assert answer is not None
    assert answer["state"] == "answered"
    assert answer["text"] == expected["text"]
    # The references of /v1/answer, each with its Reactome page as a link.
    assert [{k: v for k, v in ref.items() if k != "link"} for ref in answer["references"]] == (
        expected["references"]
    )
    for reference in answer["references"]:
        assert reference["link"] == REACTOME_DETAIL + reference["st_id"]
    assert answer["evidence"] == expected["evidence"]
    assert answer["request_id"] != expected["request_id"]  # each answer has its own log
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
    sample_home: Path, served: Served, transport: str
) -> None:
    mode = "auto"
    # It numbers user-guide pages too, as an answer citing by url does.
    citations = _citations(served.base, QUESTION, cite_urls=True)
    async with _client(transport, sample_home, served, mode) as client:
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
    sample_home: Path, served: Served, transport: str
) -> None:
    mode = "legacy"  # the handshake desktop assistants use
    history = [
        {"role": "user", "content": "What does ABCA1 do in Tangier disease?"},
        {"role": "assistant", "content": "It moves cholesterol out of cells."},
    ]
    expected = _over_http(served.base, FOLLOW_UP, history)
    async with _client(transport, sample_home, served, mode) as client:
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
            # The native API's history limits, and a boolean that is one.
            ({"question": QUESTION, "history": [history[0]] * (MAX_TURNS + 1)}, "history"),
            (
                {
                    "question": QUESTION,
                    "history": [{"role": "user", "content": "x" * (MAX_TURN_CHARS + 1)}],
                },
                "history",
            ),
            ({"question": QUESTION, "cite_urls": "yes"}, "cite_urls"),
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
        async with _stdio(sample_home, mode, **serving_env(fake)) as client:
            result = await client.call_tool("ask_reactome", {"question": QUESTION})
    assert result.is_error
    message = result.content[0].text  # type: ignore[union-attr]
    assert "\n" not in message
    assert message
    assert "sk-test" not in message  # the model server echoed its key: never passed on


# --- over HTTP, behind the server's keys and limits ---------------------------------------


async def test_mcp_over_http_needs_a_key_when_the_server_has_keys(served: Served) -> None:
    for key, said in ((None, "needs an API key"), ("not-a-key-0000", "not one this server")):
        with pytest.raises(ExceptionGroup) as caught:
            async with _http(served.base, "auto", key=key):
                pass
        # Refused before anything is read, in the protocol's shape: the client shows why.
        assert caught.group_contains(MCPError, match=said), caught.value.exceptions
    async with _http(served.base, "legacy") as client:
        assert len((await client.list_tools()).tools) == 2


async def _until(condition: Any, what: str) -> None:
    with anyio.fail_after(120):  # a generous bound: on a loaded machine it only waits longer
        while not condition():
            await anyio.sleep(0.05)
    assert condition(), what


async def test_an_answer_over_mcp_holds_a_slot_until_its_client_leaves(
    sample_home: Path, mode: str
) -> None:
    question = f"What causes Tangier disease? (asked over MCP in {mode} mode, then left)"
    other_mode = "legacy" if mode == "auto" else "auto"
    with fake_chat("held") as fake:
        env = {**serving_env(fake), "REACTOME_ANSWERS_MAX_CONCURRENT_ANSWERS": "1"}
        with serve_command(sample_home, env=env) as limited:
            async with anyio.create_task_group() as group:

                async def ask_and_wait() -> None:
                    async with _http(limited.base, mode) as client:
                        await client.call_tool("ask_reactome", {"question": question})

                group.start_soon(ask_and_wait)
                await _until(lambda: fake.holding == 1, "the answer reaching the model")
                # The answer over MCP holds the only slot: no other answer, on any route...
                async with httpx.AsyncClient(base_url=limited.base, timeout=60) as http:
                    refused = await http.post("/v1/answer", json={"question": QUESTION})
                assert refused.status_code == 429
                assert refused.json()["error"]["code"] == "too_many_answers"
                async with _http(limited.base, other_mode) as other:
                    # ...while what runs no answer goes on,
                    assert len((await other.list_tools()).tools) == 2
                    found = await other.call_tool("search_reactome", {"query": QUESTION})
                    assert found.structured_content
                    assert found.structured_content["sources"]
                    # and a second answer over MCP is a tool error with the cap's reason,
                    # which the client shows and its model reads.
                    busy = await other.call_tool("ask_reactome", {"question": QUESTION})
                    assert busy.is_error
                    reason = busy.content[0].text  # type: ignore[union-attr]
                    assert "REACTOME_ANSWERS_MAX_CONCURRENT_ANSWERS" in reason
                group.cancel_scope.cancel()  # the first client leaves mid-answer

            # Its answer is cancelled, as its log says, and the slot is free again.
            def ended() -> bool:
                logs = logs_asking(sample_home, question)
                return bool(logs) and bool(logs[0].events) and logs[0].events[-1].type == "done"

            await _until(ended, "the cancelled answer's done")
            (log,) = logs_asking(sample_home, question)
            assert [e.data.code for e in log.events if isinstance(e, ErrorEvent)] == ["cancelled"]
            fake.release.set()
            async with _http(limited.base, "auto") as client:
                again = await client.call_tool("ask_reactome", {"question": QUESTION})
            assert again.structured_content
            assert again.structured_content["state"] == "answered"
            # Counted under /mcp, with the answer's state, like any route's answers.
            metrics = httpx.get(f"{limited.base}/metrics", timeout=30).text
            assert 'endpoint="/mcp",state="answered",status="200"' in metrics
            assert 'reactome_answers_rejections_total{reason="too_many_answers"} 2.0' in metrics


async def test_tool_calls_over_mcp_count_against_the_rate_limit(sample_home: Path) -> None:
    limit = 4
    env = {"REACTOME_ANSWERS_RATE_LIMIT": str(limit), "REACTOME_ANSWERS_EVENT_LOGS": "false"}
    answered = 0
    with serve_command(sample_home, env=env) as limited:
        async with _http(limited.base, "auto") as client:
            # Each call counts; the discovery and the listing the client reads the output
            # schema from do not. A minute holds 4 (a bound of 12 asks: each refill takes
            # 15 s, far longer than an answer here).
            refused: MCPError | None = None
            for _ in range(12):
                try:
                    result = await client.call_tool("ask_reactome", {"question": QUESTION})
                except MCPError as error:
                    refused = error
                    break
                assert result.structured_content
                answered += result.structured_content["state"] == "answered"
    assert refused is not None, "12 answers over MCP in a minute, with a limit of 4"
    assert answered >= limit
    assert "REACTOME_ANSWERS_RATE_LIMIT" in refused.error.message
    assert refused.error.data == {"code": "rate_limited", "status": 429}


async def test_get_streams_at_mcp_cannot_use_up_the_connections(sample_home: Path) -> None:
    env = {"REACTOME_ANSWERS_MAX_CONNECTIONS": "4"}
    with serve_command(sample_home, env=env) as limited:
        async with AsyncExitStack() as stack:
            # Three times the cap, each from its own client left open, as idle listeners are.
            with anyio.fail_after(120):
                for _ in range(12):
                    http = await stack.enter_async_context(httpx.AsyncClient(timeout=30))
                    response = await http.get(
                        f"{limited.base}/mcp", headers={"Accept": "text/event-stream"}
                    )
                    assert response.status_code == 405
            # Each was answered at once and its connection closed: the server still serves.
            health = httpx.get(f"{limited.base}/healthz", timeout=30)
            assert health.status_code == 200, health.text


def test_a_line_that_is_not_a_message_gets_an_error_over_stdio(sample_home: Path) -> None:
    lines = [
        "{not json",
        "",  # a blank line is no message: no reply
        '{"jsonrpc": "2.0", "id": 5, "method": 7}',
        '{"jsonrpc": "2.0", "id": 6, "method": "ping", "params": {"x": "\\ud800"}}',
        json.dumps({"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"}}}),
    ]  # fmt: skip
    done = subprocess.run(
        [COMMAND, "--home", str(sample_home), "mcp"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k.startswith(("REACTOME_", "PATH", "HOME"))},
        check=True,
    )
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    # Each in order, as over HTTP: the client waiting on a request hears why.
    assert [(reply["id"], reply.get("error", {}).get("code")) for reply in replies] == [
        (None, -32700),
        (5, -32600),
        (None, -32700),  # a lone surrogate is not JSON text
        (7, None),
    ]
    assert replies[-1]["result"]["serverInfo"]["version"] == version("reactome-answers")


async def test_an_empty_home_says_how_to_ingest_into_it(tmp_path: Path) -> None:
    home = tmp_path / "empty home"
    async with _stdio(home, "auto") as client:
        result = await client.call_tool("ask_reactome", {"question": QUESTION})
        found = await client.call_tool("search_reactome", {"query": QUESTION})
    for failed in (result, found):
        assert failed.is_error
        hint = failed.content[0].text  # type: ignore[union-attr]
        assert f"run: reactome-answers --home '{home}' ingest --sample" in hint, hint
