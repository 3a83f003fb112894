"""``AnswerPipeline.as_runnable()`` inside applications built the LangChain way: a LangGraph
graph with the pipeline as a node, and an LCEL chain. Their ``astream_events`` show our events
as custom events, in our order, and the output is the finalized answer."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langgraph.graph import END, START, StateGraph

from pipelines.core.errors import InputError
from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline

QUESTION = "What causes Tangier disease?"


class _State(TypedDict, total=False):
    question: str
    answer: dict[str, Any]


@pytest.fixture
def pipeline(sample_home: Path, minilm: Embeddings) -> AnswerPipeline:
    return AnswerPipeline(load_settings(home=sample_home), embeddings=minilm)


def _graph(pipeline: AnswerPipeline) -> Any:
    runnable = pipeline.as_runnable()

    async def answer(state: _State, config: RunnableConfig) -> _State:
        result = await runnable.ainvoke(
            {"question": state["question"], "live_citations": True}, config
        )
        return {"answer": result}

    graph = StateGraph(_State)
    graph.add_node("answer", answer)
    graph.add_edge(START, "answer")
    graph.add_edge("answer", END)
    return graph.compile()


def test_a_langgraph_node_shows_our_events_in_order(pipeline: AnswerPipeline) -> None:
    graph = _graph(pipeline)

    async def run() -> list[dict[str, Any]]:
        return [e async for e in graph.astream_events({"question": QUESTION}, version="v2")]

    events = asyncio.run(run())
    ours = [e for e in events if e["event"] == "on_custom_event"]
    names = [e["name"] for e in ours]
    assert names[0] == "start"
    assert names[-1] == "done"
    first_token = names.index("token")
    assert "citation" in names[:first_token]
    assert "citation" not in names[first_token:]  # every citation before the first token
    assert "reference" in names  # live numbering was asked for
    done = ours[-1]["data"]
    assert done["type"] == "done"
    assert done["data"]["state"] == "answered"
    tokens = "".join(e["data"]["data"]["text"] for e in ours if e["name"] == "token")
    assert tokens == done["data"]["text"]  # live: the tokens are the final text

    (end,) = [e for e in events if e["event"] == "on_chain_end" and e["name"] == "LangGraph"]
    output = end["data"]["output"]["answer"]
    assert output["text"] == done["data"]["text"]
    assert output["references"] == done["data"]["references"]
    assert output["request_id"] == done["request_id"]
    # The evidence for each citation, in the done event and in the output alike.
    evidence = done["data"]["evidence"]
    assert evidence
    assert {item["n"] for item in evidence} == {r["n"] for r in output["references"]}
    for item in evidence:
        start, end = item["sentence"]
        assert f"[{item['n']}]" in done["data"]["text"][start:end]
        assert item["quote"]
        assert item["supported"] is True  # the extractive answer quotes its sources
    assert output["evidence"] == evidence


def test_in_an_lcel_chain_sync_and_async_give_the_finalized_answer(
    pipeline: AnswerPipeline,
) -> None:
    def ask(question: str) -> dict[str, Any]:
        return {"question": question}

    chain: Runnable[str, dict[str, Any]] = RunnableLambda(ask) | pipeline.as_runnable()
    result = chain.invoke(QUESTION)
    assert result["state"] == "answered"
    assert result["references"]
    again = asyncio.run(chain.ainvoke(QUESTION))
    for key in ("state", "text", "references", "evidence"):
        assert again[key] == result[key]
    assert result["evidence"]
    assert again["request_id"] != result["request_id"]
    direct = pipeline.invoke(QUESTION)
    assert result["text"] == direct["text"]


def test_a_bad_input_says_what_the_runnable_takes(pipeline: AnswerPipeline) -> None:
    runnable = pipeline.as_runnable()
    with pytest.raises(InputError, match="no question"):
        runnable.invoke({"query": QUESTION})
    with pytest.raises(InputError, match="does not take: k"):
        runnable.invoke({"question": QUESTION, "k": 3})
