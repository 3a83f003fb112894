"""What `/mcp` lets through and how it refuses, against the real app under uvicorn on
127.0.0.1 and the SDK's own client (`mcp.Client`): GET and DELETE are 405, a foreign
`Origin` and a rebinding `Host` are refused, the rate limit counts only tool calls and
resource reads, the answer cap refuses a call as a tool error the client shows, and the
server says its version and links every reference."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline
from tests.support.fake_pipeline import ABCA1, GUIDE, FakeRetriever, make_pipeline
from tests.support.mcp_app import ANSWER, QUESTION, HeldModel, served_app, until

ACCEPT = {"Accept": "application/json, text/event-stream"}
LEGACY_INIT = {
    "jsonrpc": "2.0",
    "id": 41,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"},
    },
}


def _call(name: str, request_id: int, **arguments: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}  # fmt: skip


def _answering(documents: Sequence[Any] = (ABCA1,), answer: str = ANSWER) -> AnswerPipeline:
    pipeline, _, _ = make_pipeline(documents, answer, event_logs=False)
    return pipeline


@asynccontextmanager
async def _client(base: str, mode: str = "legacy", **headers: str) -> AsyncIterator[Client]:
    timeout = httpx2.Timeout(30, read=120)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http), mode=mode) as client,
    ):
        yield client


async def test_get_and_delete_are_405_so_no_stream_is_left_open() -> None:
    with served_app(_answering()) as base:
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            # What an idle SSE listener sends: answered at once, the connection closed.
            for method in ("GET", "DELETE"):
                response = await http.request(
                    method, "/mcp", headers={"Accept": "text/event-stream"}
                )
                assert response.status_code == 405, method
                assert response.headers["allow"] == "POST"
                assert response.headers["connection"] == "close"
                error = response.json()["error"]
                assert "stateless" in error["message"]
                assert error["data"] == {"code": "method_not_allowed", "status": 405}
        # The SDK's client never opens one here (no session), so it works as before.
        async with _client(base) as client:
            assert len((await client.list_tools()).tools) == 2


async def test_a_foreign_origin_and_a_rebinding_host_are_refused() -> None:
    allowed = "https://assistant.example"
    with served_app(_answering(), cors_origins=allowed) as base:
        port = base.rsplit(":", 1)[1]
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:

            async def post(**headers: str) -> httpx.Response:
                return await http.post("/mcp", json=LEGACY_INIT, headers={**ACCEPT, **headers})

            # A page on another site, and one whose own name now points at this server.
            foreign = await post(Origin="https://evil.example")
            assert foreign.status_code == 403
            body = foreign.json()
            assert body["id"] == 41  # the request's, read from its body
            assert body["error"]["data"] == {"code": "origin_not_allowed", "status": 403}
            assert "https://evil.example" in body["error"]["message"]
            assert "REACTOME_ANSWERS_CORS_ORIGINS" in body["error"]["message"]
            rebound = await post(Host=f"evil.example:{port}")
            assert rebound.status_code == 421
            assert rebound.json()["id"] == 41
            assert rebound.json()["error"]["data"]["code"] == "host_not_allowed"
            assert "evil.example" in rebound.json()["error"]["message"]
            # The same DNS-rebinding request with the page's own Origin: refused either way.
            both = await post(Host=f"evil.example:{port}", Origin=f"http://evil.example:{port}")
            assert both.status_code == 403
            # The origins the operator allows, and the names of this machine, pass.
            for headers in (
                {"Origin": allowed},
                {"Host": f"localhost:{port}"},
                {"Host": f"127.0.0.1:{port}"},
                {"Host": "[::1]"},
            ):
                assert (await post(**headers)).status_code == 200, headers
        # A client outside a browser sends no Origin, and is served.
        async with _client(base) as client:
            assert len((await client.list_tools()).tools) == 2
        # The SDK's client shows the reason of a refusal.
        with pytest.raises(ExceptionGroup) as caught:
            async with _client(base, Origin="https://evil.example"):
                pass
        assert caught.group_contains(MCPError, match="REACTOME_ANSWERS_CORS_ORIGINS")
    # Behind a proxy the operator named, the public name the proxy passes on is served.
    with served_app(_answering(), forwarded_allow_ips="127.0.0.1") as base:
        proxied = httpx.post(
            f"{base}/mcp", json=LEGACY_INIT, headers={**ACCEPT, "Host": "answers.example.org"}
        )
        assert proxied.status_code == 200


async def test_the_rate_limit_counts_tool_calls_not_a_clients_handshakes() -> None:
    limit = 3
    answered = 0
    refused: MCPError | None = None
    with served_app(_answering(), rate_limit=limit) as base:
        # As langchain-mcp-adapters does: a session per tool call (initialize, initialized,
        # the call, and the listing this client reads the output schema from). Bounded: a
        # minute of 3 refills one call in 20 s, far longer than these sessions take.
        for _ in range(limit + 5):
            async with _client(base, "legacy") as client:
                try:
                    result = await client.call_tool("ask_reactome", {"question": QUESTION})
                except MCPError as error:
                    refused = error
                    break
                assert result.structured_content is not None
                answered += result.structured_content["state"] == "answered"
        assert refused is not None, "no call refused with a rate limit of 3 a minute"
        assert answered >= limit  # each call counted once, its session's messages not at all
        assert "REACTOME_ANSWERS_RATE_LIMIT" in refused.error.message
        assert refused.error.data == {"code": "rate_limited", "status": 429}
        # Over HTTP: still a 429 with Retry-After, its body answering the request's id;
        # what is not a call still goes through.
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            listing = {"jsonrpc": "2.0", "id": 8, "method": "tools/list"}
            assert (await http.post("/mcp", json=listing, headers=ACCEPT)).status_code == 200
            over = await http.post("/mcp", json=_call("search_reactome", 9, query="x"),
                                   headers=ACCEPT)  # fmt: skip
            read = {"jsonrpc": "2.0", "id": 10, "method": "resources/read",
                    "params": {"uri": "reactome://collections"}}  # fmt: skip
            over_read = await http.post("/mcp", json=read, headers=ACCEPT)
        assert over.status_code == 429
        assert int(over.headers["retry-after"]) >= 1
        assert over.json()["id"] == 9
        assert over.json()["error"]["data"]["code"] == "rate_limited"
        assert over_read.status_code == 429
        assert over_read.json()["id"] == 10


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_answer_cap_refuses_a_call_as_a_tool_error_the_client_shows(mode: str) -> None:
    model = HeldModel(answer=ANSWER)
    pipeline = AnswerPipeline(
        load_settings(event_logs=False),
        answer_model=model,
        retriever=FakeRetriever(documents=[ABCA1]),
    )
    with served_app(pipeline, max_concurrent_answers=1) as base:
        async with anyio.create_task_group() as group:
            first: list[Any] = []

            async def ask() -> None:
                async with _client(base, mode) as client:
                    first.append(await client.call_tool("ask_reactome", {"question": QUESTION}))

            group.start_soon(ask)
            await until(model.started.is_set, "the first answer reaching the model")
            async with _client(base, mode) as client:
                refused = await client.call_tool("ask_reactome", {"question": QUESTION})
                # What runs no answer goes on meanwhile.
                found = await client.call_tool("search_reactome", {"query": QUESTION})
            assert refused.is_error
            text = refused.content[0].text  # type: ignore[union-attr]
            assert "REACTOME_ANSWERS_MAX_CONCURRENT_ANSWERS" in text
            assert "try again shortly" in text
            assert found.structured_content is not None
            assert found.structured_content["sources"]
            # On the wire: a result for the request's id, not an HTTP error.
            raw = httpx.post(f"{base}/mcp", json=_call("ask_reactome", 77, question=QUESTION),
                             headers=ACCEPT, timeout=30)  # fmt: skip
            assert raw.status_code == 200
            assert raw.json()["id"] == 77
            assert raw.json()["result"]["isError"] is True
            # The body decides, whatever the 2026 era's headers claim (the SDK holds a legacy
            # request to none of them).
            disguised = {**ACCEPT, "Mcp-Method": "tools/list", "Mcp-Name": "search_reactome"}
            sneaked = httpx.post(f"{base}/mcp", json=_call("ask_reactome", 78, question=QUESTION),
                                 headers=disguised, timeout=30)  # fmt: skip
            assert sneaked.json()["result"]["isError"] is True
            model.release.set()
        assert first[0].structured_content["state"] == "answered"


async def test_the_server_says_its_version_and_links_every_reference() -> None:
    pipeline = _answering([GUIDE, ABCA1], "Open the Pathway Browser [1]; ABCA1 [2].")
    with served_app(pipeline) as base:
        async with _client(base, "auto") as client:
            assert client.server_info is not None
            assert client.server_info.version == version("reactome-answers")
            result = await client.call_tool(
                "ask_reactome", {"question": "How do I open the Pathway Browser?",
                                 "cite_urls": True}
            )  # fmt: skip
            found = await client.call_tool("search_reactome", {"query": "Pathway Browser"})
        async with _client(base, "legacy") as legacy:
            assert legacy.server_info is not None
            assert legacy.server_info.version == version("reactome-answers")
    assert result.structured_content is not None
    # A reference has exactly one of st_id and url, and leaves the other out.
    references = result.structured_content["references"]
    links = {ref.get("url") or ref["st_id"]: ref["link"] for ref in references}
    # A user-guide page's url stays the site path the contract gives; its link is absolute,
    # as the OpenAI route's citations are.
    assert links == {
        "/userguide/pathway-browser": "https://reactome.org/userguide/pathway-browser",
        "R-HSA-5682113": "https://reactome.org/content/detail/R-HSA-5682113",
    }
    assert found.structured_content is not None
    hits = {hit["url"] or hit["st_id"]: hit["link"] for hit in found.structured_content["sources"]}
    assert hits == links
