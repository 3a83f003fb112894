"""``/api/chat`` read by the Vercel AI SDK itself (the ``ai`` package from the npm registry,
installed into tests/ai_sdk by ``make install-ai-sdk``): the message its reader assembles must
hold ``done.text`` as its text, ``done.references`` as its source parts, in order, and
``done.evidence`` as its ``data-evidence`` parts. ``ai_sdk/chat.mjs`` asks through the SDK's
chat itself (what ``useChat`` wraps), which stops reading at an ``error`` part."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.links import reference_link
from callbacks.events import Reference
from tests.support.fake_openai import Behaviour, fake_chat, serving_env
from tests.support.servers import Served, serve_command

pytestmark = pytest.mark.slow  # a `serve` subprocess read by the AI SDK in Node.js

READER = Path(__file__).parents[1] / "ai_sdk" / "read_ui_stream.mjs"
CHAT = READER.parent / "chat.mjs"
GUIDE_QUESTION = "How do I use the pathway browser?"


@pytest.fixture(scope="module")
def served(sample_home: Path) -> Iterator[Served]:
    if not (READER.parent / "node_modules" / "ai").is_dir():
        pytest.fail("the AI SDK is not installed: run `make install-ai-sdk` (make test does)")
    with serve_command(sample_home) as server:
        yield server


def run_node(script: Path, *args: str) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None, "node is missing: make install-node"
    done = subprocess.run(
        [node, str(script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=script.parent,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def read_with_the_sdk(base: str, turns: list[tuple[str, str]]) -> dict[str, Any]:
    messages = json.dumps([{"role": role, "text": text} for role, text in turns])
    return run_node(READER, base, messages)


def chat_with_the_sdk(
    base: str, question: str, body: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What the SDK's chat holds after asking ``question``, ``body`` as its ``body`` option:
    ``status``, ``error``, the assistant message's ``text``, ``sources`` and ``metadata``."""
    return run_node(CHAT, base, question, *([json.dumps(body)] if body else []))


def native(
    base: str, question: str, history: list[tuple[str, str]] | None = None, **options: Any
) -> dict[str, Any]:
    turns = [{"role": role, "content": text} for role, text in history or []]
    body = {"question": question, "history": turns, **options}
    response = httpx.post(f"{base}/v1/answer", json=body, timeout=120)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def sources_of(answer: dict[str, Any]) -> list[dict[str, str]]:
    references = [Reference.model_validate(r) for r in answer["references"]]
    return [{"url": reference_link(r), "title": r.display_name} for r in references]


def test_the_sdk_reads_our_answer_with_its_sources_in_order(served: Served) -> None:
    question = "What causes Tangier disease?"
    answer = native(served.base, question)
    assert answer["references"]

    message = read_with_the_sdk(served.base, [("user", question)])

    assert message["errors"] == []
    assert message["header"] == "v1"
    assert message["text"] == answer["text"]
    assert message["sources"] == sources_of(answer)
    assert message["metadata"]["references"] == answer["references"]
    assert evidence_of(message) == answer["evidence"]
    chunks = message["chunks"]
    types = [chunk["type"] for chunk in chunks]
    assert types[0] == "start"
    assert types[-1] == "finish"
    # Each source arrives right before the text that first cites it: its marker is not in the
    # text so far, and is in the text once the next deltas arrive.
    for position, chunk in enumerate(chunks):
        if chunk["type"] == "source-url":
            marker = f"[{chunk['sourceId'].removeprefix('reference-')}]"
            so_far = "".join(c.get("delta", "") for c in chunks[:position])
            assert marker not in so_far
            assert marker in so_far + "".join(c.get("delta", "") for c in chunks[position:])
    assert types.index("source-url") < max(i for i, t in enumerate(types) if t == "text-delta")
    assert types.count("text-delta") > 3  # streamed, not sent whole


def evidence_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The data of the message's ``data-evidence`` parts, in order, each checked to point at a
    sentence of the message's text that cites its reference."""
    parts = [part for part in message["data"] if part["type"] == "data-evidence"]
    items = [part["data"] for part in parts]
    for item in items:
        start, end = item["sentence"]
        assert f"[{item['n']}]" in message["text"][start:end], item
    return items


def test_each_citation_arrives_as_an_evidence_part_with_its_quote_and_verdict(
    sample_home: Path,
) -> None:
    question = "What causes Tangier disease?"
    with fake_chat("miscite") as fake:
        env = serving_env(fake)
        with serve_command(sample_home, env=env) as served:
            answer = native(served.base, question)
            message = read_with_the_sdk(served.base, [("user", question)])
    assert message["errors"] == []
    assert message["text"] == answer["text"]
    items = evidence_of(message)
    assert items == answer["evidence"]
    # The fake cites some sentences with the wrong source: both verdicts reach the client.
    assert {item["supported"] for item in items} == {True, False}
    for item in items:
        assert set(item) >= {"n", "sentence", "quote", "supported"}
        assert item["quote"]
    # The parts come after the text and before the finish.
    types = [chunk["type"] for chunk in message["chunks"]]
    first = types.index("data-evidence")
    assert types[first - 1] == "text-end"
    assert types[first + len(items)] == "finish"


def test_a_follow_up_is_answered_with_the_conversation(served: Served) -> None:
    first = native(served.base, "What does ABCA1 do?")
    turns = [
        ("user", "What does ABCA1 do?"),
        ("assistant", str(first["text"])),
        ("user", "What disease does a defect in it cause?"),
    ]
    message = read_with_the_sdk(served.base, turns)
    answer = native(served.base, turns[-1][1], turns[:-1])
    assert message["text"] == answer["text"]
    assert message["sources"] == sources_of(answer)


def test_a_refusal_is_text_without_sources(served: Served) -> None:
    message = read_with_the_sdk(served.base, [("user", "Can I double my dose of warfarin?")])
    assert "doctor or pharmacist" in message["text"]
    assert message["sources"] == []
    assert message["metadata"]["state"] == "refused"


def test_a_request_without_a_question_is_refused_in_our_error_shape(served: Served) -> None:
    body: Any
    for body in ({"messages": []}, {"messages": [{"role": "assistant", "parts": []}]}, [1]):
        response = httpx.post(f"{served.base}/api/chat", json=body, timeout=30)
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "bad_input"


def test_the_body_option_turns_on_user_guide_citations(served: Served) -> None:
    without = chat_with_the_sdk(served.base, GUIDE_QUESTION)
    assert without["status"] == "ready"
    assert without["sources"] == []  # user-guide pages are context, not sources, by default

    message = chat_with_the_sdk(served.base, GUIDE_QUESTION, {"cite_urls": True})
    answer = native(served.base, GUIDE_QUESTION, cite_urls=True)
    assert answer["references"]
    assert message["status"] == "ready"
    assert message["text"] == answer["text"]
    assert message["sources"] == sources_of(answer)
    assert all(s["url"].startswith("https://reactome.org/userguide") for s in message["sources"])
    assert message["metadata"]["references"] == answer["references"]

    # The native API's boolean, not anything that might be read as one.
    for wrong in ("yes", 1, "true"):
        body = {"messages": [{"role": "user", "parts": [{"type": "text", "text": GUIDE_QUESTION}]}],
                "cite_urls": wrong}  # fmt: skip
        refused = httpx.post(f"{served.base}/api/chat", json=body, timeout=30)
        assert refused.status_code == 422, wrong
        assert refused.json()["error"]["message"].startswith("cite_urls")


@pytest.mark.parametrize("behaviour", ["fail_before", "fail_mid"])
def test_a_failed_answer_reaches_the_chat_with_its_id_and_state(
    sample_home: Path, behaviour: Behaviour
) -> None:
    with fake_chat(behaviour) as fake:
        env = serving_env(fake)
        with serve_command(sample_home, env=env) as served:
            message = chat_with_the_sdk(served.base, "What causes Tangier disease?")
            metadata = message["metadata"]
            assert metadata is not None, message
            logged = httpx.get(f"{served.base}/v1/logs/{metadata['request_id']}", timeout=30)
    # The chat shows the failure: the SDK's error, with our message (never the upstream's key).
    assert message["status"] == "error"
    assert message["error"]
    assert message["errors"] == [message["error"]]
    assert "sk-test" not in message["error"]
    # The metadata came before the error part, so the chat has it: the answer's id (its log
    # is there under it) and its state.
    assert metadata["state"] == "failed"
    assert logged.status_code == 200
    view = logged.json()
    assert view["state"] == "failed"
    # What the chat shows is the answer as logged: its partial text, and only the sources
    # that text cites; a failure before any text, none at all.
    assert message["text"] == view["answer"]["text"]
    assert bool(message["text"]) is (behaviour == "fail_mid")
    assert metadata["references"] == view["answer"]["references"]
    assert message["sources"] == sources_of(view["answer"])
    if behaviour == "fail_before":
        assert message["sources"] == []
