"""The ``openai:MODEL`` provider against a server on 127.0.0.1 that speaks the OpenAI chat
completions API (as vLLM, Ollama and llama.cpp's server do), streaming over SSE."""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from langchain_core.embeddings import Embeddings

from callbacks.events import TokenEvent
from pipelines.answering.providers import make_models
from pipelines.core.errors import ConfigurationError
from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline
from tests.support.invariants import check_stream

EXPANSION = {"question": "What causes Tangier disease?", "queries": ["ABCA1 Tangier"],
             "collections": ["reactome"]}  # fmt: skip
ANSWER = "Tangier disease comes from ABCA1 loss [1]."


class _ChatAPI(BaseHTTPRequestHandler):
    requests: ClassVar[list[dict[str, object]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        system = str(body["messages"][0]["content"])
        reply = json.dumps(EXPANSION) if "prepare searches" in system else ANSWER
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for piece in reply.split(" "):
            chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0,
                     "model": body["model"],
                     "choices": [{"index": 0, "delta": {"content": piece + " "},
                                  "finish_reason": None}]}  # fmt: skip
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def chat_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    _ChatAPI.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChatAPI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
    yield "local"
    server.shutdown()
    server.server_close()


@pytest.mark.usefixtures("chat_server")
def test_openai_compatible_server_answers_through_the_pipeline(
    sample_home: Path, minilm: Embeddings
) -> None:
    settings = load_settings(home=sample_home, llm="openai:local-model")
    pipeline = AnswerPipeline(settings, embeddings=minilm, raise_handler_errors=True)
    events = list(pipeline.stream("What causes Tangier disease?"))
    done = check_stream(events)
    assert done.data.state == "answered"
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    assert len(tokens) > 3  # streamed, under the pipeline's own invoke
    assert "".join(t.data.text for t in tokens).strip() == ANSWER
    assert [r.st_id for r in done.data.references] == ["R-HSA-5682113"]
    # The expander and the answer both went to the server, both streaming.
    assert len(_ChatAPI.requests) == 2
    assert all(request["stream"] is True for request in _ChatAPI.requests)
    assert {request["model"] for request in _ChatAPI.requests} == {"local-model"}


def test_openai_provider_without_a_key_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="needs OPENAI_API_KEY for OpenAI's API") as raised:
        make_models(load_settings(llm="openai:gpt-4o-mini"))
    assert "OPENAI_BASE_URL" in str(raised.value.fix)


@pytest.mark.usefixtures("chat_server")
def test_a_local_server_such_as_ollama_needs_no_key(
    sample_home: Path, minilm: Embeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    settings = load_settings(home=sample_home, llm="openai:local-model")
    pipeline = AnswerPipeline(settings, embeddings=minilm, raise_handler_errors=True)
    done = check_stream(list(pipeline.stream("What causes Tangier disease?")))
    assert done.data.state == "answered"
    assert done.data.text.strip() == ANSWER
    assert len(_ChatAPI.requests) == 2


class _KeepAliveChatAPI(_ChatAPI):
    """The same replies over HTTP/1.1, each whole with its length, so the client keeps the
    connection for the next call, as hosted servers and vLLM do."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        system = str(body["messages"][0]["content"])
        reply = json.dumps(EXPANSION) if "prepare searches" in system else ANSWER
        frames = [
            {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": body["model"],
             "choices": [{"index": 0, "delta": {"content": piece + " "}, "finish_reason": None}]}
            for piece in reply.split(" ")
        ]  # fmt: skip
        payload = "".join(f"data: {json.dumps(frame)}\n\n" for frame in frames)
        encoded = (payload + "data: [DONE]\n\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(encoded)))
        self.end_headers()
        self.wfile.write(encoded)


def test_pipelines_one_after_another_share_no_connection(
    sample_home: Path, minilm: Embeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each pipeline's synchronous calls run on an event loop of its own, which ends with it.
    # A connection kept from one pipeline's loop must not serve the next pipeline's model
    # (it failed with "Event loop is closed", and the expander fell back unannounced).
    server = ThreadingHTTPServer(("127.0.0.1", 0), _KeepAliveChatAPI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
    try:
        for _ in range(3):
            settings = load_settings(home=sample_home, llm="openai:local-model", event_logs=False)
            pipeline = AnswerPipeline(settings, embeddings=minilm, raise_handler_errors=True)
            done = check_stream(list(pipeline.stream("What causes Tangier disease?")))
            assert done.data.state == "answered"
            # The expander's own collections and query: no fallback to the question alone.
            assert [r.st_id for r in done.data.references] == ["R-HSA-5682113"]
            del pipeline
            gc.collect()  # the pipeline's loop ends with it
    finally:
        server.shutdown()
        server.server_close()
