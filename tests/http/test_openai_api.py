"""The OpenAI chat-completions protocol, driven through `serve` on 127.0.0.1 by clients we did
not write: the ``openai`` package and LangChain's ``ChatOpenAI``. What they assemble must be
what ``/v1/answer`` gives for the same question, and their citations its final references."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI

from app.links import reference_link, sources_markdown
from callbacks.events import Reference
from callbacks.log import read_log
from pipelines.retrieval.retriever import EXPANSION
from tests.support.fake_openai import FORGED_SITE, fake_chat, serving_env
from tests.support.servers import Served, serve_command

pytestmark = pytest.mark.slow  # a `serve` subprocess, asked with the OpenAI and LangChain clients

QUESTION = "What causes Tangier disease?"
GUIDE_QUESTION = "How do I export a pathway diagram?"


@pytest.fixture(scope="module")
def served(sample_home: Path) -> Iterator[Served]:
    with serve_command(sample_home) as server:
        yield server


@pytest.fixture
def client(served: Served) -> openai.OpenAI:
    # A local server takes no key; the client insists on one, so give it anything.
    return openai.OpenAI(base_url=f"{served.base}/v1", api_key="unused", max_retries=0)


def native(served: Served, question: str, **body: Any) -> dict[str, Any]:
    response = httpx.post(
        f"{served.base}/v1/answer", json={"question": question, **body}, timeout=120
    )
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def expected_content(answer: dict[str, Any]) -> str:
    references = [Reference.model_validate(r) for r in answer["references"]]
    return str(answer["text"]) + sources_markdown(references)


def links(answer: dict[str, Any]) -> list[str]:
    return [reference_link(Reference.model_validate(r)) for r in answer["references"]]


def test_the_one_model_is_listed(client: openai.OpenAI) -> None:
    assert [model.id for model in client.models.list()] == ["reactome-answers"]


def test_a_completion_is_the_native_answer_with_its_sources(
    client: openai.OpenAI, served: Served
) -> None:
    answer = native(served, QUESTION)
    assert answer["references"], "the sample answers this with sources"

    completion = client.chat.completions.create(
        model="reactome-answers", messages=[{"role": "user", "content": QUESTION}]
    )

    (choice,) = completion.choices
    assert choice.finish_reason == "stop"
    assert choice.message.content == expected_content(answer)
    assert "\n\nSources:\n1. [" in (choice.message.content or "")
    extra = completion.model_extra or {}
    assert extra["references"] == answer["references"]
    assert extra["citations"] == links(answer)
    assert completion.usage is not None
    assert completion.usage.completion_tokens > 0


def test_a_streamed_completion_assembles_to_the_same_text(
    client: openai.OpenAI, served: Served
) -> None:
    answer = native(served, QUESTION)
    stream = client.chat.completions.create(
        model="reactome-answers",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": QUESTION},
        ],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == expected_content(answer)
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) > 3  # streamed
    (last,) = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert last.choices[0].finish_reason == "stop"
    assert (last.model_extra or {})["references"] == answer["references"]
    assert (last.model_extra or {})["citations"] == links(answer)
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens > 0


def test_langchains_chat_openai_pointed_at_us_gets_the_same_answer(served: Served) -> None:
    answer = native(served, QUESTION)
    model = ChatOpenAI(
        base_url=f"{served.base}/v1", api_key="unused", model="reactome-answers", max_retries=0
    )
    assert model.invoke([HumanMessage(QUESTION)]).content == expected_content(answer)
    streamed = "".join(str(chunk.content) for chunk in model.stream([HumanMessage(QUESTION)]))
    assert streamed == expected_content(answer)


def test_earlier_turns_are_the_history(
    client: openai.OpenAI, served: Served, sample_home: Path
) -> None:
    first = client.chat.completions.create(
        model="reactome-answers", messages=[{"role": "user", "content": "What does ABCA1 do?"}]
    )
    turns: list[Any] = [
        {"role": "user", "content": "What does ABCA1 do?"},
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "What disease does a defect in it cause?"},
    ]
    completion = client.chat.completions.create(model="reactome-answers", messages=turns)

    history = [
        ("user", "What does ABCA1 do?"),
        ("assistant", native(served, "What does ABCA1 do?")["text"]),
    ]
    answer = native(
        served,
        "What disease does a defect in it cause?",
        history=[{"role": role, "content": text} for role, text in history],
    )
    assert completion.choices[0].message.content == expected_content(answer)
    references = (completion.model_extra or {})["references"]
    assert references == answer["references"]
    # Taken as being about ABCA1, the follow-up finds the Tangier disease pathway, and the
    # request's log says what it searched for.
    assert "R-HSA-5682113" in [reference.get("st_id") for reference in references]
    request_id = completion.id.removeprefix("chatcmpl-")
    (log,) = (sample_home / "logs").glob(f"*-{request_id}.jsonl")
    contents = read_log(log)
    assert [role for role, _ in contents.header.history] == ["user", "assistant"]
    (searched,) = [
        r["data"]["queries"][0]
        for r in contents.callbacks
        if r["hook"] == "custom_event" and r["name"] == EXPANSION
    ]
    assert searched == "What disease does a defect in ABCA1 cause?"


def test_a_refused_question_is_an_ordinary_completion_saying_why(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(
        model="reactome-answers",
        messages=[{"role": "user", "content": "Can I double my dose of warfarin?"}],
    )
    assert completion.choices[0].finish_reason == "stop"
    assert "doctor or pharmacist" in (completion.choices[0].message.content or "")
    assert (completion.model_extra or {})["citations"] == []


def test_bad_requests_get_openais_error_shape(client: openai.OpenAI, served: Served) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(
            model="reactome-answers", messages=[{"role": "system", "content": "Hello"}]
        )
    assert raised.value.status_code == 400
    body = raised.value.body
    assert isinstance(body, dict)
    assert body["type"] == "invalid_request_error"
    assert "no user message" in body["message"]

    sent: Any
    for sent in ({"messages": []}, {"messages": [{"role": "robot", "content": "x"}]}, [1, 2]):
        response = httpx.post(f"{served.base}/v1/chat/completions", json=sent, timeout=30)
        assert response.status_code == 400
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert error["type"] == "invalid_request_error"
    response = httpx.post(
        f"{served.base}/v1/chat/completions",
        content=b"{not json",
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert response.status_code == 400
    assert "not JSON" in response.json()["error"]["message"]


def test_the_sources_list_can_be_turned_off(sample_home: Path) -> None:
    with serve_command(sample_home, env={"REACTOME_ANSWERS_OPENAI_SOURCES": "false"}) as served:
        client = openai.OpenAI(base_url=f"{served.base}/v1", api_key="unused", max_retries=0)
        answer = native(served, GUIDE_QUESTION, cite_urls=False)
        completion = client.chat.completions.create(
            model="reactome-answers", messages=[{"role": "user", "content": GUIDE_QUESTION}]
        )
        assert completion.choices[0].message.content == answer["text"]
        reply = completion.choices[0].message.content or ""
        # Sent back as history, the turn is taken as it is.
        follow_up = client.chat.completions.create(
            model="reactome-answers",
            messages=[
                {"role": "user", "content": GUIDE_QUESTION},
                {"role": "assistant", "content": reply},
                {"role": "user", "content": "And as an image?"},
            ],
        )
        assert follow_up.choices[0].message.content


def test_a_history_turn_built_to_backtrack_is_read_while_the_server_stays_responsive(
    served: Served, sample_home: Path
) -> None:
    # The reproduction with 32 items: at 27 the old pattern held the worker's event
    # loop for 13 s, and each item doubles that.
    content = "ok\n\nSources:\n" + "1. [a](b)" * 32 + "X"
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": content},
        {"role": "user", "content": QUESTION},
    ]
    url = f"{served.base}/v1/chat/completions"
    with ThreadPoolExecutor(max_workers=1) as pool:
        answer = pool.submit(httpx.post, url, json={"messages": messages}, timeout=120)
        health = []
        while not answer.done():
            # A generous bound for a local health check; a worker stalled by the history
            # would exceed it by minutes.
            health.append(httpx.get(f"{served.base}/healthz", timeout=20).status_code)
        response = answer.result()
    assert health, "healthz was asked while the answer was in flight"
    assert set(health) == {200}, health
    assert response.status_code == 200, response.text
    completion = response.json()
    assert completion["choices"][0]["message"]["content"]
    request_id = completion["id"].removeprefix("chatcmpl-")
    (log,) = (sample_home / "logs").glob(f"*-{request_id}.jsonl")
    # Not our Sources list (it does not end as ours does), so the turn is history as sent.
    assert read_log(log).header.history == (("user", "hi"), ("assistant", content))


def test_a_sources_list_the_model_wrote_itself_gives_way_to_ours(sample_home: Path) -> None:
    with fake_chat("own_sources") as fake:
        env = serving_env(fake)
        with serve_command(sample_home, env=env) as served:
            client = openai.OpenAI(base_url=f"{served.base}/v1", api_key="unused", max_retries=0)
            messages: Any = [{"role": "user", "content": QUESTION}]
            completion = client.chat.completions.create(model="reactome-answers", messages=messages)
            chunks = list(
                client.chat.completions.create(
                    model="reactome-answers", messages=messages, stream=True
                )
            )
    references = [Reference.model_validate(r) for r in (completion.model_extra or {})["references"]]
    assert references, "the fake model cites the first sources it is given"
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    for content in (completion.choices[0].message.content or "", streamed):
        assert content == f"About {QUESTION}: see [1][2]." + sources_markdown(references)
        assert FORGED_SITE not in content
        assert content.count("Sources:") == 1


def cited_spans(
    content: str, annotations: list[Any], answer: dict[str, Any]
) -> set[tuple[int, str]]:
    """Each annotation as (the number of the reference its url is, the content it spans),
    checked to be OpenAI's url_citation with our title over text that cites that reference."""
    references = [Reference.model_validate(r) for r in answer["references"]]
    by_link = {reference_link(reference): reference for reference in references}
    spans = set()
    for annotation in annotations:
        assert annotation.type == "url_citation"
        cited = annotation.url_citation
        reference = by_link[cited.url]
        assert cited.title == reference.display_name
        sentence = content[cited.start_index : cited.end_index]
        assert f"[{reference.n}]" in sentence, (sentence, reference.n)
        spans.add((reference.n, sentence))
    return spans


def judged_spans(answer: dict[str, Any], *, supported: bool) -> set[tuple[int, str]]:
    """The native answer's evidence as (reference number, sentence), supported or not."""
    text = answer["text"]
    return {
        (item["n"], text[item["sentence"][0] : item["sentence"][1]])
        for item in answer["evidence"]
        if item["supported"] is supported
    }


def test_each_supported_citation_is_an_annotation_over_its_sentence(
    client: openai.OpenAI, served: Served
) -> None:
    answer = native(served, QUESTION)
    expected = judged_spans(answer, supported=True)
    assert len(expected) >= 2, "the extractive answer cites sentences its sources hold"
    messages: Any = [{"role": "user", "content": QUESTION}]

    completion = client.chat.completions.create(model="reactome-answers", messages=messages)
    message = completion.choices[0].message
    assert message.content == expected_content(answer)
    assert cited_spans(message.content, message.annotations or [], answer) == expected
    assert (completion.model_extra or {})["evidence"] == answer["evidence"]

    # Streamed: the client's own accumulator assembles the content and takes the annotations
    # from the delta of the last chunk, the only one that carries them.
    with client.chat.completions.stream(model="reactome-answers", messages=messages) as stream:
        final = stream.get_final_completion()
    streamed = final.choices[0].message
    assert streamed.content == expected_content(answer)
    assert cited_spans(streamed.content, streamed.annotations or [], answer) == expected
    chunks = list(
        client.chat.completions.create(model="reactome-answers", messages=messages, stream=True)
    )
    carrying = [c for c in chunks if "annotations" in (c.choices[0].delta.model_extra or {})]
    assert [c.choices[0].finish_reason for c in carrying] == ["stop"]


def test_a_miscited_sentence_is_in_the_evidence_but_not_an_annotation(sample_home: Path) -> None:
    with fake_chat("miscite") as fake:
        env = serving_env(fake)
        with serve_command(sample_home, env=env) as served:
            client = openai.OpenAI(base_url=f"{served.base}/v1", api_key="unused", max_retries=0)
            messages: Any = [{"role": "user", "content": QUESTION}]
            answer = native(served, QUESTION)
            completion = client.chat.completions.create(model="reactome-answers", messages=messages)
            with client.chat.completions.stream(
                model="reactome-answers", messages=messages
            ) as stream:
                final = stream.get_final_completion()
    supported = judged_spans(answer, supported=True)
    assert supported
    assert judged_spans(answer, supported=False), "the fake cites sentences with the wrong source"
    for message in (completion.choices[0].message, final.choices[0].message):
        assert message.content == expected_content(answer)
        assert cited_spans(message.content, message.annotations or [], answer) == supported
    # The unsupported ones are in our own field, as the native answer has them.
    assert (completion.model_extra or {})["evidence"] == answer["evidence"]
