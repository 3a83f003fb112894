"""A Sources list the answer model wrote itself reaches no surface (issue 37, item 1), and a
failed answer lists only what its partial text cites (item 2).

The rule is read on its own (which texts lose a section, which keep every line, for any split
into tokens), through the pipeline in both numbering modes with a replay of each log (the
autouse fixture), and through a real ``serve`` on every surface that shows an answer: native
JSON and SSE, the AI SDK's stream, MCP's ``ask_reactome``, the OpenAI route and the CLI.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import httpx2
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.language_models import BaseChatModel, FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from callbacks.events import DoneEvent, TokenEvent
from callbacks.handler import AnswerEventHandler
from pipelines.citations.model_sources import ModelSources, without_model_sources
from pipelines.core.settings import load_settings
from pipelines.core.tags import ANSWER_TAG, RETRIEVAL_TAG
from pipelines.pipeline import AnswerPipeline
from tests.support.cli import cli
from tests.support.fake_openai import FORGED_SITE, OWN_SOURCES, fake_chat, serving_env
from tests.support.fake_pipeline import ABCA1, CDK5, VARIANT, FakeRetriever, make_pipeline
from tests.support.fakes import ScriptedStream
from tests.support.invariants import check_stream
from tests.support.servers import Served, serve_command
from tests.support.sse import parse_sse

ANSWER = "ABCA1 exports cholesterol [1]. Without it HDL is low [2]."

# (the model's text, what remains of it)
REMOVED = [
    (ANSWER + "\n\nSources:\n1. [ABCA1](https://x.example/a)\n2. [HDL](https://x.example/b)\n",
     ANSWER),
    (ANSWER + OWN_SOURCES, ANSWER),
    (ANSWER + "\n\n## References\n\n- [1] Defective ABCA1 causes TGD\n- [2] HDL\n", ANSWER),
    (ANSWER + "\n\n**Citations**\n[ABCA1 at Reactome](https://x.example/abca1)", ANSWER),
    (ANSWER + "\nSources\nhttps://x.example/a\n<https://x.example/b>\n\n", ANSWER),
    (ANSWER + "\n\nBibliography:\n* one\n+ two\n3) three", ANSWER),
    (ANSWER + "\n\nReferences:", ANSWER),  # a bare heading that ends the answer
    # Its like in each language an answer may be asked in.
    (ANSWER + "\n\n**Fuentes:**\n- [ABCA1](https://forged.example/a)", ANSWER),
    (ANSWER + "\n\nReferências:\n1. https://forged.example/a", ANSWER),
    (ANSWER + "\n\n## Quellen\n- [1] ABCA1", ANSWER),
    (ANSWER + "\n\nRéférences :\n- <https://forged.example/a>", ANSWER),
    (ANSWER + "\n\nFonti:\n1) [HDL](https://forged.example/b)", ANSWER),
    (ANSWER + "\n\n参考文献\N{FULLWIDTH COLON}\n1. https://forged.example/a", ANSWER),
    (ANSWER + "\n\n### 出典\n- [ABCA1](https://forged.example/a)", ANSWER),
    (ANSWER + "\n\n出典\N{FULLWIDTH COLON}\n\N{KATAKANA MIDDLE DOT}Reactome: https://f.example",
     ANSWER),
    (ANSWER + "\n\n参考文献\n1\N{FULLWIDTH FULL STOP}Reactome https://forged.example", ANSWER),
]  # fmt: skip
KEPT = [
    ANSWER,
    # A URL inside an ordinary sentence stays, and so does a line that only starts like one.
    "See https://reactome.org/content/detail/R-HSA-5682113 for the pathway [1].",
    "Sources of cholesterol include the diet [1].\n- and the liver [2].",
    "References to ABCA1 abound [1].",
    # A list with prose after it was not the end of the answer.
    "Sources:\n- [a](https://x.example/a)\n\nABCA1 exports cholesterol [1].",
    "## Sources of HDL\n- ABCA1 [1]\n- LCAT [2]\n\nBoth matter.",
    # Items that cite our sources by marker are the answer, even under a bare heading and at
    # the very end: removing them would take the answer's text and citations along.
    "Cholesterol comes from two places.\n\n## Sources\n- Dietary intake [1]\n"
    "- De novo synthesis in the liver [2]\n",
    "Two sources:\n\nSources:\n1. The diet [1]\n2. The liver [2]",
    # A heading word that begins a sentence in another language is prose.
    "Fuentes de colesterol: la dieta [1].\n- y el hígado [2].",
    "来源于肝脏的胆固醇 [1]。\n- 饮食 [2]",
]


@pytest.mark.parametrize(("text", "remains"), REMOVED)
def test_a_trailing_sources_section_of_the_models_own_is_removed(text: str, remains: str) -> None:
    assert without_model_sources(text) == remains


@pytest.mark.parametrize("text", KEPT)
def test_text_that_is_no_trailing_sources_section_is_kept_as_written(text: str) -> None:
    assert without_model_sources(text) == text


def _pieces(text: str, cuts: Sequence[int]) -> list[str]:
    points = sorted({0, len(text), *(cut % (len(text) + 1) for cut in cuts)})
    return [text[a:b] for a, b in itertools.pairwise(points)]


@given(
    st.sampled_from([text for text, _ in REMOVED] + KEPT),
    st.lists(st.integers(min_value=0, max_value=500), max_size=40),
)
def test_any_split_into_tokens_gives_the_same_text(text: str, cuts: list[int]) -> None:
    sources = ModelSources()
    streamed = "".join(sources.feed(piece) for piece in _pieces(text, cuts)) + sources.close()
    assert streamed == without_model_sources(text)


# --- through the pipeline ----------------------------------------------------------------------


def test_an_answer_without_such_a_section_keeps_its_token_boundaries() -> None:
    # Spaces inside a line go out with their token; only a line break waits, in case a
    # heading follows. So a log recorded before the filter replays token for token.
    tokens = ["ABCA1 ", "exports ", "cholesterol ", "[1]. ", "HDL ", "is ", "low."]
    sources = ModelSources()
    assert [sources.feed(token) for token in tokens] == tokens
    assert sources.close() == ""
    held = ModelSources()
    assert [held.feed(t) for t in ["low.", "\n\n", "More."]] == ["low.", "", "\n\nMore."]


def _tokens(events: Sequence[Any]) -> str:
    return "".join(event.data.text for event in events if isinstance(event, TokenEvent))


@pytest.mark.parametrize("live", [False, True])
def test_the_pipeline_streams_and_finishes_without_the_models_own_list(live: bool) -> None:
    # FakeListChatModel streams one character at a time: the heading arrives in pieces.
    pipeline, _, _ = make_pipeline([ABCA1, CDK5, VARIANT], ANSWER + OWN_SOURCES)
    events = list(pipeline.stream("What does ABCA1 do?", live_citations=live))
    done = check_stream(events)
    assert FORGED_SITE not in _tokens(events)
    assert "Sources" not in _tokens(events)
    assert "Sources" not in done.data.text
    assert done.data.text == "ABCA1 exports cholesterol [1]. Without it HDL is low [2]."
    if live:
        assert _tokens(events) == done.data.text
    else:
        assert _tokens(events) == ANSWER  # the model's own markers; done has the final ones
    assert [r.st_id for r in done.data.references] == [ABCA1.metadata["st_id"], "R-HSA-8862803"]


class _Whole(BaseChatModel):
    """A chat model without a stream of its own: one reply, no token callbacks."""

    reply: str

    @property
    def _llm_type(self) -> str:
        return "whole-reply"

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self.reply))])


def test_a_model_that_does_not_stream_loses_its_list_too() -> None:
    pipeline = AnswerPipeline(
        load_settings(),
        answer_model=_Whole(reply=ANSWER + OWN_SOURCES),
        expander_model=FakeListChatModel(responses=["unused"]),
        retriever=FakeRetriever(documents=[ABCA1, CDK5]),
        raise_handler_errors=True,
    )
    result = pipeline.invoke("What does ABCA1 do?")
    assert result["state"] == "answered"
    assert result["text"] == ANSWER


def test_a_held_heading_that_opens_no_list_reaches_the_reader() -> None:
    # "References" is held while it may head a list; prose after it releases it whole.
    text = "ABCA1 exports cholesterol [1].\n\nReferences\nare in the pathway's own page."
    pipeline, _, _ = make_pipeline([ABCA1], text)
    for live in (False, True):
        events = list(pipeline.stream("What does ABCA1 do?", live_citations=live))
        done = check_stream(events)
        assert done.data.text == text
        assert _tokens(events) == text


# --- a failed answer lists only what its partial text cites ---------------------------------


def _failing(answer: str, after_chunks: int) -> FakeListChatModel:
    return FakeListChatModel(responses=[answer], error_on_chunk_number=after_chunks)


@pytest.mark.parametrize("live", [False, True])
def test_a_failure_before_any_text_lists_no_source(live: bool) -> None:
    pipeline, _, _ = make_pipeline([ABCA1, CDK5, VARIANT], _failing(ANSWER, 0))
    done = check_stream(list(pipeline.stream("What does ABCA1 do?", live_citations=live)))
    assert done.data.state == "failed"
    assert done.data.text == ""
    assert done.data.references == []


@pytest.mark.parametrize("live", [False, True])
def test_a_failure_after_some_text_lists_what_it_cites(live: bool) -> None:
    answer = "ABCA1 exports cholesterol [2]. More text that never arrives [3]."
    cut = answer.index("More") + 2
    pipeline, _, _ = make_pipeline([ABCA1, CDK5, VARIANT], _failing(answer, cut))
    done = check_stream(list(pipeline.stream("What does ABCA1 do?", live_citations=live)))
    assert done.data.state == "failed"
    assert [r.st_id for r in done.data.references] == ["R-HSA-8862803"]


def test_a_failure_whose_text_cites_nothing_lists_no_source() -> None:
    cut = len("ABCA1 exports")
    pipeline, _, _ = make_pipeline([ABCA1, CDK5], _failing("ABCA1 exports cholesterol.", cut))
    result = pipeline.invoke("What does ABCA1 do?")
    expected: tuple[str, str, list[object]] = ("failed", "ABCA1 exports", [])
    assert (result["state"], result["text"], result["references"]) == expected


def test_an_answer_that_cites_nothing_still_keeps_the_untouched_list() -> None:
    # What the fallback is for: a grounded answer, not a failed one.
    pipeline, _, _ = make_pipeline([ABCA1, CDK5], "ABCA1 exports cholesterol.")
    result = pipeline.invoke("What does ABCA1 do?")
    assert result["state"] == "answered"
    assert len(result["references"]) == 2


def test_a_scripted_stream_in_words_loses_the_list(sample_home: Path) -> None:
    """Real retrieval over the sample corpus; the model streams word by word, as servers do."""

    def script(_: Sequence[BaseMessage]) -> list[str]:
        words = (ANSWER + OWN_SOURCES).split(" ")
        return [word + " " for word in words[:-1]] + [words[-1]]

    settings = load_settings(home=sample_home, event_logs=False)
    pipeline = AnswerPipeline(
        settings,
        answer_model=ScriptedStream(script=script),
        expander_model=FakeListChatModel(responses=["{}"]),
    )
    events = list(pipeline.stream("What causes Tangier disease?", live_citations=True))
    done = check_stream(events)
    assert FORGED_SITE not in done.data.text
    assert done.data.text == _tokens(events)
    assert done.data.text.endswith("[2].")


# --- every surface of a real server -----------------------------------------------------------

QUESTION = "What causes Tangier disease?"


@pytest.fixture(scope="module")
def own_sources_server(sample_home: Path) -> Iterator[tuple[Served, dict[str, str]]]:
    with fake_chat("own_sources") as fake:
        env = serving_env(fake)
        with serve_command(sample_home, env=env) as served:
            yield served, env


def _assert_clean(text: str, where: str) -> None:
    assert FORGED_SITE not in text, f"{where} shows the model's own links"
    assert "definitive pathway" not in text, f"{where} shows the model's own list"


@pytest.mark.slow
def test_native_json_and_sse_show_no_list_of_the_models_own(
    own_sources_server: tuple[Served, dict[str, str]],
) -> None:
    served, _ = own_sources_server
    answer = httpx.post(f"{served.base}/v1/answer", json={"question": QUESTION}, timeout=120)
    assert answer.status_code == 200
    _assert_clean(answer.text, "/v1/answer")
    assert answer.json()["references"]
    for live in (False, True):
        body = {"question": QUESTION, "live_citations": live}
        streamed = httpx.post(f"{served.base}/v1/answer/stream", json=body, timeout=120)
        _assert_clean(streamed.text, "/v1/answer/stream")
        events = parse_sse(streamed.text)
        done = check_stream(events)
        assert isinstance(done, DoneEvent)
        assert done.data.text == answer.json()["text"]


@pytest.mark.slow
def test_the_ai_sdk_stream_and_the_openai_route_show_no_list_of_the_models_own(
    own_sources_server: tuple[Served, dict[str, str]],
) -> None:
    served, _ = own_sources_server
    message = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": QUESTION}]}
    chat = httpx.post(f"{served.base}/api/chat", json={"messages": [message]}, timeout=120)
    assert chat.status_code == 200
    _assert_clean(chat.text, "/api/chat")
    assert '"type":"source-url"' in chat.text.replace(" ", "")
    client = openai.OpenAI(base_url=f"{served.base}/v1", api_key="unused", max_retries=0)
    messages: Any = [{"role": "user", "content": QUESTION}]
    completion = client.chat.completions.create(model="reactome-answers", messages=messages)
    content = completion.choices[0].message.content or ""
    _assert_clean(content, "/v1/chat/completions")
    assert content.count("Sources:") == 1  # ours, appended


@pytest.mark.slow
async def test_mcp_ask_reactome_shows_no_list_of_the_models_own(
    own_sources_server: tuple[Served, dict[str, str]],
) -> None:
    served, _ = own_sources_server
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300)) as http,
        Client(streamable_http_client(f"{served.base}/mcp", http_client=http)) as client,
    ):
        result = await client.call_tool("ask_reactome", {"question": QUESTION})
    assert not result.is_error
    shown = "".join(getattr(part, "text", "") for part in result.content)
    _assert_clean(shown, "ask_reactome's text")
    _assert_clean(json.dumps(result.structured_content), "ask_reactome's structured content")
    assert (result.structured_content or {}).get("references")


@pytest.mark.slow
def test_the_cli_shows_no_list_of_the_models_own(
    own_sources_server: tuple[Served, dict[str, str]], sample_home: Path
) -> None:
    _, env = own_sources_server
    asked = cli(sample_home, "ask", QUESTION, env=env)
    assert asked.returncode == 0, asked.stderr
    _assert_clean(asked.stdout, "ask")
    assert asked.stdout.count("Sources:") == 1  # ours, after the answer


@pytest.mark.slow
def test_a_failed_answer_over_http_lists_no_source(sample_home: Path) -> None:
    with fake_chat("fail_before") as fake, serve_command(sample_home, env=serving_env(fake)) as s:
        answer = httpx.post(f"{s.base}/v1/answer", json={"question": QUESTION}, timeout=120)
        streamed = httpx.post(
            f"{s.base}/v1/answer/stream", json={"question": QUESTION}, timeout=120
        )
    assert answer.json()["state"] == "failed"
    assert answer.json()["references"] == []
    done = check_stream(parse_sse(streamed.text))
    assert done.data.state == "failed"
    assert done.data.references == []


def test_what_the_filter_holds_counts_in_the_live_hold_timings() -> None:
    # A heading and a list are held until prose after them shows they were no Sources
    # section: done.timings says how long and how much, as for a marker live numbering holds.
    clock = [0.0]
    events: list[Any] = []
    handler = AnswerEventHandler(
        request_id="held", emit=events.append, live_citations=True, clock=lambda: clock[0]
    )
    handler.start("q", ["auto"], {})
    retrieval, model = uuid.uuid4(), uuid.uuid4()
    handler.on_retriever_start(None, "q", run_id=retrieval, tags=[RETRIEVAL_TAG])
    handler.on_retriever_end([ABCA1, CDK5], run_id=retrieval)
    handler.on_chat_model_start(None, [], run_id=model, tags=[ANSWER_TAG])
    held = ["\n", "\n", "Sources:\n", "- a\n", "- b\n"]
    for token in ["ABCA1 exports cholesterol [1].", *held, "But CDK5 [2] too."]:
        handler.on_llm_new_token(token, run_id=model)
        clock[0] += 5.0  # seconds between tokens
    done = handler.finish("answered")
    assert done.data.text.endswith("\n\nSources:\n- a\n- b\nBut CDK5 [2] too.")
    # The first line break waited from its arrival until the prose came, five tokens later.
    assert done.data.timings.held_back_ms == 25_000.0
    assert done.data.timings.held_back_chars == len("".join(held))
