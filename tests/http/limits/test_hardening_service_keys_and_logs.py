"""The third outside attack on `serve` (issue 37, section 5 and part of section 6), replayed
against a real server on 127.0.0.1 (uvicorn in a thread, or the `serve` command): others'
wrong keys, files named as logs that are none, ratings raced against each other, what
`/healthz` tells a stranger, comments in a key file, whose cap a 429 names, and what a
Chroma server's instance writes to its log."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import FakeListChatModel
from prometheus_client.parser import text_string_to_metric_families
from pydantic import Field

from app.http.factory import create_app
from app.http.middleware.access import AnswerSlots, cap_full_message
from app.http.settings import load_server_settings
from callbacks.feedback import feedback_path, read_feedback
from callbacks.log import find_request_logs, log_file_name
from pipelines.catalog import bundled_dir
from pipelines.catalog.catalog import COLLECTION_NAMES
from pipelines.core.settings import load_settings
from pipelines.index.ingest import ingest, locate_files
from pipelines.pipeline import AnswerPipeline
from tests.support.cli import cli
from tests.support.fake_pipeline import ABCA1, CDK5, FakeRetriever, make_pipeline
from tests.support.servers import (
    RedisServer,
    chroma_server,
    free_port,
    redis_server,
    serve,
    serve_command,
)

KEY = "issue37-key-5b0e9c41d2"
KEYED = {"Authorization": f"Bearer {KEY}"}
QUESTION = "What does ABCA1 do?"


@contextmanager
def served(home: Path | None = None, *, logged: bool = True, **server: Any) -> Iterator[str]:
    """A real server on 127.0.0.1 over a scripted pipeline that logs (unless not ``logged``)
    into the test's home, or ``home``, whose store it reports on; ``server`` are the HTTP
    server's settings."""
    options: dict[str, Any] = {"event_logs": logged}
    if home is not None:
        options["home"] = home
    pipeline, _, _ = make_pipeline([ABCA1, CDK5], "ABCA1 exports cholesterol [1].", **options)
    app = create_app(pipeline.settings, pipeline=pipeline, server=load_server_settings(**server))
    yield from serve(app)


def _collections(base: str, key: str | None) -> int:
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    return httpx.get(f"{base}/v1/collections", headers=headers, timeout=30).status_code


def _samples(base: str, name: str, headers: dict[str, str] | None = None) -> dict[str, float]:
    text = httpx.get(f"{base}/metrics", headers=headers, timeout=30).text
    return {
        "/".join(sample.labels.values()): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


# --- 5. others' wrong keys do not lock out a valid key ----------------------------------------


def test_a_valid_key_is_served_however_many_wrong_keys_came_from_its_address() -> None:
    with served(api_keys=KEY, auth_failures_per_minute=5) as base:
        wrong = [_collections(base, f"guess-{n}") for n in range(8)]
        assert wrong == [401] * 5 + [429] * 3
        # One person behind a shared address keeps guessing; everyone with the key is served.
        for n in range(10):
            assert _collections(base, KEY) == 200, n
            assert _collections(base, f"guess-again-{n}") == 429
        assert _collections(base, None) == 429  # no key at all is no valid key either
        refused = httpx.get(f"{base}/v1/collections", timeout=30)
        error = refused.json()["error"]
        assert error["code"] == "auth_failures"
        assert "send a valid key" in error["message"]
        assert 1 <= int(refused.headers["retry-after"]) <= 12  # a request every 12 s
        rejections = _samples(base, "reactome_answers_rejections_total", KEYED)
        assert rejections == {"unauthorized": 5.0, "auth_failures": 15.0}


def test_through_redis_a_valid_key_never_touches_the_addresses_wrong_key_count() -> None:
    with redis_server() as own:
        options: dict[str, Any] = {
            "api_keys": KEY,
            "auth_failures_per_minute": 3,
            "redis_url": own.url,
            "redis_prefix": "issue37-keys",
        }
        with served(**options) as one, served(**options) as other:
            assert [_collections(base, KEY) for base in (one, other) * 5] == [200] * 10
            assert _auth_buckets(own) == []  # checked in the process: no round trip for it
            assert [_collections(base, "guess") for base in (one, other, one)] == [401] * 3
            assert [_collections(base, "guess") for base in (other, one)] == [429] * 2
            assert _auth_buckets(own) == ["issue37-keys:auth:address:127.0.0.1"]
            assert [_collections(base, KEY) for base in (one, other)] == [200, 200]


def _auth_buckets(server: RedisServer) -> list[str]:
    with redis.Redis.from_url(server.url, decode_responses=True) as client:
        return sorted(str(key) for key in client.scan_iter("issue37-keys:auth:*"))


# --- 6. /healthz's details are for a key holder -----------------------------------------------


def test_healthz_tells_a_stranger_the_status_and_a_key_holder_the_details(
    sample_home: Path,
) -> None:
    with (
        redis_server() as own,
        served(sample_home, logged=False, api_keys=KEY, redis_url=own.url) as base,
    ):
        for headers in ({}, {"Authorization": "Bearer not-the-key"}):
            stranger = httpx.get(f"{base}/healthz", headers=headers, timeout=30)
            assert stranger.status_code == 200
            assert stranger.json() == {
                "status": "ok",
                "details": "send 'Authorization: Bearer KEY' for the details",
            }
        operator = httpx.get(f"{base}/healthz", headers=KEYED, timeout=30).json()
        assert operator["limits"] == {"counted": "shared", "redis": own.url}
        assert operator["status"] == "ok"

        own.stop()
        # Down: the operator reads where and why; a stranger only that it is degraded.
        stranger = httpx.get(f"{base}/healthz", timeout=30)
        assert stranger.json()["status"] == "degraded"
        assert set(stranger.json()) == {"status", "details"}
        assert str(own.port) not in stranger.text
        assert "redis" not in stranger.text.lower()
        operator = httpx.get(f"{base}/healthz", headers=KEYED, timeout=30).json()
        assert f"Redis at {own.url} cannot be reached" in operator["limits"]["degraded"]
        head = httpx.head(f"{base}/healthz", timeout=30)
        assert (head.status_code, head.content) == (200, b"")
    # Without keys there is nobody to hold details back from.
    with redis_server() as own, served(sample_home, logged=False, redis_url=own.url) as base:
        assert httpx.get(f"{base}/healthz", timeout=30).json()["limits"]["redis"] == own.url


# --- 6. whose cap a 429 names -------------------------------------------------------------------


class _HeldRetriever(FakeRetriever):
    """Holds each search until :attr:`release` is set: an answer in progress for as long as
    the test needs one."""

    searching: threading.Event = Field(default_factory=threading.Event)
    release: threading.Event = Field(default_factory=threading.Event)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        self.searching.set()
        self.release.wait(60)
        return super()._get_relevant_documents(query, run_manager=run_manager, **kwargs)


def _over_the_cap(**server: Any) -> str:
    """The message a second answer gets while the one slot is taken."""
    held = _HeldRetriever(documents=[ABCA1])
    pipeline = AnswerPipeline(
        load_settings(event_logs=False),
        answer_model=FakeListChatModel(responses=["ABCA1 exports cholesterol [1]."]),
        expander_model=FakeListChatModel(responses=["{}"]),
        retriever=held,
    )
    app = create_app(
        pipeline.settings,
        pipeline=pipeline,
        server=load_server_settings(max_concurrent_answers=1, **server),
    )
    body = {"question": QUESTION}
    with ExitStack() as stack:
        base = stack.enter_context(contextmanager(serve)(app))
        pool = stack.enter_context(ThreadPoolExecutor(max_workers=1))
        stack.callback(held.release.set)  # whatever happens, the held answer ends
        first = pool.submit(httpx.post, f"{base}/v1/answer", json=body, timeout=60)
        assert held.searching.wait(60), "the first answer never started"
        refused = httpx.post(f"{base}/v1/answer", json=body, timeout=60)
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "too_many_answers"
        held.release.set()
        assert first.result(timeout=60).status_code == 200
        message: str = refused.json()["error"]["message"]
        return message


def test_the_cap_refusal_says_whether_the_cap_is_the_process_or_the_fleets() -> None:
    alone = _over_the_cap()
    assert alone == cap_full_message(AnswerSlots(1))
    assert alone.startswith("this server process is writing as many answers as it takes")
    assert "(1)" in alone
    assert "counted per server process" in alone
    with redis_server() as own:
        fleet = _over_the_cap(redis_url=own.url, redis_prefix="issue37-cap")
    assert fleet.startswith("the servers sharing this one's limits are writing as many answers")
    assert "counted across the fleet" in fleet
    assert "this server process" not in fleet


# --- 6. a key file's comments -------------------------------------------------------------------


@pytest.mark.slow  # `serve` subprocesses
def test_a_key_file_takes_comments_after_a_key_and_a_bad_line_is_named(
    sample_home: Path, tmp_path: Path
) -> None:
    keys = tmp_path / "keys"
    keys.write_text(
        f"# operators' keys\n{KEY}   # alice, since March\nsecond#half-4d1f\t# bob\n",
        encoding="utf-8",
    )
    with serve_command(sample_home, env={"REACTOME_ANSWERS_API_KEYS": f"@{keys}"}) as server:
        for key, status in ((KEY, 200), ("second#half-4d1f", 200), ("alice,", 401)):
            assert _collections(server.base, key) == status, key
    keys.write_text(f"{KEY}  # alice\nbob's key\n", encoding="utf-8")
    refused = cli(
        sample_home,
        "serve",
        "--port",
        str(free_port()),
        env={"REACTOME_ANSWERS_API_KEYS": f"@{keys}"},
        timeout_s=120,
    )
    assert refused.returncode == 1
    (line,) = refused.stderr.strip().splitlines()[-1:]
    assert f"line 2 of the key file {keys}" in line
    assert "'#' at the start of a line or after a space starts a comment" in line
    assert "bob" not in line  # never a key, nor what might be one
    assert KEY not in refused.stderr


# --- 6. only an answer's log is served or rated ----------------------------------------------


def _decoys(folder: Path, real_log: Path) -> dict[str, Path]:
    """Entries named as logs that are no answer's log, by the request id each names."""
    when = datetime(2026, 5, 1, tzinfo=UTC)
    fifo = folder / log_file_name("decoy-fifo", when)
    os.mkfifo(fifo)
    passwd = folder / log_file_name("decoy-passwd", when)
    passwd.symlink_to("/etc/passwd")
    linked = folder / log_file_name("decoy-link", when)
    linked.symlink_to(real_log)  # a real log, but out of a link: not followed
    header = json.loads(real_log.read_text(encoding="utf-8").splitlines()[0])
    one_line = folder / log_file_name("decoy-one-line", when)
    one_line.write_text(json.dumps({**header, "request_id": "decoy-one-line"}) + "\n")
    stray = folder / log_file_name("decoy-stray", when)
    stray.write_text("rating me costs nothing\n", encoding="utf-8")
    return {path.name.split("-", 1)[1].removesuffix(".jsonl"): path
            for path in (fifo, passwd, linked, one_line, stray)}  # fmt: skip


def test_files_named_as_logs_are_neither_shown_nor_rated(isolated_home: Path) -> None:
    logs = isolated_home / "logs"
    with served() as base:
        reply = httpx.post(f"{base}/v1/answer", json={"question": QUESTION}, timeout=60)
        request_id = reply.json()["request_id"]
        (real,) = find_request_logs(logs, request_id)
        decoys = _decoys(logs, real)
        try:
            for decoy in decoys:
                for got in (
                    httpx.get(f"{base}/v1/logs/{decoy}", timeout=30),
                    httpx.post(f"{base}/v1/answers/{decoy}/feedback", json={"rating": "up"},
                               timeout=30),
                ):  # fmt: skip
                    assert got.status_code == 404, (decoy, got.request.url, got.text)
                    error = got.json()["error"]
                    assert error["code"] == "not_found"
                    assert f"request id {decoy!r}" in error["message"]
                    assert str(isolated_home) not in got.text
                # The page is the page, with 404: it reads the 404 above and says so.
                page = httpx.get(f"{base}/logs/{decoy}", timeout=30)
                assert page.status_code == 404
                assert page.headers["content-type"].startswith("text/html")
                assert str(isolated_home) not in page.text
            assert not list(logs.glob("*decoy*.feedback.json"))
            # The answer's own log is served and rated as ever.
            assert httpx.get(f"{base}/v1/logs/{request_id}", timeout=30).status_code == 200
            rated = httpx.post(
                f"{base}/v1/answers/{request_id}/feedback", json={"rating": "up"}, timeout=30
            )
            assert rated.status_code == 201
            stats = cli(isolated_home, "logs", "stats", "--json")
            assert stats.returncode == 0, stats.stderr
            assert json.loads(stats.stdout)["feedback"] == {"up": 1, "down": 0}
        finally:
            decoys["decoy-one-line"].unlink()  # the suite replays every regular log left behind
            decoys["decoy-stray"].unlink()


def test_an_unreadable_logs_folder_is_a_500_that_names_no_path(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "logs").write_text("a file where the folder should be", encoding="utf-8")
    with served(home) as base:
        for got in (
            httpx.get(f"{base}/v1/logs/anything", timeout=30),
            httpx.get(f"{base}/logs/anything", timeout=30),
            httpx.post(f"{base}/v1/answers/anything/feedback", json={"rating": "up"}, timeout=30),
        ):
            assert got.status_code == 500
            error = got.json()["error"]
            assert error["code"] == "event_log"
            assert "cannot read its logs folder" in error["message"]
            assert str(tmp_path) not in got.text


# --- 6. a rating counts once per answer --------------------------------------------------------


def _feedback_counts(base: str) -> dict[str, float]:
    return _samples(base, "reactome_answers_feedback_total")


def test_two_hundred_alternating_ratings_count_one_answer_once(isolated_home: Path) -> None:
    with served() as base:
        request_id = httpx.post(f"{base}/v1/answer", json={"question": QUESTION}, timeout=60)
        request_id = request_id.json()["request_id"]
        url = f"{base}/v1/answers/{request_id}/feedback"

        def rate(n: int) -> int:
            body = {"rating": ("up", "down")[n % 2]}
            return httpx.post(url, json=body, timeout=60).status_code

        with ThreadPoolExecutor(max_workers=8) as pool:
            statuses = list(pool.map(rate, range(200)))
        assert statuses.count(201) == 1  # the first to take the lock
        assert statuses.count(200) == 199
        (log,) = find_request_logs(isolated_home / "logs", request_id)
        last = read_feedback(log)
        assert last is not None
        other = "down" if last["rating"] == "up" else "up"
        assert _feedback_counts(base) == {last["rating"]: 1.0, other: 0.0}
        # A comment added to the same rating is the same answer rated the same; a change
        # moves it to the other count.
        same = httpx.post(url, json={"rating": last["rating"], "comment": "why"}, timeout=30)
        assert same.status_code == 200
        assert _feedback_counts(base) == {last["rating"]: 1.0, other: 0.0}
        assert httpx.post(url, json={"rating": other}, timeout=30).status_code == 200
        assert _feedback_counts(base) == {last["rating"]: 0.0, other: 1.0}
        assert not [p for p in log.parent.iterdir() if p.name.endswith(".tmp")]
        assert feedback_path(log).exists()


@pytest.mark.slow  # two `serve` processes
def test_ratings_raced_across_two_instances_sharing_a_logs_folder_count_once(
    sample_home: Path, tmp_path: Path
) -> None:
    logs = tmp_path / "shared-logs"
    env = {"REACTOME_ANSWERS_LOGS_DIR": str(logs)}
    with serve_command(sample_home, env=env) as one, serve_command(sample_home, env=env) as other:
        reply = httpx.post(f"{one.base}/v1/answer", json={"question": QUESTION}, timeout=120)
        request_id = reply.json()["request_id"]

        def rate(n: int) -> int:
            # Every other rating to the other process, which finds the log the first wrote.
            base = (one.base, other.base)[n % 4 // 2]
            body = {"rating": ("up", "down")[n % 2]}
            url = f"{base}/v1/answers/{request_id}/feedback"
            return httpx.post(url, json=body, timeout=60).status_code

        with ThreadPoolExecutor(max_workers=8) as pool:
            statuses = list(pool.map(rate, range(200)))
        assert statuses.count(201) == 1
        assert statuses.count(200) == 199
        (log,) = find_request_logs(logs, request_id)
        last = read_feedback(log)
        assert last is not None
        other_rating = "down" if last["rating"] == "up" else "up"
        # Each instance counts the changes it stored; summed, as a query over the fleet
        # sums them, the answer is counted once, under its latest rating.
        counts = [_feedback_counts(base) for base in (one.base, other.base)]
        for rating, expected in ((last["rating"], 1.0), (other_rating, 0.0)):
            assert sum(count.get(rating, 0.0) for count in counts) == expected, counts


# --- 6. an instance over a Chroma server keeps its log readable ---------------------------------


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
