"""What the HTTP layer reads of an MCP message at `/mcp`: whether it runs an answer (only a
call of `ask_reactome` takes a slot of the answer cap), whether the rate limit counts it
(tool calls and resource reads), and the id a refusal answers; and that the app serves MCP
each time it starts. tests/mcp/test_guards.py drives the limits through the real server."""

from __future__ import annotations

import json

from langchain_core.language_models import FakeListChatModel
from starlette.testclient import TestClient

from app.http.factory import create_app
from app.http.protocols.mcp_wire import MCP_PATH, Posted, calls_the_answer_tool, read_posted
from app.http.settings import load_server_settings
from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline


def _call(name: str, id_: int | str = 1) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call",
            "params": {"name": name, "arguments": {"question": "What is ABCA1?"}}}  # fmt: skip


def test_only_a_call_of_the_answer_tool_runs_an_answer() -> None:
    def body(message: object) -> bytes:
        return json.dumps(message).encode()

    assert calls_the_answer_tool(body(_call("ask_reactome")))
    assert not calls_the_answer_tool(body(_call("search_reactome")))
    assert not calls_the_answer_tool(body({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
    assert not calls_the_answer_tool(body({"method": "tools/call", "params": "ask_reactome"}))
    # A batch runs an answer when any message in it does.
    assert calls_the_answer_tool(body([_call("search_reactome", 1), _call("ask_reactome", 2)]))
    assert not calls_the_answer_tool(b"{not json")
    assert not calls_the_answer_tool(b"")
    assert not calls_the_answer_tool(b"[" * 100_000 + b"]" * 100_000)  # too deep to read


def test_tool_calls_and_resource_reads_count_and_a_lone_requests_id_is_read() -> None:
    def posted(message: object) -> Posted:
        return read_posted(json.dumps(message).encode())

    assert posted(_call("search_reactome", 3)) == Posted(counts=True, request_id=3)
    assert posted(_call("ask_reactome", "a")).calls_the_answer_tool
    read = {"jsonrpc": "2.0", "id": 4, "method": "resources/read", "params": {"uri": "x"}}
    assert posted(read).counts
    for method in ("initialize", "tools/list", "ping", "server/discover", "resources/list"):
        assert posted({"jsonrpc": "2.0", "id": 5, "method": method}) == Posted(request_id=5)
    assert not posted({"jsonrpc": "2.0", "method": "notifications/initialized"}).counts
    # A 2026-era request names its protocol version in _meta; its result needs a resultType.
    modern = _call("ask_reactome", 6)
    modern["params"]["_meta"] = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}  # type: ignore[index]
    assert posted(modern).modern
    # Only a string or a number is an id; a batch has none of its own.
    assert posted({"jsonrpc": "2.0", "id": True, "method": "ping"}).request_id is None
    assert posted([_call("ask_reactome", 7)]) == Posted(counts=True, calls_the_answer_tool=True)
    assert read_posted(b"{not json") == Posted()


def test_the_app_serves_mcp_each_time_it_is_started() -> None:
    settings = load_settings()
    pipeline = AnswerPipeline(settings, answer_model=FakeListChatModel(responses=["x"]),
                              expander_model=FakeListChatModel(responses=["{}"]))  # fmt: skip
    app = create_app(settings, pipeline=pipeline, server=load_server_settings())
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    accept = {"Accept": "application/json, text/event-stream"}
    for _ in range(2):  # a session manager runs once: each start needs its own
        with TestClient(app) as client:
            listed = client.post(MCP_PATH, json=listing, headers=accept)
            assert listed.status_code == 200, listed.text
            assert '"name":"ask_reactome"' in listed.text.replace(" ", "")
