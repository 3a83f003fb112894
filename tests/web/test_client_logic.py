"""The web client's own logic, run in Node against the Python it must agree with.

The client links exactly the markers the finalizer renumbers (``pipelines.citations.finalize``),
reads any valid SSE byte stream however it is cut into chunks, and shows of an answer what
the stream means: with live citations, text that only grows and Sources that grow with the
references; without, the retrieved list until done swaps in the final pair; once done, each
marker carries the evidence item of the sentence the server says owns it; and it keeps the
history it sends within the limits the server states, or sends it whole when the server does
not say. All are checked by importing the client's ES modules (``app/web/static/*.js``, all
but the page's own ``client.js``) in one long-lived Node process, on hypothesis-generated
input and on the events of real streams from the pipeline.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from callbacks.events import DoneEvent, Event, to_jsonl
from pipelines.citations.finalize import _clusters, _code_spans
from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline
from tests.support.citation_tables import FINALIZE_TABLE, STRIP_TABLE
from tests.support.fake_pipeline import ABCA1, CDK5, VARIANT, FakeRetriever
from tests.support.fakes import ScriptedStream
from tests.support.invariants import check_stream
from tests.support.marker_evidence import owned_evidence as marker_items
from tests.support.markup import ANY_MARKUP, MARKDOWN_PIECES

CLIENT_DIR = Path(__file__).parents[2] / "app" / "web" / "static"

# Answers one JSON request per line, in order, with one JSON line. It imports the client's ES
# modules as the browser does (app/web/package.json marks static/*.js as modules for Node).
WORKER = r"""
import { createInterface } from "node:readline";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
const load = (file) => import(pathToFileURL(join(process.env.CLIENT_DIR, file)).href);
const { AnswerState, sourceHref, textPieces } = await load("answer.js");
const { codePointOffsets } = await load("evidence.js");
const { findMarkers } = await load("markers.js");
const { readEvents } = await load("sse.js");
const { fetchLimits, history } = await load("limits.js");
const lines = createInterface({ input: process.stdin });
let queue = Promise.resolve();
const label = (source) => [source.n, source.st_id || source.url];
function view(answer) {
  // What the page would show after an event: the text as pieces, the two lists.
  const pieces = textPieces(answer.text, answer.sources).map((piece) =>
    "cite" in piece
      ? { cite: piece.cite, href: piece.source && sourceHref(piece.source) }
      : piece
  );
  return {
    live: answer.live,
    text: answer.text,
    pieces,
    sources: answer.sources.map(label),
    retrieved: answer.retrieved.map(label),
    failedWithoutText: answer.failedWithoutText,
  };
}
async function handle(request) {
  if (request.op === "answer") {
    const answer = new AnswerState();
    const steps = [];
    for (const event of request.events) {
      answer.apply(event);
      steps.push(view(answer));
    }
    return { steps };
  }
  if (request.op === "evidence") {
    // Each marker of the finished answer with the evidence item the page attaches to it.
    const answer = new AnswerState();
    for (const event of request.events) answer.apply(event);
    const markers = textPieces(answer.text, answer.sources, answer.evidence)
      .filter((piece) => "cite" in piece)
      .map((piece) => [piece.cite, piece.evidence]);
    return { markers };
  }
  if (request.op === "points") {
    const toPoint = codePointOffsets(request.text);
    return { points: request.offsets.map(toPoint) };
  }
  if (request.op === "markers") {
    const { code, groups } = findMarkers(request.text);
    return {
      groups: groups.map((g) => request.text.slice(g.start, g.end)),
      numbers: groups.map((g) => g.numbers.map(([s, e]) => request.text.slice(s, e))),
      code: code.map(([s, e]) => request.text.slice(s, e)),
    };
  }
  if (request.op === "history") {
    // The limits as the server states them ("status" and "body" of GET /v1/limits; a
    // "status" of 0 is a request that never got an answer), then the history sent.
    const limits = await fetchLimits(async (url) => {
      if (url !== "/v1/limits") throw new Error(`asked for ${url}`);
      if (request.status === 0) throw new TypeError("Failed to fetch");
      return new Response(JSON.stringify(request.body), { status: request.status });
    });
    return { history: history(request.conversation, limits), limits };
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
            [node, "--input-type=module", "-e", WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "CLIENT_DIR": str(CLIENT_DIR)},
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
        self.process.wait(timeout=60)  # a bound for a worker that never exits
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


def test_every_table_row_marks_the_same_groups(node: _Node) -> None:
    # The input text of every row of the finalizer's table tests.
    texts = [row.values[0] for row in [*STRIP_TABLE, *FINALIZE_TABLE]]
    assert len(texts) > 50
    for text in texts:
        assert isinstance(text, str)
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


# --- The history the page sends -------------------------------------------------------------

CONVERSATION = [
    {"role": role, "content": f"{role} turn {n}: " + "x" * n}
    for n, role in enumerate(["user", "assistant"] * 3)
]
# Past any limit a server has had (50 turns, 20,000 characters in one), so that a page that
# fell back on limits of its own would be seen.
LONG_CONVERSATION = [
    {"role": role, "content": "x" * 25_000 if n == 0 else f"{role} turn {n}"}
    for n, role in enumerate(["user", "assistant"] * 30)
]


def history_sent(
    node: _Node, status: int, body: Any, conversation: list[dict[str, str]] = CONVERSATION
) -> list[dict[str, str]]:
    """The history the page sends of ``conversation`` after GET /v1/limits answered
    ``status`` with ``body`` (a status of 0: no answer at all)."""
    request = {"op": "history", "status": status, "body": body, "conversation": conversation}
    sent: list[dict[str, str]] = node.ask(request)["history"]
    return sent


def test_the_history_keeps_to_the_limits_the_server_states(node: _Node) -> None:
    limits = {"max_question_chars": 2000, "max_turns": 4, "max_turn_chars": 15}
    assert history_sent(node, 200, limits) == [
        {"role": turn["role"], "content": turn["content"][:15]} for turn in CONVERSATION[-4:]
    ]
    assert history_sent(node, 200, limits | {"max_turns": 0}) == []
    generous = {"max_question_chars": 1, "max_turns": 50, "max_turn_chars": 20_000}
    assert history_sent(node, 200, generous) == CONVERSATION


def limits_read(node: _Node, body: Any) -> Any:
    request = {"op": "history", "status": 200, "body": body, "conversation": []}
    return node.ask(request)["limits"]


def test_a_log_page_is_offered_only_by_a_server_that_says_it_has_one(node: _Node) -> None:
    stated = {"max_question_chars": 2000, "max_turns": 4, "max_turn_chars": 15}
    assert limits_read(node, stated | {"logs": True})["logs"] is True
    # A server from before the field, or one that says anything but true, has none to offer.
    for said in ({}, {"logs": False}, {"logs": "true"}, {"logs": 1}):
        assert limits_read(node, stated | said)["logs"] is False


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (404, {"error": {"code": "not_found", "message": "Not Found"}}),
        (500, {"max_question_chars": 2000, "max_turns": 1, "max_turn_chars": 1}),
        (0, None),
        (200, "not an object"),
        (200, {"max_turns": 1, "max_turn_chars": 1}),
        (200, {"max_question_chars": 2000, "max_turns": "1", "max_turn_chars": 1}),
        (200, {"max_question_chars": 2000, "max_turns": 1.5, "max_turn_chars": 1}),
        (200, {"max_question_chars": 2000, "max_turns": -1, "max_turn_chars": 1}),
    ],
)
def test_without_limits_from_the_server_the_history_is_sent_whole(
    node: _Node, status: int, body: Any
) -> None:
    # The server enforces its limits anyway; the page guesses none of its own.
    assert history_sent(node, status, body, LONG_CONVERSATION) == LONG_CONVERSATION


# --- What the page shows of an answer -------------------------------------------------------

SITE = "https://reactome.org"
DOCUMENTS = [ABCA1, CDK5, VARIANT]  # three citable sources, numbered 1, 2, 3 by retrieval


class _Streams:
    """The real pipeline over fixed documents, whose answer model streams ``tokens`` (and
    fails where a token is None)."""

    def __init__(self) -> None:
        self.tokens: Sequence[str | None] = []
        self.retriever = FakeRetriever(documents=DOCUMENTS)
        model = ScriptedStream(script=lambda _: self._script())
        self.pipeline = AnswerPipeline(
            load_settings(event_logs=False),
            answer_model=model,
            expander_model=ScriptedStream(script=lambda _: ["{}"]),
            retriever=self.retriever,
            raise_handler_errors=True,
        )

    def _script(self) -> Iterator[str]:
        for token in self.tokens:
            if token is None:
                raise RuntimeError("the model broke off")
            yield token

    def events(
        self,
        tokens: Sequence[str | None],
        *,
        live: bool,
        question: str = "What?",
        documents: list[Any] = DOCUMENTS,
    ) -> list[Event]:
        self.tokens = tokens
        self.retriever.documents = list(documents)
        events = list(self.pipeline.stream(question, live_citations=live))
        check_stream(events)
        return events


@pytest.fixture(scope="module")
def streams() -> _Streams:
    return _Streams()


def on_the_page(
    node: _Node, events: list[Event], *, drop_option: bool = False
) -> list[dict[str, Any]]:
    """The client's view after each event, sent as the server sends them (``drop_option``:
    as a server that does not know ``live_citations`` at all, whose start lacks it)."""
    wire = [json.loads(to_jsonl(event)) for event in events]
    if drop_option:
        del wire[0]["data"]["options"]["live_citations"]
    steps: list[dict[str, Any]] = node.ask({"op": "answer", "events": wire})["steps"]
    return steps


def labels(sources: list[Any]) -> list[list[Any]]:
    return [[source.n, source.st_id or source.url] for source in sources]


def cites(step: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(piece["cite"], piece["href"]) for piece in step["pieces"] if "cite" in piece]


def check_links(step: dict[str, Any]) -> None:
    """Every marker number shown links to the listed source of that number, and the pieces
    are the whole text."""
    listed = {str(n): f"{SITE}/content/detail/{st_id}" for n, st_id in step["sources"]}
    for number, link in cites(step):
        assert number in listed, f"[{number}] is shown, but its source is not listed: {step}"
        assert link == listed[number]
    shown = "".join(p.get("text", p.get("code", p.get("cite", ""))) for p in step["pieces"])
    assert shown == step["text"]


def check_live(events: list[Event], steps: list[dict[str, Any]]) -> None:
    """What a live answer must look like on the page, event by event."""
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert all(step["live"] for step in steps)
    # The text only grows (nothing shown is ever rewritten), and it is done.text before done
    # arrives: done swaps nothing in.
    for before, after in itertools.pairwise(step["text"] for step in steps):
        assert after.startswith(before)
    assert steps[-2]["text"] == steps[-1]["text"] == done.data.text
    # The Sources are exactly the references so far, in order, at every step; then done's.
    sent: list[Any] = []
    for event, step in zip(events[:-1], steps[:-1], strict=True):
        if event.type == "reference":
            sent.append(event.data)
        assert step["sources"] == labels(sent)
        check_links(step)
    assert steps[-1]["sources"] == labels(done.data.references)
    check_links(steps[-1])
    # The retrieved list is every citation, in retrieval order.
    citations = [event.data for event in events if event.type == "citation"]
    assert steps[-1]["retrieved"] == labels(citations)


def test_a_live_answer_keeps_its_text_and_grows_its_sources(node: _Node, streams: _Streams) -> None:
    # Source 2 is cited first: it becomes [1]; source 3 is never cited; [7] is out of range.
    tokens = ["CDK5", " is kept active", " [2", "]. ABCA1 ", "exports [1][7]", ", see [2]", "."]
    events = streams.events(tokens, live=True)
    steps = on_the_page(node, events)
    check_live(events, steps)

    assert steps[-1]["text"] == "CDK5 is kept active [1]. ABCA1 exports [2], see [1]."
    cdk5, abca1 = CDK5.metadata["st_id"], ABCA1.metadata["st_id"]
    # One entry at a time, as the text first cites each: never the retrieved list.
    growth = [step["sources"] for step in steps]
    distinct = [shown for i, shown in enumerate(growth) if i == 0 or shown != growth[i - 1]]
    assert distinct == [[], [[1, cdk5]], [[1, cdk5], [2, abca1]]]
    first_cite = next(step for step in steps if cites(step))
    assert first_cite["sources"] == [[1, cdk5]]
    assert cites(first_cite) == [("1", f"{SITE}/content/detail/{cdk5}")]
    assert steps[-1]["retrieved"] == labels([e.data for e in events if e.type == "citation"])
    assert len(steps[-1]["retrieved"]) == 3


def test_without_live_citations_the_retrieved_list_is_swapped_at_done(
    node: _Node, streams: _Streams
) -> None:
    tokens = ["CDK5 [2]", " then ABCA1 [1]", "."]
    events = streams.events(tokens, live=False)
    retrieved = labels([e.data for e in events if e.type == "citation"])
    done = events[-1]
    assert isinstance(done, DoneEvent)
    for steps in (on_the_page(node, events), on_the_page(node, events, drop_option=True)):
        assert not any(step["live"] for step in steps)
        before, after = steps[-2], steps[-1]
        # While streaming: the model's own markers, linked by retrieval number.
        assert before["text"] == "CDK5 [2] then ABCA1 [1]."
        assert before["sources"] == retrieved
        check_links(before)
        # At done: the renumbered text and the cited sources, together.
        assert after["text"] == done.data.text == "CDK5 [1] then ABCA1 [2]."
        assert after["sources"] == labels(done.data.references)
        assert len(after["sources"]) == 2
        check_links(after)
        assert after["retrieved"] == retrieved


def test_a_live_answer_that_cites_nothing_lists_what_done_lists(
    node: _Node, streams: _Streams
) -> None:
    # No marker: no reference event, and done lists the untouched retrieved list, which
    # the page shows as the answer's Sources once done says so, as without live citations.
    events = streams.events(["ABCA1 exports ", "cholesterol."], live=True)
    assert not [event for event in events if event.type == "reference"]
    steps = on_the_page(node, events)
    check_live(events, steps)
    assert all(step["sources"] == [] for step in steps[:-1])
    assert steps[-1]["sources"] == steps[-1]["retrieved"]
    assert len(steps[-1]["sources"]) == 3


def test_a_live_answer_that_fails_keeps_what_it_showed(node: _Node, streams: _Streams) -> None:
    events = streams.events(["CDK5 [2]", " is kept active", " by p25 [1]", None], live=True)
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.data.state == "failed"
    steps = on_the_page(node, events)
    check_live(events, steps)
    assert steps[-1]["text"].startswith("CDK5 [1] is kept active")
    assert steps[-1]["sources"] == labels(done.data.references)
    assert steps[-1]["sources"][0] == [1, CDK5.metadata["st_id"]]


@pytest.mark.parametrize("live", [True, False], ids=["live", "not-live"])
def test_an_answer_that_fails_before_any_text_lists_no_sources(
    node: _Node, streams: _Streams, live: bool
) -> None:
    # Read as the pipeline sends it, whichever list done has (check_stream holds a view of it).
    streams.tokens = [None]
    streams.retriever.documents = list(DOCUMENTS)
    events = list(streams.pipeline.stream("What?", live_citations=live))
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.data.state == "failed"
    assert done.data.text == ""
    steps = on_the_page(node, events)
    # Whatever done lists (a server before issue 37 listed every source retrieved), nothing
    # was answered: no Sources, and the page offers no rating; what was searched stays.
    assert steps[-1]["sources"] == []
    assert steps[-1]["failedWithoutText"] is True
    assert steps[-1]["retrieved"] == labels(citations_of(events))
    assert not any(step["failedWithoutText"] for step in steps[:-1])


def citations_of(events: list[Event]) -> list[Any]:
    return [event.data for event in events if event.type == "citation"]


@pytest.mark.parametrize("case", ["refused", "nothing_found"])
def test_a_live_answer_the_server_writes_in_done_is_shown(
    node: _Node, streams: _Streams, case: str
) -> None:
    # A refusal or "nothing found" streams no token: its text is done's own.
    question, documents = "What?", []
    if case == "refused":
        question, documents = "Why? " * (load_settings().max_question_chars // 5 + 1), DOCUMENTS
    events = streams.events(["never streamed"], live=True, question=question, documents=documents)
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.data.state == case
    assert done.data.text
    steps = on_the_page(node, events)
    assert steps[-2]["text"] == ""
    assert steps[-1]["text"] == done.data.text
    assert steps[-1]["sources"] == []


_TOKENS = st.sampled_from(
    [" ABCA1", " exports", ".", " ", "\n\n", "[1]", "[2]", "[3]", "[9]", "[3, 1]", "[1-3]",
     "[", "]", "1", "2", ",", "`", "``", "(x)", ":", "*", "_", "\\"]
)  # fmt: skip


@given(st.lists(st.lists(_TOKENS, min_size=1, max_size=4).map("".join), max_size=30))
@example(["CDK5 [", "2", "][", "3]. ", "`[1]` and [1]", "."])
@example(["[2]: not a marker\n", "[3](link) and [1]"])
def test_a_live_answer_looks_right_however_it_is_written_and_split(
    node: _Node, streams: _Streams, tokens: list[str]
) -> None:
    events = streams.events(tokens, live=True)
    check_live(events, on_the_page(node, events))


# --- The quote behind each marker -------------------------------------------------------------


def marker_evidence(node: _Node, events: list[Event]) -> list[list[Any]]:
    """Each marker the page shows after ``events``, as [digits, the evidence item attached]."""
    wire = [json.loads(to_jsonl(event)) for event in events]
    markers: list[list[Any]] = node.ask({"op": "evidence", "events": wire})["markers"]
    return markers


def owned_evidence(events: list[Event]) -> list[list[Any]]:
    done = events[-1]
    assert isinstance(done, DoneEvent)
    return [[digits, item] for digits, item in marker_items(done.data)]


@pytest.mark.parametrize("live", [True, False])
def test_each_marker_carries_the_evidence_of_its_own_sentence_once_done(
    node: _Node, streams: _Streams, live: bool
) -> None:
    # [1] (CDK5) is cited by two sentences: each of its markers gets its own sentence's item.
    tokens = ["CDK5 is kept active by p25 [2", "]. ABCA1 exports cholesterol [1][7]",
              ", see [2]", "."]  # fmt: skip
    events = streams.events(tokens, live=live)
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert (
        done.data.text == "CDK5 is kept active by p25 [1]. ABCA1 exports cholesterol [2], see [1]."
    )
    first, second = (tuple(item.sentence) for item in done.data.evidence if item.n == 1)
    assert first != second

    markers = marker_evidence(node, events)

    assert [digits for digits, _ in markers] == ["1", "2", "1"]
    assert [tuple(item["sentence"]) for _, item in markers] == [first, second, second]
    assert markers == owned_evidence(events)
    assert all(any(item["quote"] in d.page_content for d in DOCUMENTS) for _, item in markers)
    # While the answer streams, no marker has a quote yet.
    assert all(item is None for _, item in marker_evidence(node, events[:-1]))


_EVIDENCE_TOKENS = st.sampled_from(
    [" ABCA1 exports cholesterol", " CDK5 is kept active", ".", " ", "\n\n", "[1]", "[2]",
     "[3]", "[9]", "[3, 1]", "[1-3]", "[", "]", "`", "(x)", " \U0001f9ec", " \u00e9t\u00e9",
     " \U0001d6fc-helix", " e.g.", "?"]
)  # fmt: skip


@given(
    st.lists(st.lists(_EVIDENCE_TOKENS, min_size=1, max_size=4).map("".join), max_size=20),
    st.booleans(),
)
@example(["\U0001f9ec CDK5 is kept active [2]. \U0001f9ec ABCA1 exports [1].", " [3] then"], True)
@example(["ABCA1 exports cholesterol. [1] CDK5 is kept active [2][3]."], False)
def test_the_page_attaches_evidence_to_the_markers_the_server_judged(
    node: _Node, streams: _Streams, tokens: list[str], live: bool
) -> None:
    # Characters beyond the Basic Multilingual Plane make the page's offsets (UTF-16) and
    # the server's (code points) differ after them.
    events = streams.events(tokens, live=live)
    assert marker_evidence(node, events) == owned_evidence(events)


@given(st.text(max_size=40))
@example("a\U0001f9ecb\ud800c\udc00\U0001d6fc")
def test_page_offsets_map_to_the_servers_code_point_offsets(node: _Node, text: str) -> None:
    units = [len(text[:i].encode("utf-16-le", "surrogatepass")) // 2 for i in range(len(text) + 1)]
    reply = node.ask({"op": "points", "text": text, "offsets": units})
    assert reply["points"] == list(range(len(text) + 1))
