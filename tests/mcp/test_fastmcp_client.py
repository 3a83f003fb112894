"""`/mcp` through a client nobody here wrote: `fastmcp`'s, a session per tool call as agent
frameworks open them, against the real app under uvicorn on 127.0.0.1. Each call counts
against the rate limit and its handshakes do not; the answer cap's refusal, and the rate
limit's, reach the caller with the server's reason."""

from __future__ import annotations

import anyio
import pytest
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp.exceptions import ToolError
from mcp import MCPError

from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline
from tests.support.fake_pipeline import ABCA1, FakeRetriever
from tests.support.mcp_app import ANSWER, QUESTION, HeldModel, served_app, until

KEY = "fastmcp-test-key-7d2e"


def _client(base: str) -> Client[StreamableHttpTransport]:
    headers = {"Authorization": f"Bearer {KEY}"}
    return Client(StreamableHttpTransport(f"{base}/mcp", headers=headers), timeout=120)


async def test_a_session_per_call_gets_the_rate_limit_in_answers_and_then_its_reason() -> None:
    limit = 3
    model = HeldModel(answer=ANSWER)
    model.release.set()  # answers at once; the cap test below holds it
    pipeline = AnswerPipeline(
        load_settings(event_logs=False),
        answer_model=model,
        retriever=FakeRetriever(documents=[ABCA1]),
    )
    answered = 0
    reason = ""
    with served_app(pipeline, api_keys=KEY, rate_limit=limit) as base:
        # Bounded: a minute of 3 refills one call in 20 s, far longer than these sessions.
        for _ in range(limit + 5):
            try:
                async with _client(base) as client:
                    result = await client.call_tool("ask_reactome", {"question": QUESTION})
            except MCPError as error:
                reason = error.error.message
                break
            assert result.structured_content is not None
            answered += result.structured_content["state"] == "answered"
    assert answered >= limit
    assert "REACTOME_ANSWERS_RATE_LIMIT" in reason


async def test_the_answer_cap_reaches_fastmcp_as_a_tool_error_with_the_reason() -> None:
    model = HeldModel(answer=ANSWER)
    pipeline = AnswerPipeline(
        load_settings(event_logs=False),
        answer_model=model,
        retriever=FakeRetriever(documents=[ABCA1]),
    )
    with served_app(pipeline, api_keys=KEY, max_concurrent_answers=1) as base:
        async with anyio.create_task_group() as group:

            async def ask() -> None:
                async with _client(base) as client:
                    await client.call_tool("ask_reactome", {"question": QUESTION})

            group.start_soon(ask)
            await until(model.started.is_set, "the first answer reaching the model")
            async with _client(base) as client:
                with pytest.raises(ToolError, match="REACTOME_ANSWERS_MAX_CONCURRENT_ANSWERS"):
                    await client.call_tool("ask_reactome", {"question": QUESTION})
                busy = await client.call_tool(
                    "ask_reactome", {"question": QUESTION}, raise_on_error=False
                )
            assert busy.is_error
            model.release.set()
