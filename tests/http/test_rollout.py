"""A new release swapped in under load: one Chroma server, two `serve` instances, 100
concurrent streams over both, and `ingest` writing a changed release meanwhile (real
processes on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import chromadb
import httpx
import pytest
from langchain_core.embeddings import Embeddings

from callbacks.log import read_log
from pipelines.catalog import bundled_dir
from pipelines.catalog.catalog import COLLECTION_NAMES
from pipelines.core.settings import load_settings
from pipelines.index.ingestion import ingest, locate_files
from tests.support.fake_openai import fake_chat, serving_env
from tests.support.invariants import check_stream
from tests.support.servers import chroma_server, serve_command
from tests.support.sse import parse_sse

pytestmark = pytest.mark.slow  # a Chroma server, and 100 streams through a release swap

STREAMS = 100
QUESTIONS = [
    "Tell me slowly: what causes Tangier disease?",
    "Tell me slowly: what does imatinib inhibit?",
    "Tell me slowly: what happens in apoptosis?",
    "Tell me slowly: which drugs target EGFR?",
]
# Every summary of the changed release ends with this, so each retrieved chunk says which
# version it came from.
CHANGED = " This summary comes from the changed release."
# The retriever looks the live version up every 5 s, and each instance builds the new
# version's indexes (a fraction of a second for the sample) before it answers from it: soon
# after the swap, each instance's latest answers all come from the new version. How soon is
# for the benchmarks; here the load goes on until it is so (bounded, for an instance that
# never moves on).
LATEST = 20
# Far beyond what a stream takes on a busy machine; retired versions stay readable this long
# plus 15 s.
REQUEST_TIMEOUT_S = 60


def _changed_release(folder: Path) -> Path:
    release = folder / "release-b"
    shutil.copytree(bundled_dir() / "reactome", release / "reactome")
    summaries = release / "reactome" / "pathway2summation.txt"
    lines = summaries.read_text(encoding="utf-8").splitlines()
    summaries.write_text("".join(f"{line}{CHANGED}\n" for line in lines), encoding="utf-8")
    return release


def _reactome_versions(port: int) -> set[str]:
    client = chromadb.HttpClient(host="127.0.0.1", port=port)
    return {
        c.name
        for c in client.list_collections()
        if (c.metadata or {}).get("ra_logical") == "reactome"
    }


async def _load(bases: list[str], stop: asyncio.Event, results: list[dict[str, Any]]) -> None:
    """``STREAMS`` clients streaming answers one after another, alternating instances, into
    ``results``."""
    # Like a load balancer in front of `serve`, the client lets an idle connection go well
    # before the server would close it (REACTOME_ANSWERS_KEEP_ALIVE_S, 5 s): reusing one just
    # as the server closes it loses that request in any HTTP/1.1 setup (docs/deployment.md).
    limits = httpx.Limits(max_connections=STREAMS + 10, keepalive_expiry=2.0)
    async with httpx.AsyncClient(limits=limits, timeout=120) as client:

        async def stream_after_stream(number: int) -> None:
            turn = 0
            while not stop.is_set():
                base = bases[(number + turn) % len(bases)]
                question = QUESTIONS[(number + turn) % len(QUESTIONS)]
                turn += 1
                got = []
                try:
                    async with client.stream(
                        "POST", f"{base}/v1/answer/stream", json={"question": question}
                    ) as response:
                        async for part in response.aiter_text():
                            got.append(part)
                    results.append(
                        {"status": response.status_code, "body": "".join(got), "end": time.time()}
                    )
                except httpx.HTTPError as error:
                    failure = f"{error!r} after {len(''.join(got))} characters"
                    results.append({"status": 0, "body": failure, "end": time.time()})

        await asyncio.gather(*(stream_after_stream(n) for n in range(STREAMS)))


def _latest_versions(home: Path, count: int) -> list[str]:
    """The reactome version of each of the ``count`` answers ``home``'s instance started
    last (its log files are named by when they were opened)."""
    found: list[str] = []
    for path in sorted((home / "logs").glob("*.jsonl"), reverse=True):
        with path.open(encoding="utf-8") as log:
            first_line = log.readline()
        try:
            header = json.loads(first_line)
        except ValueError:
            continue  # its header is being written
        found.append(header["releases"]["reactome"]["version"])
        if len(found) == count:
            break
    return found


async def _until(check: Callable[[], bool], what: str, timeout_s: float = 300) -> None:
    """Wait for ``check`` without stopping the load on this loop; the bound is for a
    condition that never comes, not for a slow machine."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout_s:.0f} s"
        await asyncio.sleep(0.5)


def test_a_release_swapped_in_under_load(tmp_path: Path, minilm: Embeddings) -> None:
    with chroma_server(tmp_path / "chroma-server") as port, fake_chat("ok") as fake:
        fake.slow_delay_s = 0.05  # about half a second a stream, so they overlap the swap
        ingesting_home = tmp_path / "ingesting"
        settings = load_settings(home=ingesting_home, chroma_host="127.0.0.1", chroma_port=port)
        ingest(
            settings,
            locate_files(bundled_dir(), COLLECTION_NAMES, required=True),
            embeddings=minilm,
        )
        (old_version,) = _reactome_versions(port)
        env = {
            "CHROMA_HOST": "127.0.0.1",
            "CHROMA_PORT": str(port),
            **serving_env(fake),
            "REACTOME_ANSWERS_REQUEST_TIMEOUT_S": str(REQUEST_TIMEOUT_S),
        }
        homes = [tmp_path / "first", tmp_path / "second"]
        with serve_command(homes[0], env=env) as first, serve_command(homes[1], env=env) as second:

            async def run() -> float:
                stop = asyncio.Event()
                load = asyncio.create_task(_load([first.base, second.base], stop, results))
                # The load is on: both instances answer from the old version.
                await _until(
                    lambda: all(_latest_versions(home, 1) for home in homes), "answers on both"
                )
                ingesting = await asyncio.create_subprocess_exec(
                    str(Path(sys.executable).parent / "reactome-answers"),
                    "--home", str(ingesting_home), "ingest", "--from",
                    str(_changed_release(tmp_path)), "--collections", "reactome", "--release", "2",
                    env={**os.environ, **env},
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                )  # fmt: skip
                _, stderr = await ingesting.communicate()
                assert ingesting.returncode == 0, stderr.decode()
                (new_version,) = _reactome_versions(port) - {old_version}

                def moved_on() -> bool:
                    return all(
                        _latest_versions(home, LATEST) == [new_version] * LATEST for home in homes
                    )

                await _until(moved_on, "both instances answering from the new version")
                await _until(lambda: len(results) >= 2 * STREAMS, f"{2 * STREAMS} answers")
                stop.set()
                await load
                # The old version goes once its grace is over (nobody can be reading it).
                await _until(
                    lambda: old_version not in _reactome_versions(port),
                    "the old version removed",
                    timeout_s=REQUEST_TIMEOUT_S + 15 + 300,
                )
                return time.time()

            results: list[dict[str, Any]] = []
            removed_at = asyncio.run(run())
            assert old_version not in _reactome_versions(port)
            (new_version,) = _reactome_versions(port)

    # Zero failed requests, each stream whole.
    failed = [r for r in results if r["status"] != 200]
    assert not failed, f"{len(failed)} of {len(results)} failed: {failed[:3]}"
    assert len(results) >= 2 * STREAMS
    states = [check_stream(parse_sse(result["body"])).data.state for result in results]
    broken = [r["body"] for r, state in zip(results, states, strict=True) if state != "answered"]
    assert not broken, f"{len(broken)} of {len(results)} not answered; first:\n{broken[0]}"

    # Per instance, when each answer started and ended, by the reactome version it searched.
    for home in homes:
        spans: dict[str, list[tuple[float, float]]] = {old_version: [], new_version: []}
        for path in sorted((home / "logs").glob("*.jsonl")):
            log = read_log(path)
            releases = log.header.releases
            # One version per collection, and the chunks retrieved are that version's.
            assert sorted(releases) == sorted(COLLECTION_NAMES)
            version = releases["reactome"]["version"]
            documents = [
                document
                for record in log.callbacks
                if record["hook"] == "retriever_end"
                for document in record["documents"]
                if document["metadata"]["collection"] == "reactome"
            ]
            changed = {CHANGED.strip() in document["page_content"] for document in documents}
            assert changed <= {version == new_version}, log.source
            started = datetime.fromisoformat(str(log.header.created_at)).timestamp()
            spans[version].append((started, started + log.events[-1].t_ms / 1000))
        assert spans[old_version], home
        assert spans[new_version], home
        # The old version went only after every answer that read it had ended.
        assert removed_at > max(end for _, end in spans[old_version])
