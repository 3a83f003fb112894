"""The reference web client at `/`, in a real headless Chromium driven by Playwright.

Chromium comes from Debian's `chromium` package (`make install-browser`); Playwright's own
browser download does not work offline.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel, FakeListChatModel

from app.http.factory import create_app
from app.http.routes.web import WEB_DIR
from callbacks.events import (
    CitationEvent,
    DoneData,
    DoneEvent,
    Event,
    Reference,
    ReferenceEvent,
    parse_event,
)
from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline
from tests.support.browser import launched
from tests.support.fake_openai import fake_chat, serving_env
from tests.support.fake_pipeline import ABCA1, CDK5, make_pipeline
from tests.support.fakes import ScriptedStream
from tests.support.forged import FORGED_QUESTION, build_forged_home
from tests.support.invariants import check_stream
from tests.support.marker_evidence import owned_evidence
from tests.support.servers import serve, serve_command

pytestmark = pytest.mark.slow  # Chromium driven by Playwright, over real servers

SITE = "https://reactome.org"
GUIDE_QUESTION = "How do I use the pathway browser?"
# Questions whose answers cite some of the user-guide pages retrieved, renumbered; which of
# them shows it depends on the ranking, so the first that does is used.
SWAP_QUESTIONS = ("How do I convert identifiers to human?", "What do Reactome identifiers mean?",
                  "How do I search the pathway browser?")  # fmt: skip

# Records every state of the Sources list, so a test can see the early list before the swap.
RECORD_SOURCES = """
window.__sourceSnapshots = [];
document.addEventListener("DOMContentLoaded", () => {
  const list = document.getElementById("sources");
  new MutationObserver(() => {
    window.__sourceSnapshots.push([...list.children].map((li) => li.dataset.source));
  }).observe(list, { childList: true });
});
"""

# Records what the page shows of the answer at every change: its state, text and marker links,
# and the Sources list. The last record while the state is "streaming" is the page just before
# done was handled.
RECORD_PAGE = """
window.__pageSnapshots = [];
document.addEventListener("DOMContentLoaded", () => {
  const answer = document.getElementById("answer");
  const list = document.getElementById("sources");
  new MutationObserver(() => {
    window.__pageSnapshots.push({
      state: answer.dataset.state || "",
      text: answer.textContent,
      cites: [...answer.querySelectorAll("a.cite")].map((a) => [a.textContent, a.href]),
      sources: [...list.children].map((li) => li.dataset.source),
    });
  }).observe(document.querySelector("main"), {
    subtree: true, childList: true, characterData: true, attributeFilter: ["data-state"],
  });
});
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with launched() as chromium:
        yield chromium


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    # Every wait and action may take this long before it fails: a bound for a page that never
    # gets there, generous for a busy machine (Playwright's own is 30 s).
    context.set_default_timeout(90_000)
    page = context.new_page()
    page.add_init_script(RECORD_SOURCES)
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.problems = problems
    yield page
    context.close()


@pytest.fixture(scope="module")
def served(sample_home: Path) -> Iterator[str]:
    """The real `serve` command over the ingested sample, with the extractive provider."""
    with serve_command(sample_home, "--no-log") as server:
        yield server.base


def sse_events(base: str, body: dict[str, Any]) -> list[Event]:
    with (
        httpx.Client(timeout=60) as client,
        connect_sse(client, "POST", f"{base}/v1/answer/stream", json=body) as source,
    ):
        return [parse_event(frame.data) for frame in source.iter_sse()]


def ask(page: Any, base: str, question: str, *, cite_urls: bool = False) -> str:
    """Ask through the form, as a person would; returns the final state the page shows."""
    page.goto(f"{base}/")
    page.fill("#question", question)
    if cite_urls:
        page.check("#cite-urls")
    page.click("#submit")
    page.wait_for_selector(
        "#answer[data-state]:not([data-state=streaming])", state="attached", timeout=90_000
    )
    state: str = page.get_attribute("#answer", "data-state")
    return state


def shown_sources(page: Any) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = page.eval_on_selector_all(
        "#sources li",
        "items => items.map(li => [li.dataset.n, li.dataset.source,"
        " li.querySelector('.name').textContent])",
    )
    return [tuple(row) for row in rows]  # type: ignore[misc]


def expected_sources(references: list[Reference]) -> list[tuple[str, str, str]]:
    return [(str(r.n), r.st_id or r.url or "", r.display_name) for r in references]


def href(reference: Reference) -> str:
    if reference.st_id:
        return f"{SITE}/content/detail/{reference.st_id}"
    assert reference.url is not None
    return reference.url if reference.url.startswith("http") else SITE + reference.url


def marker_links(page: Any) -> list[tuple[str, str]]:
    rows = page.eval_on_selector_all(
        "#answer a.cite", "links => links.map(a => [a.textContent, a.href])"
    )
    return [(number, link) for number, link in rows]


def asked_bodies(page: Any) -> list[dict[str, Any]]:
    """The bodies the page posts to the stream endpoint, filled in as it asks."""
    bodies: list[dict[str, Any]] = []

    def note(request: Any) -> None:
        if request.url.endswith("/v1/answer/stream"):
            bodies.append(json.loads(request.post_data))

    page.on("request", note)
    return bodies


def as_to_a_server_without_live_citations(page: Any) -> None:
    """The page's requests reach the server without ``live_citations``, as with a server that
    does not know the field: the stream is the one from before the option."""

    def strip(route: Any) -> None:
        body = json.loads(route.request.post_data)
        body.pop("live_citations", None)
        route.continue_(post_data=json.dumps(body))

    page.route("**/v1/answer/stream", strip)


def test_without_live_citations_the_page_swaps_in_the_cited_sources_at_done(
    page: Any, served: str
) -> None:
    for question in SWAP_QUESTIONS:
        events = sse_events(served, {"question": question, "cite_urls": True})
        done = check_stream(events)
        early = [e.data.st_id or e.data.url for e in events if isinstance(e, CitationEvent)]
        references = done.data.references
        # The swap is visible: fewer sources, and renumbered.
        if len(references) < len(early) and [r.source_n for r in references] != [
            r.n for r in references
        ]:
            break
    else:
        pytest.fail(f"none of {SWAP_QUESTIONS} drops and renumbers sources any more")

    as_to_a_server_without_live_citations(page)
    assert ask(page, served, question, cite_urls=True) == "answered"

    snapshots = page.evaluate("window.__sourceSnapshots")
    assert early in snapshots, "the retrieved sources were never listed while streaming"
    assert shown_sources(page) == expected_sources(references)
    assert page.is_visible("#sources-heading")
    assert page.inner_text("#answer").strip() == done.data.text.strip()
    by_number = {str(r.n): href(r) for r in references}
    links = marker_links(page)
    assert links, "the answer's markers were not linked"
    assert all(link == by_number[number] for number, link in links)
    assert page.problems == []


def test_the_page_is_served_only_with_its_policy(served: str) -> None:
    page = httpx.get(f"{served}/")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "default-src 'none'" in policy
    assert httpx.get(f"{served}/static/index.html").status_code == 404
    # The page's script is an ES module, which a browser runs only with a JavaScript type.
    assert '<script type="module" src="/static/client.js">' in page.text
    modules = sorted(path.name for path in (WEB_DIR / "static").glob("*.js"))
    assert "client.js" in modules
    assert len(modules) > 1
    for module in modules:
        response = httpx.get(f"{served}/static/{module}")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/javascript"), module


def test_stable_id_markers_link_to_reactome_detail_pages(page: Any, served: str) -> None:
    question = "What causes Tangier disease, and what does ABCA1 do?"
    done = check_stream(sse_events(served, {"question": question}))
    assert done.data.references

    assert ask(page, served, question) == "answered"

    assert shown_sources(page) == expected_sources(done.data.references)
    links = marker_links(page)
    cited = {f"{SITE}/content/detail/{r.st_id}" for r in done.data.references}
    assert {link for _, link in links} == cited
    by_number = {str(r.n): href(r) for r in done.data.references}
    assert all(link == by_number[number] for number, link in links)
    source_links = page.eval_on_selector_all(
        "#sources li a.name", "links => links.map(a => a.href)"
    )
    assert source_links == [href(r) for r in done.data.references]


def test_a_citation_free_answer_has_no_sources_heading(page: Any, served: str) -> None:
    # User-guide pages have no stable id, so without url citations nothing is cited.
    events = sse_events(served, {"question": GUIDE_QUESTION, "live_citations": True})
    assert check_stream(events).data.references == []
    assert not [event for event in events if isinstance(event, ReferenceEvent)]
    bodies = asked_bodies(page)

    assert ask(page, served, GUIDE_QUESTION) == "answered"

    assert [body.get("live_citations") for body in bodies] == [True]

    assert page.inner_text("#answer").strip()
    assert not page.is_visible("#sources-heading")
    assert page.locator("#sources li").count() == 0
    assert page.evaluate("window.__sourceSnapshots.every(s => s.length === 0)")


def test_a_refused_request_shows_the_servers_message(page: Any, served: str) -> None:
    limit = load_settings().max_question_chars
    assert ask(page, served, "Why? " * (limit // 5 + 1)) == "failed"

    assert page.is_visible("#error")
    assert "characters; the limit is" in page.inner_text("#error")
    assert not page.is_visible("#sources-heading")


MARKUP = (
    'ABCA1 <img src=x onerror="window.__pwned=1"> exports cholesterol '
    "</script><script>window.__pwned=1</script> [1].\n\nevent: done\ndata: {}\n\n"
)


def scripted_server(home: Path, embeddings: Embeddings, model: BaseChatModel) -> Iterator[str]:
    """In-process server over the sample whose answer model is scripted."""
    settings = load_settings(home=home, event_logs=False)
    pipeline = AnswerPipeline(settings, embeddings=embeddings, answer_model=model,
                              expander_model=FakeListChatModel(responses=["{}"]))  # fmt: skip
    yield from serve(create_app(settings, pipeline=pipeline))


def test_markup_in_an_answer_is_shown_as_text(
    page: Any, sample_home: Path, minilm: Embeddings
) -> None:
    # One character per token: the markup arrives split across many events.
    for base in scripted_server(sample_home, minilm, FakeListChatModel(responses=[MARKUP])):
        assert ask(page, base, "What does ABCA1 do?") == "answered"

        shown = page.inner_text("#answer")
        assert "<img src=x" in shown
        assert "</script><script>" in shown
        assert "event: done" in shown
        assert page.locator("#answer img, #answer script").count() == 0
        assert page.problems == []


def test_a_failure_mid_answer_shows_the_error(
    page: Any, sample_home: Path, minilm: Embeddings
) -> None:
    failing = FakeListChatModel(
        responses=["ABCA1 moves cholesterol [1] out"], error_on_chunk_number=12
    )
    for base in scripted_server(sample_home, minilm, failing):
        assert ask(page, base, "What does ABCA1 do?") == "failed"

        assert page.is_visible("#error")
        assert page.inner_text("#error").strip()
        assert page.inner_text("#status") == "The answer could not be completed."
        assert page.problems == []


def test_the_page_shows_a_replayed_answer(page: Any, isolated_home: Path) -> None:

    pipeline, _, _ = make_pipeline([ABCA1, CDK5], "CDK5 [2] first, then ABCA1 [1].")
    recorded = list(pipeline.stream("What does CDK5 do?", request_id="req-page"))
    done = recorded[-1]
    assert isinstance(done, DoneEvent)
    replay = ("replay", "req-page", "--instant", "--serve")
    with serve_command(isolated_home, command=replay) as served:
        assert ask(page, served.base, "whatever is typed, the recording answers") == "answered"

        assert page.inner_text("#answer").strip() == done.data.text
        assert shown_sources(page) == expected_sources(done.data.references)
        assert [n for n, _ in marker_links(page)] == ["1", "2"]


def test_forged_source_names_and_texts_show_as_text(
    page: Any, tmp_path_factory: pytest.TempPathFactory, minilm: Embeddings
) -> None:
    home = build_forged_home(tmp_path_factory.mktemp("forged-page"), minilm)
    with serve_command(home, "--no-log") as server:
        assert ask(page, server.base, FORGED_QUESTION) == "answered"

        names = [name for _, _, name in shown_sources(page)]
        assert any("<img src=x" in name for name in names)
        assert any("</script><script>" in name for name in names)
        assert "[99]" not in page.inner_text("#answer")
        assert (
            page.locator("#answer img, #answer script, #sources img, #sources script").count() == 0
        )
        assert page.evaluate("window.forged === undefined")
        assert page.problems == []


# An answer that cites the retrieved sources 3, 1 and 5 first in that order (so with live
# citations they become [1], [2] and [3]), one word every TOKEN_S; a marker is split as a
# tokenizer may split it. The empty tokens at the end are a pause before done.
LIVE_QUESTION = "What does CDK5 do in Alzheimer's disease?"
LIVE_TOKENS = ["CDK5", " is", " kept", " active", " by", " p25", " [", "3", "].", " It",
               " phosphorylates", " tau", " [3][1].", " Neurons", " then", " die", " [5],",
               " as", " in", " other", " diseases", " [1].", "", "", ""]  # fmt: skip
TOKEN_S = 0.06


def test_a_live_answer_keeps_its_text_and_lists_each_source_as_it_is_cited(
    page: Any, sample_home: Path, minilm: Embeddings
) -> None:
    model = ScriptedStream(script=lambda _: LIVE_TOKENS, delay_s=TOKEN_S)
    for base in scripted_server(sample_home, minilm, model):
        events = sse_events(base, {"question": LIVE_QUESTION, "live_citations": True})
        done = check_stream(events).data
        retrieved = [e.data.st_id for e in events if isinstance(e, CitationEvent)]
        references = done.references
        assert [r.source_n for r in references] == [3, 1, 5]
        assert len(retrieved) > len(references)
        labels = [r.st_id for r in references]
        hrefs = {str(r.n): href(r) for r in references}
        page.add_init_script(RECORD_PAGE)
        bodies = asked_bodies(page)

        assert ask(page, base, LIVE_QUESTION) == "answered"

        assert [body.get("live_citations") for body in bodies] == [True]
        snapshots = page.evaluate("window.__pageSnapshots")
        streaming = [s for s in snapshots if s["state"] == "streaming"]
        # (a) No swap: the text only ever grew, and just before done it was done.text.
        texts = [s["text"] for s in snapshots]
        assert all(b.startswith(a) for a, b in itertools.pairwise(texts)), texts
        assert streaming[-1]["text"] == done.text
        assert page.text_content("#answer") == done.text
        # (b) The Sources grew one reference at a time, each while the text first cited it.
        lists = [s["sources"] for s in snapshots]
        grown = [shown for i, shown in enumerate(lists) if i == 0 or shown != lists[i - 1]]
        assert grown == [labels[:count] for count in range(len(labels) + 1)]
        for count in range(1, len(labels) + 1):
            assert any(
                s["sources"] == labels[:count] and str(count) in [n for n, _ in s["cites"]]
                for s in streaming
            ), f"[{count}] was never shown with the first {count} sources listed"
        for snapshot in snapshots:
            cited = [number for number, _ in snapshot["cites"]]
            assert all(int(n) <= len(snapshot["sources"]) for n in cited), snapshot
            assert all(link == hrefs[n] for n, link in snapshot["cites"]), snapshot
        assert shown_sources(page) == expected_sources(references)
        assert page.is_visible("#sources-heading")
        # (c) The retrieved list is what was searched, folded away, never the Sources.
        assert retrieved not in lists
        assert page.inner_text("#retrieved-summary") == f"Searched {len(retrieved)} sources"
        assert page.locator("#sources-section #retrieved").count() == 0
        assert not page.is_visible("#retrieved")
        page.click("#retrieved-summary")
        assert page.is_visible("#retrieved")
        assert (
            page.eval_on_selector_all(
                "#retrieved li", "items => items.map(li => li.dataset.source)"
            )
            == retrieved
        )
        assert page.problems == []


# --- a conversation ---------------------------------------------------------------------------

FIRST = "What does ABCA1 do?"
FOLLOW_UP = "What disease does a defect in it cause?"


def wait_settled(page: Any, turns_before: int) -> None:
    page.wait_for_function(
        "n => document.querySelectorAll('#conversation .turn').length === n && "
        "!['', 'streaming'].includes(document.getElementById('answer').dataset.state || '')",
        arg=turns_before,
        timeout=90_000,
    )


def test_a_conversation_keeps_earlier_turns_and_sends_them_as_history(
    page: Any, served: str
) -> None:
    bodies = asked_bodies(page)
    page.goto(f"{served}/")
    page.fill("#question", FIRST)
    page.press("#question", "Enter")  # Enter asks
    wait_settled(page, 0)
    first_text = page.text_content("#answer")
    first_sources = shown_sources(page)
    assert first_sources
    assert page.input_value("#question") == ""  # ready for the next question

    page.fill("#question", "What disease")
    page.press("#question", "Shift+Enter")  # a new line, not a question
    assert page.input_value("#question") == "What disease\n"
    assert len(bodies) == 1
    page.fill("#question", FOLLOW_UP)
    page.press("#question", "Enter")
    wait_settled(page, 1)

    # The first turn is still on the page, with its own question, answer and Sources.
    earlier = page.locator("#conversation .turn")
    assert earlier.locator(".asked").text_content() == FIRST
    assert earlier.locator(".answer").text_content() == first_text
    earlier_sources = earlier.locator("li").evaluate_all(
        "items => items.map(li => [li.dataset.n, li.dataset.source,"
        " li.querySelector('.name').textContent])"
    )
    assert [tuple(row) for row in earlier_sources] == first_sources
    assert page.text_content("#asked") == FOLLOW_UP

    # The follow-up went with the conversation, and the page shows the server's answer to it.
    history = [{"role": "user", "content": FIRST}, {"role": "assistant", "content": first_text}]
    assert [body.get("history", []) for body in bodies] == [[], history]
    done = check_stream(sse_events(served, {"question": FOLLOW_UP, "history": history}))
    assert page.text_content("#answer") == done.data.text
    assert shown_sources(page) == expected_sources(done.data.references)
    assert "R-HSA-5682113" in [r.st_id for r in done.data.references]  # Tangier disease

    # A new conversation clears the page, and the next question goes alone.
    page.click("#new-conversation")
    assert page.locator("#conversation .turn").count() == 0
    assert page.text_content("#answer") == ""
    page.fill("#question", FOLLOW_UP)
    page.press("#question", "Enter")
    wait_settled(page, 0)
    assert bodies[-1].get("history", []) == []
    assert page.problems == []


# Holds each answer stream's end (after done) until the page aborts it, so that a question can
# be asked while the previous answer is settled on the page but its stream is still open.
HOLD_STREAM_ENDS = """
const realFetch = window.fetch;
window.__heldEnds = 0;
window.fetch = async (input, init) => {
  const response = await realFetch(input, init);
  if (!String(input).endsWith("/v1/answer/stream") || !response.body) return response;
  const reader = response.body.getReader();
  const held = new ReadableStream({
    async pull(controller) {
      const { value, done } = await reader.read();
      if (!done) {
        controller.enqueue(value);
        return;
      }
      window.__heldEnds += 1;
      await new Promise((aborted) => init.signal.addEventListener("abort", aborted));
      controller.error(new DOMException("The request was aborted", "AbortError"));
    },
    cancel: (reason) => reader.cancel(reason),
  });
  return new Response(held, { status: response.status, headers: response.headers });
};
"""


def test_a_question_asked_before_the_last_answers_stream_closes_keeps_that_answer(
    page: Any, served: str
) -> None:
    page.add_init_script(HOLD_STREAM_ENDS)
    bodies = asked_bodies(page)
    page.goto(f"{served}/")
    page.fill("#question", FIRST)
    page.press("#question", "Enter")
    wait_settled(page, 0)
    page.wait_for_function("window.__heldEnds === 1")  # done is handled; the stream is open
    first_text = page.text_content("#answer")

    page.fill("#question", FOLLOW_UP)
    page.press("#question", "Enter")
    page.wait_for_function(
        "q => document.getElementById('asked').textContent === q && "
        "!['', 'streaming'].includes(document.getElementById('answer').dataset.state || '')",
        arg=FOLLOW_UP,
    )

    earlier = page.locator("#conversation .turn")
    assert earlier.count() == 1
    assert earlier.locator(".asked").text_content() == FIRST
    assert earlier.locator(".answer").text_content() == first_text
    assert [len(body.get("history", [])) for body in bodies] == [0, 2]
    assert page.problems == []


def converse(page: Any, questions: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """Asks each question in turn on the page as loaded, each answered; returns the bodies
    posted and the answers' texts."""
    bodies = asked_bodies(page)
    texts = []
    for turns_before, question in enumerate(questions):
        page.fill("#question", question)
        page.press("#question", "Enter")
        wait_settled(page, turns_before)
        assert page.get_attribute("#answer", "data-state") == "answered"
        texts.append(page.text_content("#answer"))
    return bodies, texts


LIMITS = "**/v1/limits"
CONVERSATION = [FIRST, "What causes Tangier disease?", "What does CDK5 do?"]


def is_limits(response: Any) -> bool:
    return bool(response.url.endswith("/v1/limits"))


def test_the_page_asks_the_server_for_its_limits_once(page: Any, served: str) -> None:
    asked: list[Any] = []
    page.on("request", lambda request: asked.append(request) if is_limits(request) else None)
    with page.expect_response(is_limits) as limits:
        page.goto(f"{served}/")
    assert limits.value.status == 200
    stated = limits.value.json()
    sizes = {"max_question_chars", "max_turns", "max_turn_chars"}
    assert set(stated) == {*sizes, "feedback", "logs"}
    assert stated["max_question_chars"] == load_settings().max_question_chars
    assert all(isinstance(stated[name], int) and stated[name] > 0 for name in sizes)
    assert stated["feedback"] is False  # `--no-log`: no log to keep a rating beside
    assert stated["logs"] is False  # nor a log page to link to

    bodies, _ = converse(page, CONVERSATION[:2])

    assert len(bodies[1]["history"]) == 2
    assert len(asked) == 1
    assert page.locator(".answer-log, .feedback").count() == 0
    assert page.problems == []


def test_the_history_the_page_sends_keeps_to_the_limits_the_server_states(
    page: Any, served: str
) -> None:
    # Small limits, so that a short conversation passes them.
    stated = {"max_question_chars": 2000, "max_turns": 3, "max_turn_chars": 12}
    page.route(LIMITS, lambda route: route.fulfill(json=stated))
    page.goto(f"{served}/")

    bodies, texts = converse(page, CONVERSATION)

    turns = [{"role": role, "content": content[:12]}
             for question, text in zip(CONVERSATION, texts, strict=True)
             for role, content in (("user", question), ("assistant", text))]  # fmt: skip
    assert all(len(text) > 12 for text in texts)
    assert [body.get("history", []) for body in bodies] == [[], turns[:2], turns[1:4]]
    assert page.problems == []


def test_a_server_that_does_not_state_its_limits_gets_the_whole_conversation(
    page: Any, served: str
) -> None:
    page.route(LIMITS, lambda route: route.abort())
    page.goto(f"{served}/")

    bodies, texts = converse(page, CONVERSATION[:2])

    history = [{"role": "user", "content": FIRST}, {"role": "assistant", "content": texts[0]}]
    assert [body.get("history", []) for body in bodies] == [[], history]


def test_a_server_with_keys_gets_one_from_the_page_and_it_is_kept_for_the_tab(
    page: Any, sample_home: Path
) -> None:
    key = "page-key-5e1f0a"
    env = {"REACTOME_ANSWERS_API_KEYS": key}
    with serve_command(sample_home, "--no-log", env=env) as server:
        sent: list[str | None] = []
        page.on(
            "request",
            lambda request: (
                sent.append(request.headers.get("authorization"))
                if request.url.endswith("/v1/answer/stream")
                else None
            ),
        )
        # The limits are stated to anyone: the page gets them without a key.
        with page.expect_response(is_limits) as limits:
            page.goto(f"{server.base}/")
        assert limits.value.status == 200
        assert page.is_hidden("#key-form")
        page.fill("#question", FIRST)
        page.press("#question", "Enter")
        page.wait_for_selector("#key-form", state="visible", timeout=90_000)
        assert "needs an API key" in page.text_content("#error")
        page.fill("#api-key", "not-the-key")
        page.press("#api-key", "Enter")
        # A wrong key: asked for again, with the server's reason.
        page.wait_for_function(
            "() => document.getElementById('error').textContent.includes('not one this server')",
            timeout=90_000,
        )
        assert page.is_visible("#key-form")
        page.fill("#api-key", key)
        page.press("#api-key", "Enter")
        wait_settled(page, 0)
        assert page.get_attribute("#answer", "data-state") == "answered"
        assert page.is_hidden("#key-form")
        assert shown_sources(page)

        # Kept for the tab: a reload asks with it, and nothing asks for it again.
        page.reload()
        page.fill("#question", FIRST)
        page.press("#question", "Enter")
        wait_settled(page, 0)
        assert page.get_attribute("#answer", "data-state") == "answered"
        assert page.is_hidden("#key-form")
        assert sent == [None, "Bearer not-the-key", f"Bearer {key}", f"Bearer {key}"]
        # A new tab of its own (another context) starts without it.
        other = page.context.browser.new_context().new_page()
        other.goto(f"{server.base}/")
        assert other.evaluate("sessionStorage.getItem('reactome-answers-api-key')") is None
        other.context.close()
    # The 401s the page met show up as failed loads in the console, and nothing else.
    assert all("401" in problem for problem in page.problems), page.problems


# --- the quote behind each marker ---------------------------------------------------------------

EVIDENCE_QUESTION = "What causes Tangier disease, and what does ABCA1 do?"
NOT_SUPPORTED = "Not supported by this source"
# What the popover shows, or None while it is hidden; "open" counts the popovers showing.
READ_POPOVER = """() => {
  const open = [...document.querySelectorAll('.evidence-popover')].filter((p) => !p.hidden);
  const box = document.getElementById('evidence-popover');
  if (box.hidden) return null;
  const link = box.querySelector('.evidence-source a');
  const note = box.querySelector('.evidence-note');
  return {
    quote: box.querySelector('.evidence-quote').textContent,
    note: note && note.textContent,
    href: link && link.href,
    open: open.length,
  };
}"""


def popover(page: Any) -> dict[str, Any] | None:
    shown: dict[str, Any] | None = page.evaluate(READ_POPOVER)
    return shown


def shows(item: dict[str, Any], references: list[Reference]) -> dict[str, Any]:
    """What the popover must show for the evidence ``item``."""
    return {
        "quote": item["quote"],
        "note": None if item["supported"] else NOT_SUPPORTED,
        "href": href(references[item["n"] - 1]),
        "open": 1,
    }


def backed_markers(done: DoneData) -> list[tuple[str, dict[str, Any]]]:
    """The markers of ``done.text`` that have an evidence item, in reading order."""
    return [(digits, item) for digits, item in owned_evidence(done) if item is not None]


def tab_to_marker(page: Any) -> None:
    """Tab from the question box until a marker of the answer has the focus."""
    page.focus("#question")
    for _ in range(20):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.matches('#answer .cite')"):
            return
    pytest.fail("no marker of the answer is reachable with Tab")


@pytest.mark.parametrize("live", [True, False], ids=["live", "not-live"])
def test_a_marker_shows_its_quote_and_source_on_hover_focus_and_enter(
    page: Any, served: str, live: bool
) -> None:
    events = sse_events(served, {"question": EVIDENCE_QUESTION, "live_citations": live})
    done = check_stream(events).data
    backed = backed_markers(done)
    assert len(backed) >= 2, "the extractive answer cites at least two sentences"
    if not live:
        as_to_a_server_without_live_citations(page)

    assert ask(page, served, EVIDENCE_QUESTION) == "answered"

    assert page.text_content("#answer") == done.text
    markers = page.locator("#answer .cite[data-quote]")
    assert markers.evaluate_all("ms => ms.map(m => m.dataset.quote)") == [
        item["quote"] for _, item in backed
    ]
    assert popover(page) is None
    # Hover: the quote of that marker's own sentence and the link the Sources list has.
    markers.nth(1).hover()
    assert popover(page) == shows(backed[1][1], done.references)
    assert markers.nth(1).get_attribute("aria-describedby") == "evidence-popover"
    page.mouse.move(0, 0)
    page.wait_for_selector("#evidence-popover", state="hidden")  # once the grace time passed
    # Keyboard: the first marker is a Tab stop; focus shows its quote, Escape hides it, Enter
    # shows it again without leaving the page, and the next marker's replaces it.
    tab_to_marker(page)
    assert popover(page) == shows(backed[0][1], done.references)
    page.keyboard.press("Escape")
    assert popover(page) is None
    url = page.url
    page.keyboard.press("Enter")
    assert popover(page) == shows(backed[0][1], done.references)
    assert page.url == url
    assert len(page.context.pages) == 1
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.dataset.quote") == backed[1][1]["quote"]
    assert popover(page) == shows(backed[1][1], done.references)
    assert page.problems == []


@pytest.mark.parametrize("live", [True, False], ids=["live", "not-live"])
def test_a_marker_judged_unsupported_looks_different_and_says_so(
    page: Any, sample_home: Path, live: bool
) -> None:
    question = "What causes Tangier disease?"
    with fake_chat("miscite") as fake:
        env = serving_env(fake)
        with serve_command(sample_home, "--no-log", env=env) as server:
            events = sse_events(server.base, {"question": question, "live_citations": live})
            done = check_stream(events).data
            backed = backed_markers(done)
            unsupported = [(d, item) for d, item in backed if not item["supported"]]
            supported = [(d, item) for d, item in backed if item["supported"]]
            assert unsupported, "the fake model cites a sentence with the wrong source"
            assert supported, "and others with their own"
            if not live:
                as_to_a_server_without_live_citations(page)

            assert ask(page, server.base, question) == "answered"

            assert page.text_content("#answer") == done.text
            flagged = page.locator("#answer .cite.unsupported")
            assert flagged.evaluate_all("ms => ms.map(m => m.dataset.quote)") == [
                item["quote"] for _, item in unsupported
            ]
            # Told apart by more than colour: a wavy underline and a mark after the number.
            styles = page.locator("#answer .cite[data-quote]").evaluate_all(
                "ms => ms.map(m => [m.dataset.supported, getComputedStyle(m).textDecorationStyle,"
                " getComputedStyle(m, '::after').content])"
            )
            assert {tuple(s) for s in styles} == {("true", "dotted", "none"),
                                                  ("false", "wavy", '"?"')}  # fmt: skip
            # A screen reader hears it in the marker's name.
            digits = unsupported[0][0]
            assert flagged.first.get_attribute("aria-label") == (
                f"{digits}: not supported by this source"
            )
            said = page.get_by_role("link", name="not supported by this source")
            assert said.count() == len(unsupported)
            flagged.first.hover()
            assert popover(page) == shows(unsupported[0][1], done.references)
            assert page.is_visible("#evidence-popover .evidence-note")
            good = page.locator("#answer .cite[data-supported=true]").first
            good.hover()
            assert popover(page) == shows(supported[0][1], done.references)

            # Once the answer is an earlier turn of the conversation, its markers still work.
            page.fill("#question", "What does ABCA1 do?")
            page.press("#question", "Enter")
            wait_settled(page, 1)
            page.locator("#conversation .turn .cite.unsupported").first.hover()
            assert popover(page) == shows(unsupported[0][1], done.references)
            assert page.problems == []
