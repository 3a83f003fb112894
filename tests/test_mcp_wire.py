"""Which MCP messages at `/mcp` run an answer (only a call of `ask_reactome` takes a slot of
the answer cap), and the shape of a refusal there, through the real middleware."""

from __future__ import annotations

import json

from langchain_core.language_models import FakeListChatModel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.testclient import TestClient

from app._access import AnswerCap, AnswerSlots
from app._mcp_wire import MCP_PATH, calls_the_answer_tool
from app._server_settings import load_server_settings
from app.server import create_app
from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline


def _call(name: str, id_: int = 1) -> dict[str, object]:
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


async def _echo(request: Request) -> Response:
    return Response(await request.body(), media_type="application/json")


def test_the_cap_holds_answer_calls_at_mcp_and_lets_the_rest_through_intact() -> None:
    slots = AnswerSlots(1)
    app = Starlette(routes=[Route(MCP_PATH, _echo, methods=["POST"])])
    app.add_middleware(AnswerCap, slots=slots, paths={MCP_PATH})
    listing = {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}
    with TestClient(app) as client:
        assert slots.try_take()  # another answer has the only slot
        # What runs no answer goes on, and the app reads the body the cap read first.
        passed = client.post(MCP_PATH, json=listing)
        assert passed.status_code == 200
        assert passed.json() == listing
        assert client.post(MCP_PATH, json=_call("search_reactome")).json()["id"] == 1
        # The body decides, whatever the headers say (the SDK holds a legacy request to none).
        disguised = {"Mcp-Method": "tools/list", "Mcp-Name": "search_reactome"}
        assert (
            client.post(MCP_PATH, json=_call("ask_reactome"), headers=disguised).status_code == 429
        )
        # An answer is refused as a JSON-RPC error an MCP client shows, with the cap's reason.
        refused = client.post(MCP_PATH, json=_call("ask_reactome"))
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "1"
        error = refused.json()
        assert error["jsonrpc"] == "2.0"
        assert error["id"] is None
        assert error["error"]["code"] == -32000
        assert "REACTOME_ANSWERS_MAX_CONCURRENT_ANSWERS" in error["error"]["message"]
        assert error["error"]["data"] == {"code": "too_many_answers", "status": 429}
        slots.give_back()
        # With the slot free the call runs, its body intact, and gives the slot back.
        answered = client.post(MCP_PATH, json=_call("ask_reactome", 9))
        assert answered.json() == _call("ask_reactome", 9)
        assert slots.in_use == 0


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
