"""An instance answering from a Chroma server it did not ingest into (real processes on
127.0.0.1): it builds each version's keyword index itself, and its log stays readable, with
no debug lines."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from langchain_core.embeddings import Embeddings

from pipelines.catalog import bundled_dir
from pipelines.catalog.catalog import COLLECTION_NAMES
from pipelines.core.settings import load_settings
from pipelines.index.ingestion import ingest, locate_files
from tests.support.servers import chroma_server, serve_command

QUESTION = "What does ABCA1 do?"


@pytest.mark.slow  # a Chroma server and a `serve` subprocess
def test_an_instance_building_its_indexes_from_a_chroma_server_logs_no_debug_lines(
    tmp_path: Path, minilm: Embeddings
) -> None:
    with chroma_server(tmp_path / "chroma") as port:
        settings = load_settings(home=tmp_path / "ingesting", chroma_host="127.0.0.1",
                                 chroma_port=port)  # fmt: skip
        ingest(settings, locate_files(bundled_dir(), COLLECTION_NAMES, required=True),
               embeddings=minilm)  # fmt: skip
        home = tmp_path / "instance"  # empty: it builds each version's keyword index itself
        env = {"CHROMA_HOST": "127.0.0.1", "CHROMA_PORT": str(port)}
        with serve_command(home, env=env) as server:
            reply = httpx.post(f"{server.base}/v1/answer", json={"question": QUESTION},
                               timeout=120)  # fmt: skip
            assert reply.json()["state"] == "answered"
    assert len([path for path in (home / "keyword").iterdir() if path.is_dir()]) == 3
    assert "Building index" not in server.stderr
    assert "DEBUG" not in server.stderr
