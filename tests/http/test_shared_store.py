"""Several `serve` instances on one Chroma server: each searches exactly as the machine that
ingested does, and one that cannot is reported, never silent (real processes on 127.0.0.1)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langchain_core.embeddings import Embeddings

from pipelines.catalog import bundled_dir
from pipelines.catalog.catalog import COLLECTION_NAMES
from pipelines.core.settings import load_settings
from pipelines.index.chunk_table import ChunkTable
from pipelines.index.ingestion import ingest, locate_files
from pipelines.pipeline import AnswerPipeline
from tests.support.servers import chroma_server, serve_command

pytestmark = pytest.mark.slow  # a real Chroma server, ingested, and `serve` subprocesses over it

# Each of these ranks differently by vectors alone than with the keyword index (checked when
# this test was written), so an instance that lost its keyword index would give itself away.
QUESTIONS = [
    "What causes Tangier disease?",
    "What does ABCA1 do?",
    "Which variants of CFTR cause cystic fibrosis?",
    "Which drugs target EGFR?",
    "What does imatinib inhibit?",
    "What happens in apoptosis?",
]
# Searched through the multilingual model too: its vectors in an instance's chunk table are
# worked out there, from the chunks' texts, and must rank as the ingesting machine's do.
TRANSLATED = ["唐吉尔病是由什么引起的？ABCA1有什么作用？", "¿Qué fármacos actúan sobre EGFR?"]  # noqa: RUF001 (as a Chinese or Japanese asker writes it)


@pytest.fixture(scope="module")
def shared_store(
    tmp_path_factory: pytest.TempPathFactory, minilm: Embeddings
) -> Iterator[tuple[int, Path]]:
    """A Chroma server holding the sample, ingested from a home of its own."""
    folder = tmp_path_factory.mktemp("shared-store")
    with chroma_server(folder / "chroma-server") as port:
        home = folder / "ingesting-home"
        settings = load_settings(home=home, chroma_host="127.0.0.1", chroma_port=port)
        sources = locate_files(bundled_dir(), COLLECTION_NAMES, required=True)
        ingest(settings, sources, embeddings=minilm)
        yield port, home


def _ids(references: list[dict[str, str]]) -> list[str]:
    return [reference.get("st_id") or reference["url"] for reference in references]


def _references(base: str, question: str) -> list[str]:
    response = httpx.post(f"{base}/v1/answer", json={"question": question}, timeout=120)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["state"] == "answered"
    return _ids(body["references"])


def _headers(home: Path) -> list[dict[str, object]]:
    return [
        json.loads(path.read_text().splitlines()[0])
        for path in sorted((home / "logs").glob("*.jsonl"))
    ]


def test_instances_sharing_only_the_store_answer_like_the_ingesting_machine(
    shared_store: tuple[int, Path], tmp_path: Path, minilm: Embeddings
) -> None:
    port, ingesting_home = shared_store
    env = {"CHROMA_HOST": "127.0.0.1", "CHROMA_PORT": str(port)}
    settings = load_settings(home=ingesting_home, chroma_host="127.0.0.1", chroma_port=port)
    ingesting = AnswerPipeline(settings, embeddings=minilm)
    asked = [*QUESTIONS, *TRANSLATED]
    expected = {question: _ids(ingesting.invoke(question)["references"]) for question in asked}
    assert all(expected.values())

    homes = [tmp_path / "first", tmp_path / "second"]  # empty: nothing but the store is shared
    with serve_command(homes[0], env=env) as first, serve_command(homes[1], env=env) as second:
        for served in (first, second):
            health = httpx.get(f"{served.base}/healthz", timeout=30).json()
            assert health["status"] == "ok", health
            assert health["degraded"] == {}
            for question in asked:
                assert _references(served.base, question) == expected[question], question
    for home in homes:
        # Built on this instance from what the store holds, once per collection version.
        folders = [p for p in (home / "keyword").iterdir() if p.is_dir()]
        assert len(folders) == 3
        for folder in folders:
            table = ChunkTable.load(folder)
            assert table is not None
            assert table.multilingual is not None, folder.name
            assert len(table.multilingual.vectors) == len(table)
            # Pooled here as ingest pooled them: quoted and judged alike (decision 0045).
            assert table.sentences is not None, folder.name
            assert table.sentences.pooling == "chunk"
        headers = _headers(home)
        assert len(headers) == len(asked)
        for header in headers:
            releases = header["releases"]
            assert isinstance(releases, dict)
            assert sorted(releases) == sorted(COLLECTION_NAMES)
            for name, found in releases.items():
                assert found["indexes"] == ["vectors", "bm25"], name
                assert found["version"].startswith(f"ra_{name}__")


def test_an_instance_without_its_keyword_index_says_so(
    shared_store: tuple[int, Path], tmp_path: Path
) -> None:
    port, _ = shared_store
    env = {"CHROMA_HOST": "127.0.0.1", "CHROMA_PORT": str(port)}
    home = tmp_path / "home"
    home.mkdir()
    (home / "keyword").write_text("not a folder: no index can be built here")
    with serve_command(home, env=env) as served:
        response = httpx.get(f"{served.base}/healthz", timeout=30)
        health = response.json()
        # Still serving (a balancer keeps it), but it says which collections rank worse.
        assert response.status_code == 200
        assert health["status"] == "degraded"
        assert sorted(health["degraded"]) == sorted(COLLECTION_NAMES)
        assert all("keyword index" in why for why in health["degraded"].values())
        # Answers still come, from the vectors alone, and their logs say so.
        _references(served.base, QUESTIONS[0])
    (header,) = _headers(home)
    releases = header["releases"]
    assert isinstance(releases, dict)
    for found in releases.values():
        assert found["indexes"] == ["vectors"]
        assert "keyword index" in found["problem"]
