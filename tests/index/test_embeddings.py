"""The embedding models: the offline default for real, OpenAI's client against a server on
127.0.0.1 that speaks the OpenAI embeddings API."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from langchain_core.embeddings import Embeddings

from pipelines.catalog import bundled_dir
from pipelines.core.errors import ConfigurationError, ModelError
from pipelines.core.settings import load_settings
from pipelines.index import store
from pipelines.index.embeddings import (
    MINILM_NAME,
    MINILM_Q8_NAME,
    MiniLMEmbeddings,
    make_embeddings,
)
from pipelines.index.ingestion import ingest, locate_files


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_minilm_vectors_are_unit_length_and_meaningful(minilm: Embeddings) -> None:
    tangier, abca1, browser = minilm.embed_documents(
        [
            "Tangier disease is caused by mutations in ABCA1.",
            "ABCA1 exports cholesterol and phospholipids to apolipoprotein A-I.",
            "Zoom the pathway diagram with the mouse wheel.",
        ]
    )
    assert len(tangier) == MiniLMEmbeddings.dimensions
    assert math.isclose(cosine(tangier, tangier), 1.0, rel_tol=1e-4)
    assert cosine(tangier, abca1) > cosine(tangier, browser) + 0.05


def test_batching_by_length_keeps_each_text_with_its_vector(minilm: Embeddings) -> None:
    texts = ["short", "a much longer sentence about cholesterol efflux " * 5, "medium text here"]
    together = minilm.embed_documents(texts)
    alone = [minilm.embed_query(text) for text in texts]
    for joint, single in zip(together, alone, strict=True):
        assert cosine(joint, single) > 0.9999


def test_workers_and_concurrent_callers_give_each_text_its_vector_alone() -> None:
    texts = [
        f"{word} takes part in reaction {number} " * (1 + number % 7)
        for number, word in enumerate(["ABCA1", "LDLR", "APOA1", "insulin", "p53"] * 5)
    ]
    expected = MiniLMEmbeddings(workers=1).embed_documents(texts)
    shared = MiniLMEmbeddings(workers=3)
    with ThreadPoolExecutor(4) as callers:
        results = list(callers.map(shared.embed_documents, [texts] * 4))
    for result in results:
        for got, want in zip(result, expected, strict=True):
            assert cosine(got, want) > 0.9999


@pytest.mark.slow  # derives the quantized model again
def test_the_quantized_default_is_derived_once_and_agrees_with_the_packaged_model(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "models"
    texts = [
        "Tangier disease is caused by mutations in ABCA1.",
        "Zoom the pathway diagram with the mouse wheel.",
    ]
    root_handlers = list(logging.getLogger().handlers)
    quantized = MiniLMEmbeddings(model_cache=cache)
    # Deriving it prints nothing and leaves logging as it was (no stray root handler).
    assert logging.getLogger().handlers == root_handlers
    assert capfd.readouterr().err == ""
    (derived,) = cache.glob("*.onnx")
    built_at = derived.stat().st_mtime_ns
    assert MiniLMEmbeddings(model_cache=cache).embed_documents(texts) == (
        quantized.embed_documents(texts)
    )
    assert derived.stat().st_mtime_ns == built_at  # reused, not rebuilt
    assert quantized.name == MINILM_Q8_NAME
    packaged = MiniLMEmbeddings(quantized=False)
    assert packaged.name == MINILM_NAME
    for fast, exact in zip(
        quantized.embed_documents(texts), packaged.embed_documents(texts), strict=True
    ):
        assert 0.98 < cosine(fast, exact) < 0.99999  # close, yet another model


def test_an_unwritable_model_cache_names_the_folder_and_the_fix(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder", encoding="utf-8")
    with pytest.raises(ModelError, match=f"{blocked}/models") as caught:
        make_embeddings(load_settings(model_cache=blocked / "models"))
    assert "REACTOME_ANSWERS_MODEL_CACHE" in str(caught.value.fix)
    assert isinstance(make_embeddings(load_settings(embeddings=MINILM_NAME)), MiniLMEmbeddings)


class _EmbeddingsAPI(BaseHTTPRequestHandler):
    """POST /v1/embeddings as OpenAI serves it; vectors from a hash of each input."""

    requests: ClassVar[list[dict[str, object]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(
            {"path": self.path, "auth": self.headers["Authorization"], **body}
        )
        data = []
        for index, text in enumerate(body["input"]):
            digest = hashlib.sha256(str(text).encode()).digest()
            vector = [byte / 255 for byte in digest[:16]]
            data.append({"object": "embedding", "index": index, "embedding": vector})
        payload = json.dumps(
            {"object": "list", "data": data, "model": body["model"],
             "usage": {"prompt_tokens": 1, "total_tokens": 1}}
        ).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def openai_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    _EmbeddingsAPI.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EmbeddingsAPI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", base)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    yield base
    server.shutdown()
    server.server_close()


@pytest.mark.usefixtures("openai_server")
def test_openai_compatible_embeddings_ingest_and_are_recorded() -> None:
    settings = load_settings(embeddings="openai:test-embedder")
    sources = locate_files(bundled_dir(), ["userguide"], required=True)
    (summary,) = ingest(settings, sources, embeddings=make_embeddings(settings))
    assert summary.failure is None
    assert summary.chunks > 0
    calls = _EmbeddingsAPI.requests
    assert {call["path"] for call in calls} == {"/v1/embeddings"}
    assert {call["model"] for call in calls} == {"test-embedder"}
    assert calls[0]["auth"] == "Bearer sk-test-not-a-real-key"
    # Plain strings, not token arrays: what vLLM and Ollama servers accept.
    assert all(isinstance(text, str) for call in calls for text in call["input"])  # type: ignore[attr-defined]

    (info,) = store.collection_infos(store.open_client(settings))
    assert info.embedding_model == "openai:test-embedder"
    with pytest.raises(ConfigurationError, match="was embedded with 'openai:test-embedder'"):
        store.check_embedding_model(store.open_client(settings), "userguide", load_settings())


def test_openai_embeddings_without_a_key_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="needs OPENAI_API_KEY for OpenAI's API"):
        make_embeddings(load_settings(embeddings="openai:text-embedding-3-small"))


@pytest.mark.usefixtures("openai_server")
def test_a_local_embeddings_server_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    embeddings = make_embeddings(load_settings(embeddings="openai:test-embedder"))
    assert len(embeddings.embed_query("ABCA1")) > 0
    (call,) = _EmbeddingsAPI.requests
    assert call["path"] == "/v1/embeddings"
    assert call["auth"] == "Bearer no-key-needed"  # the placeholder, never a real key
