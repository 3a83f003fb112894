"""``reactome-answers ingest`` and ``collections`` as a user runs them: real processes, real
Chroma (a folder, and a ``chroma run`` server), real downloads from a server on 127.0.0.1."""

from __future__ import annotations

import functools
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipelines.catalog.download import download_release
from pipelines.catalog.loaders._common import sha256_of
from tests.support.servers import chroma_server

pytestmark = pytest.mark.slow  # `ingest` by the installed command: sample, mirrors, release files

BIN = Path(sys.executable).parent
SUMMARY_FIELDS = (
    "added", "updated", "deleted", "unchanged", "skipped", "errors", "documents", "chunks",
    "seconds",
)  # fmt: skip
SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
needs_shared_data = pytest.mark.skipif(
    not (SHARED_DATA / "reactome" / "pathway2summation.txt").is_file(),
    reason=f"the real Reactome release files are not at {SHARED_DATA}",
)


def cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "reactome-answers"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """Requests are the test's business, not the test log's."""


@pytest.fixture
def http_server() -> Iterator[functools.partial[str]]:
    """Serve a folder on 127.0.0.1; yields a function that starts serving one folder."""
    servers: list[http.server.ThreadingHTTPServer] = []

    def serve(folder: Path) -> str:
        handler = functools.partial(_QuietHandler, directory=str(folder))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/"

    yield functools.partial(serve)
    for server in servers:
        server.shutdown()
        server.server_close()


def test_sample_ingest_json_then_collections(isolated_home: Path) -> None:
    first = cli("ingest", "--sample", "--json")
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert list(summary) == ["reactome", "disease_variants", "userguide"]
    for counts in summary.values():
        assert set(counts) == set(SUMMARY_FIELDS)
        assert counts["added"] == counts["documents"] > 0
        assert counts["errors"] == 0
    assert first.stderr == ""  # no progress bar when not on a terminal

    again = json.loads(cli("ingest", "--sample", "--json").stdout)
    assert all((c["added"], c["updated"], c["deleted"]) == (0, 0, 0) for c in again.values())

    listed = json.loads(cli("collections", "--json").stdout)
    assert [c["name"] for c in listed] == ["reactome", "disease_variants", "userguide"]
    reactome = listed[0]
    assert reactome["release"] == "sample"
    assert reactome["embedding_model"] == "all-MiniLM-L6-v2-q8"
    assert set(reactome["files"]) == {
        "pathway2summation.txt",
        "ReactomePathways.txt",
        "ReactomePathwaysRelation.txt",
    }
    assert (isolated_home / "chroma").is_dir()

    table = cli("collections").stdout
    assert "reactome:" in table
    assert "release sample" in table


def test_ingest_table_and_verbose_problems(tmp_path: Path) -> None:
    source = tmp_path / "release"
    (source / "reactome").mkdir(parents=True)
    (source / "reactome" / "pathway2summation.txt").write_bytes(
        b"R-HSA-5682113\tDefective ABCA1 causes TGD\tABCA1 exports cholesterol.\n"
        b"BAD-ID\tx\ty\n"
        b"R-HSA-1\tbroken \xff\tz\n"
    )
    result = cli("ingest", "--from", str(source), "--verbose")
    assert result.returncode == 0, result.stderr
    header, row = result.stdout.splitlines()
    assert header.split() == ["collection", *SUMMARY_FIELDS]
    assert row.split()[:9] == ["reactome", "1", "0", "0", "0", "1", "1", "1", "1"]
    assert "reactome: skipped: pathway2summation.txt:2: 'BAD-ID' is not a Reactome stable id" in (
        result.stderr
    )
    assert "reactome: error: pathway2summation.txt:3: not UTF-8" in result.stderr

    quiet = cli("ingest", "--from", str(source))
    assert "1 skipped, 1 unreadable; --verbose lists them" in quiet.stderr


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (["ingest"], 2, "one of the arguments --sample --from --download is required"),
        (["ingest", "--sample", "--collections", "pathways"], 2, "unknown collection(s) pathways"),
        (["ingest", "--from", "/nonexistent/dir"], 1, "/nonexistent/dir is not a folder"),
        (["ingest", "--sample", "--download-url", "http://x/"], 1, "only applies to --download"),
    ],
)
def test_bad_ingest_arguments_say_what_to_do(args: list[str], status: int, message: str) -> None:
    result = cli(*args)
    assert result.returncode == status
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_release_files_name_the_folder(tmp_path: Path) -> None:
    result = cli("ingest", "--from", str(tmp_path), "--collections", "disease_variants")
    assert result.returncode == 1
    assert "disease_variant_ewas_mapping.tsv" in result.stderr
    assert str(tmp_path) in result.stderr


def test_unreachable_chroma_server_is_a_one_line_error() -> None:
    result = cli("collections", env={"CHROMA_HOST": "127.0.0.1", "CHROMA_PORT": str(free_port())})
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1
    assert "cannot open the Chroma server at 127.0.0.1" in result.stderr
    assert "chroma run" in result.stderr


def test_ingest_into_a_chroma_server(tmp_path: Path, isolated_home: Path) -> None:
    # Started, and waited for, with a bound for a server that never answers (not a slow one).
    with chroma_server(tmp_path / "server") as port:
        env = {"CHROMA_HOST": "127.0.0.1", "CHROMA_PORT": str(port)}
        result = cli("ingest", "--sample", "--collections", "disease_variants", "--json", env=env)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["disease_variants"]["added"] >= 15
        listed = json.loads(cli("collections", "--json", env=env).stdout)
        assert [c["name"] for c in listed] == ["disease_variants"]
        # The server holds the vectors; the home folder has no embedded store.
        assert not (isolated_home / "chroma").exists()
        assert json.loads(cli("collections", "--json").stdout) == []


@needs_shared_data
def test_download_from_a_mirror_fetches_the_real_files(
    tmp_path: Path, http_server: functools.partial[str]
) -> None:
    base = http_server(SHARED_DATA)
    target = download_release(
        tmp_path / "dl", ["reactome", "disease_variants", "userguide"], base_url=base
    )
    for name in ("pathway2summation.txt", "ReactomePathways.txt", "ReactomePathwaysRelation.txt"):
        assert sha256_of(target / "reactome" / name) == sha256_of(SHARED_DATA / "reactome" / name)
    variants = "disease_variant_ewas_mapping.tsv"
    assert sha256_of(target / "disease_variants" / variants) == sha256_of(
        SHARED_DATA / "disease_variants" / variants
    )
    pages = sorted(p.name for p in (target / "userguide").glob("*.mdx"))
    assert pages == sorted(p.name for p in (SHARED_DATA / "userguide").glob("*.mdx"))
    assert not list(target.rglob("*.part"))


def test_download_user_guide_pages_from_the_site_as_html(
    tmp_path: Path, http_server: functools.partial[str]
) -> None:
    site = tmp_path / "site"
    (site / "userguide").mkdir(parents=True)
    (site / "userguide" / "index.html").write_text(
        "<title>User Guide</title><h1>User Guide</h1><p>Start here.</p>", encoding="utf-8"
    )
    (site / "userguide" / "pathway-browser").write_text(
        "<title>Pathway Browser</title><h2>Zoom</h2><p>Scroll to zoom.</p>", encoding="utf-8"
    )
    base = http_server(site)
    result = cli(
        "ingest",
        "--download",
        "--download-url",
        base + "download/current/",
        "--collections",
        "userguide",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["userguide"]["documents"] == 2
    listed = json.loads(cli("collections", "--json").stdout)
    assert listed[0]["release"] == "current"
    assert set(listed[0]["files"]) == {
        "SOURCES.tsv",
        "userguide.html",
        "userguide_pathway-browser.html",
    }


def test_download_of_a_missing_release_file_fails_clearly(
    tmp_path: Path, http_server: functools.partial[str]
) -> None:
    base = http_server(tmp_path)
    result = cli(
        "ingest", "--download", "--download-url", base, "--collections", "disease_variants"
    )
    assert result.returncode == 1
    assert "disease_variant_ewas_mapping.tsv is not at " + base in result.stderr


@needs_shared_data
def test_real_release_files_ingest_with_the_documented_counts(tmp_path: Path) -> None:
    home = tmp_path / "fresh-home"
    first = cli("--home", str(home), "ingest", "--from", str(SHARED_DATA), "--json")
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert summary["reactome"]["documents"] == 1084
    assert summary["disease_variants"]["documents"] == 147
    # The data README says 21 user-guide pages; the folder holds 20 (.mdx) plus SOURCES.tsv.
    assert summary["userguide"]["documents"] == len(list((SHARED_DATA / "userguide").glob("*.mdx")))
    assert all(counts["errors"] == 0 for counts in summary.values())

    second = json.loads(
        cli("--home", str(home), "ingest", "--from", str(SHARED_DATA), "--json").stdout
    )
    assert all((c["added"], c["updated"]) == (0, 0) for c in second.values())


def run_with_terminal_stderr(*args: str) -> tuple[int, str, str]:
    """Run the CLI with stderr on a 24x100 pseudo-terminal, as in an interactive shell."""
    import fcntl
    import pty
    import struct
    import termios

    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    process = subprocess.Popen(
        [str(BIN / "reactome-answers"), *args],
        stdout=subprocess.PIPE,
        stderr=terminal,
        text=True,
    )
    os.close(terminal)
    seen = b""
    while True:
        try:
            data = os.read(controller, 65536)
        except OSError:  # EIO: the terminal closed when the process exited
            break
        if not data:
            break
        seen += data
    os.close(controller)
    stdout, _ = process.communicate(timeout=300)
    return process.returncode, stdout, seen.decode(errors="replace")


def test_progress_bar_only_on_a_terminal_and_never_with_json(tmp_path: Path) -> None:
    status, stdout, terminal = run_with_terminal_stderr(
        "ingest", "--sample", "--collections", "disease_variants"
    )
    assert status == 0
    assert "disease_variants" in terminal
    assert "chunk" in terminal  # tqdm's bar, counting chunks embedded
    assert stdout.startswith("collection")  # the closing table still goes to stdout

    status, stdout, terminal = run_with_terminal_stderr(
        "--home",
        str(tmp_path / "second-home"),
        "ingest",
        "--sample",
        "--json",
        "--collections",
        "disease_variants",
    )
    assert status == 0
    assert json.loads(stdout)["disease_variants"]["added"] >= 15
    assert terminal == ""


@needs_shared_data
def test_ingest_download_from_a_mirror_of_the_release(http_server: functools.partial[str]) -> None:
    base = http_server(SHARED_DATA)
    result = cli(
        "ingest",
        "--download",
        "--download-url",
        base,
        "--release",
        "75",
        "--collections",
        "disease_variants,userguide",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["disease_variants"]["documents"] == 147
    pages = list((SHARED_DATA / "userguide").glob("*.mdx"))
    assert summary["userguide"]["documents"] == len(pages)
    listed = {c["name"]: c for c in json.loads(cli("collections", "--json").stdout)}
    variants = SHARED_DATA / "disease_variants" / "disease_variant_ewas_mapping.tsv"
    assert listed["disease_variants"]["files"] == {variants.name: sha256_of(variants)}
    assert listed["disease_variants"]["release"] == "75"
    for page in pages:
        assert listed["userguide"]["files"][page.name] == sha256_of(page)
