from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from langchain_core.embeddings import Embeddings

from pipelines.core.settings import ENV_PREFIX

# CI asks for more examples; a local `make test` stays quick. No per-example deadline: on a
# shared 2-core machine a slow example is load, not a bug (speed is for the benchmarks).
settings.register_profile(
    "ci", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=200, deadline=None)
# `make test-fast`: the properties checked on fewer examples, for a quick answer.
settings.register_profile("fast", max_examples=50, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


# `make test` collects every log the suite's answers wrote here, then summarizes them with
# `logs stats --json` (the citation gate must have held in every answer with both). Read at
# import: each test's environment is cleared of our variables.
SUITE_LOGS = os.environ.get("REACTOME_SUITE_LOGS")


def _keep_for_the_suite_summary(path: Path) -> None:
    folder = Path(str(SUITE_LOGS))
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / path.name
    number = 1
    while target.exists():  # tests reuse request ids; the stamps rarely collide, but may
        target = folder / f"{path.stem}-{number}.jsonl"
        number += 1
    try:
        os.link(path, target)  # the same file system: no copy
    except OSError:
        shutil.copyfile(path, target)


def check_logs_replay(home: Path) -> None:
    """`replay --check` on every event log a test wrote: a fresh handler fed the recorded
    callbacks must emit exactly the recorded events."""
    from callbacks.log import read_log
    from callbacks.replay import replay_diff

    for path in sorted((home / "logs").glob("*.jsonl")):
        if path.is_symlink() or not path.is_file():
            continue  # a test's odd entry (a FIFO, a link to a device), not a log
        diff = replay_diff(read_log(path))
        assert not diff, f"{path} does not replay identically:\n" + "\n".join(diff[:40])
        if SUITE_LOGS:
            _keep_for_the_suite_summary(path)


# What the `slow` marker covers (pyproject.toml): a test that starts one of these programs
# (the installed command, a Chroma server, Redis) is a system test, left out of `make
# test-fast`. Node, which runs the web client's and the AI SDK's own code, is not among them.
SLOW_PROGRAMS = frozenset({"reactome-answers", "chroma", "redis-server"})


def started_program(args: Any) -> str:
    """The name of the program a ``subprocess.Popen(args, ...)`` starts."""
    first = args[0] if isinstance(args, list | tuple) else str(args).split()[0]
    return Path(os.fsdecode(first)).name


# The test running now (its setup, call or teardown), so a server started by a fixture of
# any scope counts against the test that made the fixture start it.
_RUNNING: list[pytest.Item] = []
_POPEN_INIT = subprocess.Popen.__init__


def _refuse_servers_outside_slow_tests(
    self: subprocess.Popen[Any], args: Any, *rest: Any, **options: Any
) -> None:
    item = _RUNNING[-1] if _RUNNING else None
    program = started_program(args)
    if item is not None and program in SLOW_PROGRAMS and not item.get_closest_marker("slow"):
        raise AssertionError(f"{item.nodeid} starts {program}: mark it @pytest.mark.slow")
    _POPEN_INIT(self, args, *rest, **options)


def pytest_configure() -> None:
    """A test not marked slow fails as soon as it (or a fixture it set up) starts a program
    of :data:`SLOW_PROGRAMS`, so the fast tier stays what its marker says."""
    subprocess.Popen.__init__ = _refuse_servers_outside_slow_tests  # type: ignore[method-assign]


def pytest_unconfigure() -> None:
    subprocess.Popen.__init__ = _POPEN_INIT  # type: ignore[method-assign]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    _RUNNING.append(item)
    try:
        return (yield)
    finally:
        _RUNNING.pop()


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder for the derived embedding model, so it is built once per run, not per test."""
    return tmp_path_factory.mktemp("models")


@pytest.fixture(autouse=True)
def isolated_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_cache: Path
) -> Iterator[Path]:
    """Point every test at its own home folder and hide the user's own settings; afterwards,
    every event log the test wrote must replay identically."""
    for name in list(os.environ):
        if name.startswith((ENV_PREFIX, "CHROMA_")) or name == "XDG_DATA_HOME":
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    monkeypatch.setenv(f"{ENV_PREFIX}HOME", str(home))
    monkeypatch.setenv(f"{ENV_PREFIX}MODEL_CACHE", str(model_cache))
    yield home
    check_logs_replay(home)


@pytest.fixture(scope="session")
def minilm(model_cache: Path) -> Embeddings:
    """The real offline embedding model (the default, quantized), loaded once for the run."""
    from pipelines.index.embeddings import MiniLMEmbeddings

    return MiniLMEmbeddings(model_cache=model_cache)


@pytest.fixture(scope="session")
def sample_home(
    tmp_path_factory: pytest.TempPathFactory, minilm: Embeddings, model_cache: Path
) -> Iterator[Path]:
    """A home folder with the sample corpus ingested into a real Chroma folder, built once
    (with the multilingual model's vectors, as the default settings ingest)."""
    from pipelines.catalog import bundled_dir
    from pipelines.catalog.catalog import COLLECTION_NAMES
    from pipelines.core.settings import load_settings
    from pipelines.index.ingestion import ingest, locate_files

    home = tmp_path_factory.mktemp("sample-home")
    settings = load_settings(home=home, model_cache=model_cache)
    ingest(
        settings, locate_files(bundled_dir(), COLLECTION_NAMES, required=True), embeddings=minilm
    )
    yield home
    check_logs_replay(home)


@pytest.fixture(scope="module")
def fuzz_base(sample_home: Path, minilm: Embeddings) -> Iterator[str]:
    """The HTTP app on 127.0.0.1 over the sample corpus, with fake models, logs off."""
    from langchain_core.language_models import FakeListChatModel

    from app.http.factory import create_app
    from pipelines.core.settings import load_settings
    from pipelines.pipeline import AnswerPipeline
    from tests.support.servers import serve

    settings = load_settings(home=sample_home, event_logs=False)
    pipeline = AnswerPipeline(
        settings,
        embeddings=minilm,
        answer_model=FakeListChatModel(responses=["ABCA1 exports cholesterol [1][2][9]."]),
        expander_model=FakeListChatModel(responses=["{}"]),
    )
    yield from serve(create_app(settings, pipeline=pipeline))
