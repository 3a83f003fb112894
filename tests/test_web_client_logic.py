"""The web client's own logic, run in Node against the Python it must agree with.

The client links exactly the markers the finalizer renumbers (``pipelines.citations``), and
reads any valid SSE byte stream however it is cut into chunks. Both are checked by running
``app/web/static/client.js`` in one long-lived Node process on hypothesis-generated input.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pipelines.citations import _clusters, _code_spans
from tests import test_citations_table
from tests.support.markup import ANY_MARKUP, MARKDOWN_PIECES

CLIENT_JS = Path(__file__).parents[1] / "app" / "web" / "static" / "client.js"

# Answers one JSON request per line, in order, with one JSON line.
WORKER = r"""
const { findMarkers, readEvents } = require(process.env.CLIENT_JS);
const lines = require("readline").createInterface({ input: process.stdin });
let queue = Promise.resolve();
async function handle(request) {
  if (request.op === "markers") {
    const { code, groups } = findMarkers(request.text);
    return {
      groups: groups.map((g) => request.text.slice(g.start, g.end)),
      numbers: groups.map((g) => g.numbers.map(([s, e]) => request.text.slice(s, e))),
      code: code.map(([s, e]) => request.text.slice(s, e)),
    };
  }
  const body = new ReadableStream({
    start(controller) {
      for (const chunk of request.chunks) controller.enqueue(Uint8Array.from(chunk));
      controller.close();
    },
  });
  const events = [];
  for await (const event of readEvents(body)) events.push(event);
  return { events };
}
lines.on("line", (line) => {
  queue = queue.then(async () => {
    let reply;
    try {
      reply = await handle(JSON.parse(line));
    } catch (error) {
      reply = { error: String(error && error.stack || error) };
    }
    process.stdout.write(JSON.stringify(reply) + "\n");
  });
});
"""


class _Node:
    def __init__(self) -> None:
        node = shutil.which("node")
        if node is None:
            pytest.fail("node is missing: the web client's logic is tested with Node.js 18+")
        self.process = subprocess.Popen(
            [node, "-e", WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "CLIENT_JS": str(CLIENT_JS)},
        )

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        self.process.stdin.flush()
        reply: dict[str, Any] = json.loads(self.process.stdout.readline())
        assert "error" not in reply, reply["error"]
        return reply

    def close(self) -> None:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(timeout=10)
        self.process.stdout.close()


@pytest.fixture(scope="module")
def node() -> Iterator[_Node]:
    worker = _Node()
    yield worker
    worker.close()


def python_markers(text: str) -> dict[str, Any]:
    groups = [group for cluster in _clusters(text) for group in cluster.groups]
    return {
        "groups": [text[group.start : group.end] for group in groups],
        "code": [text[start:end] for start, end in sorted(_code_spans(text))],
    }


def check_markers(node: _Node, text: str) -> None:
    reply = node.ask({"op": "markers", "text": text})
    assert {"groups": reply["groups"], "code": reply["code"]} == python_markers(text)
    for group, numbers in zip(reply["groups"], reply["numbers"], strict=True):
        assert numbers == list("".join(c if c.isdigit() else " " for c in group).split())


def table_texts() -> list[str]:
    """The input text of every row of the finalizer's table tests."""
    texts = []
    for test in vars(test_citations_table).values():
        for mark in getattr(test, "pytestmark", []):
            if mark.name == "parametrize" and mark.args[0][0] == "text":
                texts += [param.values[0] for param in mark.args[1]]
    return texts


def test_every_table_row_marks_the_same_groups(node: _Node) -> None:
    texts = table_texts()
    assert len(texts) > 50
    for text in texts:
        check_markers(node, text)


@given(
    st.lists(st.sampled_from(MARKDOWN_PIECES), max_size=60).map("".join)
    | st.text(ANY_MARKUP, max_size=200)
    | st.text(max_size=200)
)
@example("CDK5 [4] and EGFR [1].\n\n[4]: CDK5 pathway")
@example("see [[2]](https://reactome.org) and [3-1] and [1\t]")
@example("~~~\n[1]\n~~~\nthen ``a `[2]` b`` and a ` b [3] c `` d")
@example("[10000000000000000002-10000000000000000001] [007]")
@example("a\x1c\n[1] `x\n\u2028\n[2]` ```\n[3]")
def test_client_and_finalizer_agree_on_what_is_a_marker(node: _Node, text: str) -> None:
    check_markers(node, text)


_EVENT_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=20)


@st.composite
def sse_streams(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[list[int]]]:
    """Events, written as SSE with any line endings, comments, ids and multi-line data, then
    cut into chunks anywhere (inside a UTF-8 character or between \\r and \\n included)."""
    events = draw(st.lists(st.fixed_dictionaries({"type": _EVENT_TEXT, "text": _EVENT_TEXT})))
    newline = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    frames = []
    for event in events:
        lines = []
        if draw(st.booleans()):
            lines.append(": ping")
        lines.append(f"id: {draw(st.integers(1, 99))}")
        # Indented JSON splits into several data lines, joined by \n on the reading side.
        body = json.dumps(event, indent=draw(st.sampled_from([None, 1])), ensure_ascii=False)
        lines += [f"data:{' ' if draw(st.booleans()) else ''}{part}" for part in body.split("\n")]
        frames.append(newline.join(lines) + newline + newline)
    raw = "".join(frames).encode()
    cuts = sorted(set(draw(st.lists(st.integers(0, len(raw)), max_size=12))))
    bounds = [0, *cuts, len(raw)]
    chunks = [list(raw[a:b]) for a, b in itertools.pairwise(bounds) if b > a]
    return events, chunks


@given(sse_streams())
def test_the_sse_reader_yields_every_event_however_the_bytes_arrive(
    node: _Node, stream: tuple[list[dict[str, Any]], list[list[int]]]
) -> None:
    events, chunks = stream
    assert node.ask({"op": "sse", "chunks": chunks})["events"] == events


def test_a_lone_carriage_return_ends_the_last_event(node: _Node) -> None:
    chunks = [list(b'data: {"a": 1}\r'), list(b"\r")]
    assert node.ask({"op": "sse", "chunks": chunks})["events"] == [{"a": 1}]
