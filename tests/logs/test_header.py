"""The event log's header: written by one function and read by one, with one tolerance rule
for every reader (callbacks/log_header.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from callbacks.log import read_log
from callbacks.log_header import LogHeader
from callbacks.log_summary import answered_by, log_stats
from callbacks.log_view import log_view
from callbacks.rerun_diff import recorded_request
from pipelines.core.errors import EventLogError
from tests.support.logs import refused_log

WRITTEN = LogHeader(
    request_id="r-1",
    question="And its disease?",
    normalized_question="and its disease?",
    history=(("user", "What does ABCA1 do?"), ("assistant", "It exports cholesterol [1].")),
    collections=("reactome",),
    releases={"reactome": {"release": "94", "version": "ra_reactome__1"}},
    options={"cite_urls": False, "live_citations": True, "llm": "extractive"},
    settings_digest="0123456789abcdef",
    host="host-a",
    process=5333,
    created_at="2026-12-05T10:00:00.000+00:00",
)


def _altered(path: Path, **changes: Any) -> Path:
    """The log at ``path`` with its header's fields changed as a hand would."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0]) | changes
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    return path


def test_what_is_written_is_what_is_read(tmp_path: Path) -> None:
    assert read_log(refused_log(tmp_path, WRITTEN)).header == WRITTEN


def test_the_writer_names_the_host_when_the_header_does_not(tmp_path: Path) -> None:
    header = read_log(refused_log(tmp_path, LogHeader(request_id="r-2", question="Q?"))).header
    assert header.host
    assert (header.history, header.collections, header.problems) == ((), ("auto",), {})


@pytest.mark.parametrize(
    ("changes", "field", "read_as"),
    [
        ({"history": "earlier"}, "history", ()),
        ({"history": [{"role": "system", "content": "x"}]}, "history", ()),
        ({"collections": "reactome"}, "collections", ("auto",)),
        ({"options": ["live"]}, "options", {}),
        ({"process": "5333"}, "process", None),
        ({"question": 7}, "question", None),
    ],
)
def test_a_field_we_never_write_is_read_as_missing_and_named(
    tmp_path: Path, changes: dict[str, Any], field: str, read_as: object
) -> None:
    contents = read_log(_altered(refused_log(tmp_path, WRITTEN), **changes))
    assert getattr(contents.header, field) == read_as
    assert list(contents.header.problems) == [field]
    # Every reader goes on: the stats, the page, who answered; a rerun refuses what it needs.
    assert log_stats(contents)["state"] == "refused"
    assert log_view(contents)["request_id"] == "r-1"
    assert answered_by(contents.header) in ("host-a, process 5333", "host-a")
    if field in ("history", "collections"):
        with pytest.raises(EventLogError, match=field):
            recorded_request(contents.header, "x.jsonl")


def test_fields_we_do_not_know_are_ignored(tmp_path: Path) -> None:
    contents = read_log(_altered(refused_log(tmp_path, WRITTEN), note="added by hand"))
    assert contents.header == WRITTEN
