"""Answers in the asker's language, through the real pipeline over the ingested sample and
every surface a client uses: the language in ``done`` (detected, or named by the request), the
extractive answer's opening sentence, the fixed texts in that language, and the answer
model's input naming it. (Which retrieval finds a translated question's sources is measured
by ``make eval``; here the sample's own words are enough.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from langchain_core.embeddings import Embeddings
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp_types import INVALID_PARAMS
from openai import OpenAI

from callbacks.events import DoneEvent, StartEvent
from callbacks.log_records import model_input
from pipelines.catalog.catalog import catalog_for
from pipelines.core.settings import load_settings
from pipelines.language import fixed_text
from pipelines.pipeline import AnswerPipeline
from tests.support.browser import launched
from tests.support.cli import cli
from tests.support.fake_openai import FakeChat, fake_chat
from tests.support.logs import answered_with_log
from tests.support.servers import Served, serve_command
from tests.support.sse import parse_sse

pytestmark = pytest.mark.slow  # `serve` in a subprocess, real clients, Chromium

ENGLISH = "What causes Tangier disease, and what does ABCA1 do?"
SPANISH = "¿Qué causa la enfermedad de Tangier y qué hace ABCA1?"
GERMAN = "Was verursacht die Tangier-Krankheit, und was macht ABCA1?"
ADVICE = "Should I stop taking my statins if my HDL is low?"
OFF_TOPIC = "What is the capital of Peru?"
CHINESE_OWN_DOSE = "我应该每天服用多少毫克的阿托伐他汀\N{FULLWIDTH QUESTION MARK}"


@pytest.fixture(scope="module")
def served(sample_home: Path) -> Iterator[Served]:
    with serve_command(sample_home) as served:
        yield served


def _answer(base: str, **body: Any) -> dict[str, Any]:
    response = httpx.post(f"{base}/v1/answer", json=body, timeout=120)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def _ids(result: dict[str, Any]) -> list[str]:
    return [reference["st_id"] for reference in result["references"]]


def _ai_sdk_metadata(base: str, **body: Any) -> dict[str, Any]:
    messages = [{"role": "user", "parts": [{"type": "text", "text": body.pop("question")}]}]
    response = httpx.post(f"{base}/api/chat", json={"messages": messages, **body}, timeout=120)
    assert response.status_code == 200, response.text
    frames = [
        json.loads(line.removeprefix("data: "))
        for line in response.text.splitlines()
        if line.startswith("data: {")
    ]
    finish = next(frame for frame in frames if frame["type"] == "finish")
    metadata: dict[str, Any] = finish["messageMetadata"]
    return metadata


async def _mcp_tool(base: str, tool: str, **arguments: Any) -> dict[str, Any]:
    """The structured result of one call of ``tool`` over Streamable HTTP."""
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300)) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client,
    ):
        result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    structured: dict[str, Any] = result.structured_content or {}
    return structured


async def _mcp_bad_arguments(base: str, **arguments: Any) -> MCPError:
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300)) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client,
    ):
        with pytest.raises(MCPError) as caught:
            await client.call_tool("ask_reactome", arguments)
    return caught.value


def test_a_spanish_question_is_answered_as_spanish_with_its_english_forms_sources(
    served: Served,
) -> None:
    english = _answer(served.base, question=ENGLISH)
    spanish = _answer(served.base, question=SPANISH)
    assert english["language"] == "en"
    assert spanish["language"] == "es"
    assert english["state"] == spanish["state"] == "answered"
    assert _ids(english)[0] in _ids(spanish)
    # The extractive model quotes English sentences: one sentence in Spanish says so first.
    opening = fixed_text("quoted_in_english", "es")
    assert opening
    assert spanish["text"].startswith(opening)
    assert not english["text"].startswith(opening)


def test_every_surface_carries_the_language(served: Served) -> None:
    base = served.base
    events = parse_sse(
        httpx.post(f"{base}/v1/answer/stream", json={"question": SPANISH}, timeout=120).text
    )
    start, done = events[0], events[-1]
    assert isinstance(start, StartEvent)
    assert isinstance(done, DoneEvent)
    assert start.data.options["language"] == "es"
    assert start.data.options["language_from"] == "question"
    assert done.data.language == "es"

    openai = OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
    try:
        completion = openai.chat.completions.create(
            model="reactome-answers", messages=[{"role": "user", "content": GERMAN}]
        )
        named = openai.chat.completions.create(
            model="reactome-answers",
            messages=[{"role": "user", "content": ENGLISH}],
            extra_body={"language": "pt-BR"},
        )
    finally:
        openai.close()
    assert (completion.model_extra or {})["language"] == "de"
    # The text-only Sources list is headed in the asker's language.
    assert f"\n\n{fixed_text('sources_heading', 'de')}\n1. [" in str(
        completion.choices[0].message.content
    )
    assert (named.model_extra or {})["language"] == "pt"

    assert _ai_sdk_metadata(base, question=SPANISH)["language"] == "es"
    assert _ai_sdk_metadata(base, question=SPANISH, language="fr")["language"] == "fr"

    assert anyio_run(_mcp_tool, base, "ask_reactome", question=GERMAN)["language"] == "de"
    # A search refused for the asker's own dose says so in the language it was asked in.
    searched = anyio_run(_mcp_tool, base, "search_reactome", query=CHINESE_OWN_DOSE)
    assert searched["refused"] == fixed_text("advice_refusal", "zh")
    named_over_mcp = anyio_run(_mcp_tool, base, "ask_reactome", question=ENGLISH, language="it")
    assert named_over_mcp["language"] == "it"


def anyio_run(function: Any, *args: Any, **kwargs: Any) -> Any:
    import anyio

    return anyio.run(lambda: function(*args, **kwargs))


def test_a_language_we_do_not_answer_in_is_refused_naming_it_on_every_surface(
    served: Served, sample_home: Path
) -> None:
    base = served.base
    native = httpx.post(f"{base}/v1/answer", json={"question": ENGLISH, "language": "tlh"})
    assert native.status_code == 422
    assert "'tlh'" in native.text
    assert "es, pt, fr, de, it, zh, ja" in native.text
    chat = httpx.post(
        f"{base}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": ENGLISH}], "language": "tlh"},
    )
    assert chat.status_code == 400
    assert "'tlh'" in chat.json()["error"]["message"]
    messages = [{"role": "user", "parts": [{"type": "text", "text": ENGLISH}]}]
    ui = httpx.post(f"{base}/api/chat", json={"messages": messages, "language": "tlh"})
    assert ui.status_code == 422
    assert "'tlh'" in ui.text
    refused = anyio_run(_mcp_bad_arguments, base, question=ENGLISH, language="tlh")
    assert refused.error.code == INVALID_PARAMS
    assert refused.error.message.startswith("language 'tlh' is not one we answer in")
    result = cli(sample_home, "ask", "--language", "tlh", ENGLISH)
    assert result.returncode == 2
    assert "--language: language 'tlh' is not one we answer in" in result.stderr


def test_refusals_and_nothing_found_are_written_in_the_askers_language(served: Served) -> None:
    refused = _answer(served.base, question=ADVICE, language="fr")
    assert refused["state"] == "refused"
    assert refused["language"] == "fr"
    assert refused["text"] == fixed_text("advice_refusal", "fr")
    # Detected, and refused in the language it was asked in.
    dose = _answer(served.base, question=CHINESE_OWN_DOSE)
    assert dose["state"] == "refused"
    assert dose["language"] == "zh"
    assert dose["text"] == fixed_text("advice_refusal", "zh")
    nothing = _answer(served.base, question=OFF_TOPIC, language="ja")
    assert nothing["state"] == "nothing_found"
    assert nothing["text"] == catalog_for().nothing_found("ja")
    assert nothing["text"] != catalog_for().nothing_found()


def test_the_runnable_result_carries_the_language(sample_home: Path, minilm: Embeddings) -> None:
    pipeline = AnswerPipeline(
        load_settings(home=sample_home), embeddings=minilm, raise_handler_errors=True
    )
    runnable = pipeline.as_runnable()
    assert runnable.invoke({"question": SPANISH})["language"] == "es"
    named = runnable.invoke({"question": ENGLISH, "language": "de"})
    assert named["language"] == "de"
    assert named["text"].startswith(fixed_text("quoted_in_english", "de"))
    # A follow-up of symbols alone keeps the conversation's language.
    history = [{"role": "user", "content": SPANISH}, {"role": "assistant", "content": "..."}]
    assert runnable.invoke({"question": "¿Y TP53?", "history": history})["language"] == "es"
    assert runnable.invoke({"question": "¿Y TP53?"})["language"] == "en"
    # Refused by its length before any search (the HTTP routes turn it away earlier).
    long = runnable.invoke({"question": "ABCA1 " * 2000, "language": "de"})
    assert long["state"] == "refused"
    assert long["text"].startswith("Die Frage hat 12.000 Zeichen")


@pytest.fixture
def chat_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeChat]:
    """A real OpenAI-compatible server on 127.0.0.1 that answers with the sources' markers."""
    with fake_chat("ok") as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
        yield fake


@pytest.mark.usefixtures("chat_server")
def test_a_generative_models_logged_input_names_the_language_and_keeps_the_markers(
    sample_home: Path, minilm: Embeddings
) -> None:
    pipeline = AnswerPipeline(
        load_settings(home=sample_home, llm="openai:local-model"),
        embeddings=minilm,
        raise_handler_errors=True,
    )
    done, log = answered_with_log(pipeline, SPANISH, sample_home)
    assert done.data.language == "es"
    messages = model_input(log)
    assert messages is not None
    system, human = messages[0]["content"], messages[-1]["content"]
    assert "Write the answer in Spanish (language code es)" in system
    assert "every [n] marker exactly as given" in system
    # The question is asked as written, tagged with its language; the search query is not.
    assert f'<question lang="es">\n{SPANISH}\n</question>' in human
    assert '<source n="1"' in human
    # The fake model answers with the sources' markers; they reach the answer as given.
    assert done.data.references
    assert "[1]" in done.data.text


def test_the_web_client_shows_a_german_answer_with_lang_de(served: Served) -> None:
    with launched() as browser:
        context = browser.new_context()
        context.set_default_timeout(90_000)
        page = context.new_page()
        try:
            page.goto(f"{served.base}/")
            page.fill("#question", GERMAN)
            page.click("#submit")
            page.wait_for_selector(
                "#answer[data-state]:not([data-state=streaming])", state="attached"
            )
            assert page.get_attribute("#answer", "lang") == "de"
            assert page.get_attribute("#asked", "lang") == "de"
            assert fixed_text("sources_heading", "de") != ""
            assert str(page.text_content("#answer")).startswith(
                fixed_text("quoted_in_english", "de")
            )
            # A reader's choice is sent, and the answer follows it.
            page.select_option("#language", "it")
            page.fill("#question", ENGLISH)
            page.click("#submit")
            page.wait_for_function(
                "() => document.getElementById('answer').lang === 'it'"
                " && document.getElementById('answer').dataset.state !== 'streaming'"
            )
            # The German turn moved up the page, keeping its language.
            assert page.eval_on_selector_all(
                "#conversation .turn [lang]", "nodes => nodes.map(n => n.lang)"
            ) == ["de", "de"]
        finally:
            context.close()
