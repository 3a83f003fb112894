"""What the web client offers under an answer, and the log page it leads to, in a real
headless Chromium against a real `serve` whose model is an OpenAI-compatible fake (so that
answers cite wrongly, or fail, on demand): thumbs that need no emoji font, a link to the
answer's log when the server keeps logs, no Sources and nothing to rate for an answer that
failed before any text, nothing of a Sources list the model wrote itself, and a log page
that shows each citation's evidence, links to the answer's trace when the server traces
(the collector a real OTLP receiver on 127.0.0.1), and says so when an answer is not in the
logs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.http.factory import create_app
from app.http.settings import load_server_settings
from callbacks.events import DoneData, DoneEvent
from callbacks.log import find_request_logs, read_log
from pipelines.core.settings import load_settings
from tests.support.browser import launched
from tests.support.collector import collector
from tests.support.fake_openai import FORGED_SITE, FakeChat, fake_chat, serving_env
from tests.support.fake_pipeline import ABCA1, make_pipeline
from tests.support.marker_evidence import owned_evidence
from tests.support.servers import serve, serve_command
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow  # Chromium driven by Playwright, over real servers

KEY = "answer-controls-key-5b1e"
QUESTION = "What causes Tangier disease?"
NOT_SUPPORTED = "not supported by this source"
UNKNOWN_ID = "0123456789abcdef0123456789abcdef"
# Characters only an emoji font draws: past the Basic Multilingual Plane, the symbol and
# dingbat blocks, and the emoji presentation selector.
NEEDS_AN_EMOJI_FONT = r"/[\u{10000}-\u{10FFFF}\u2600-\u27BF\uFE0F]/u"
SETTLED = "#answer[data-state]:not([data-state=streaming])"


@dataclass
class Server:
    base: str
    fake: FakeChat
    logs: Path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with launched() as chromium:
        yield chromium


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1100, "height": 1000})
    context.set_default_timeout(90_000)  # a bound for a page that never gets there
    yield context
    context.close()


def watched(page: Any) -> list[str]:
    """The page's script errors and console errors, filled in as they happen."""
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    return problems


@pytest.fixture(scope="module")
def keyed(sample_home: Path) -> Iterator[Server]:
    """`serve` with an API key and its logs on, answering through the fake model; a test sets
    the fake's behaviour for its own answers."""
    with fake_chat("miscite") as fake:
        env = serving_env(fake) | {"REACTOME_ANSWERS_API_KEYS": KEY}
        with serve_command(sample_home, env=env) as served:
            yield Server(served.base, fake, load_settings(home=sample_home).logs_dir)


def with_the_key(context: Any) -> None:
    """Every page of ``context`` starts with the key the web client keeps for its tab."""
    context.add_init_script(f"sessionStorage.setItem('reactome-answers-api-key', {KEY!r})")


def logged_done(logs: Path, request_id: str) -> DoneData:
    """The done event of the answer's log, read from the folder, not through the server."""
    (path,) = find_request_logs(logs, request_id)
    done = [event for event in read_log(path).events if isinstance(event, DoneEvent)]
    return done[-1].data


def ask(page: Any, question: str) -> str:
    page.fill("#question", question)
    page.press("#question", "Enter")
    page.wait_for_selector(SETTLED, state="attached")
    state: str = page.get_attribute("#answer", "data-state")
    return state


def open_the_log(page: Any) -> Any:
    """Follow the answer's log link; the log page, once it has drawn the log."""
    with page.context.expect_page() as opened:
        page.click("#feedback .answer-log a")
    log = opened.value
    log.problems = watched(log)
    log.wait_for_selector("#log:not([hidden])")
    return log


def test_an_answer_links_to_its_log_which_shows_the_evidence_of_each_citation(
    context: Any, keyed: Server
) -> None:
    keyed.fake.behaviour = "miscite"  # some sentences cite the wrong source
    page = context.new_page()
    problems = watched(page)
    with page.expect_response(lambda r: r.url.endswith("/v1/limits")) as limits:
        page.goto(f"{keyed.base}/")
    assert limits.value.json()["logs"] is True
    # The key, as a person gives it: asked for at the first question, kept for the tab.
    page.fill("#question", QUESTION)
    page.press("#question", "Enter")
    page.wait_for_selector("#key-form", state="visible")
    page.fill("#api-key", KEY)
    page.press("#api-key", "Enter")
    page.wait_for_selector(SETTLED, state="attached")
    assert page.get_attribute("#answer", "data-state") == "answered"

    # The thumbs are drawn, and named for a screen reader; no character needs an emoji font.
    for rating, name in (("up", "Good answer"), ("down", "Bad answer")):
        button = page.get_by_role("button", name=name, exact=True)
        assert button.get_attribute("data-rating") == rating
        assert button.get_attribute("title") == name
        assert button.evaluate(f"b => {NEEDS_AN_EMOJI_FONT}.test(b.textContent)") is False
        drawn = button.locator("svg path").bounding_box()
        assert drawn is not None
        assert drawn["width"] >= 12
        assert drawn["height"] >= 12

    request_id = page.get_attribute("#feedback .feedback", "data-request-id")
    assert request_id
    link = page.locator("#feedback .answer-log a")
    assert link.get_attribute("href") == f"/logs/{request_id}"

    log = open_the_log(page)
    # The new tab had the key: the log page never asked for it.
    assert log.is_hidden("#key-form")
    assert log.url == f"{keyed.base}/logs/{request_id}"
    assert len(page.context.pages) == 2  # the conversation stays in its own tab

    done = logged_done(keyed.logs, request_id)
    assert {item.supported for item in done.evidence} == {True, False}
    rows = log.eval_on_selector_all(
        "#evidence tbody tr",
        "rows => rows.map(r => [r.dataset.supported, ...[...r.cells].map(c => c.textContent)])",
    )
    assert [[row[0], row[1], row[2], row[3], row[5]] for row in rows] == [
        [
            json.dumps(item.supported),
            f"[{item.n}]",
            done.text[item.sentence[0] : item.sentence[1]],
            item.quote,
            "supported" if item.supported else NOT_SUPPORTED,
        ]
        for item in done.evidence
    ]
    assert all(float(row[4]) == pytest.approx(item.score, abs=1e-4)
               for row, item in zip(rows, done.evidence, strict=True))  # fmt: skip
    # In the answer, each marker the judge doubted says so: in its name, and by a mark
    # after its number as well as its colour.
    backed = [(digits, item) for digits, item in owned_evidence(done) if item is not None]
    doubted = [digits for digits, item in backed if not item["supported"]]
    assert doubted
    flagged = log.locator("#answer a.cite.unsupported")
    assert flagged.evaluate_all("ms => ms.map(m => m.getAttribute('aria-label'))") == [
        f"{digits}: {NOT_SUPPORTED}" for digits in doubted
    ]
    marks = log.locator("#answer a.cite").evaluate_all(
        "ms => ms.map(m => getComputedStyle(m, '::after').content)"
    )
    assert marks.count('"?"') == len(doubted)
    assert log.text_content("#answer") == done.text  # the mark is drawn, not written
    # The one 401 is the first question's, asked before the key: a failed load to the console.
    assert len(problems) == 1
    assert "401" in problems[0]
    assert log.problems == []


@pytest.mark.parametrize("live", [True, False], ids=["live", "not-live"])
def test_an_answer_that_failed_before_any_text_has_no_sources_and_nothing_to_rate(
    context: Any, keyed: Server, live: bool
) -> None:
    keyed.fake.behaviour = "fail_before"  # the model answers 500 to every answer
    with_the_key(context)
    page = context.new_page()
    problems = watched(page)
    if not live:
        # As a server without live citations: the retrieved list is the Sources until done.
        def strip(route: Any) -> None:
            body = json.loads(route.request.post_data)
            body.pop("live_citations", None)
            route.continue_(post_data=json.dumps(body))

        page.route("**/v1/answer/stream", strip)
    page.goto(f"{keyed.base}/")

    assert ask(page, QUESTION) == "failed"

    assert page.inner_text("#error").strip()
    assert "sk-test" not in page.inner_text("#error")  # the upstream's words stay upstream
    assert page.inner_text("#answer") == ""
    assert page.is_hidden("#sources-section")
    assert page.locator("#sources li").count() == 0
    assert page.locator("#feedback .feedback, #feedback button").count() == 0
    assert page.locator("#retrieved li").count() > 0  # it searched; the model failed after
    # Its log is there, and says what went wrong.
    href = page.get_attribute("#feedback .answer-log a", "href")
    assert href is not None
    request_id = href.removeprefix("/logs/")
    assert logged_done(keyed.logs, request_id).state == "failed"
    log = open_the_log(page)
    assert log.get_attribute("#log", "data-state") == "failed"
    assert log.is_visible("#answer-error")
    assert log.is_visible("#no-references")
    assert log.locator("#evidence").is_hidden()
    assert problems == []
    assert log.problems == []


def test_an_answer_not_in_the_logs_gets_a_page_that_says_so(context: Any, keyed: Server) -> None:
    with_the_key(context)
    page = context.new_page()
    problems = watched(page)
    page.goto(f"{keyed.base}/logs/{UNKNOWN_ID}")
    page.wait_for_selector("#not-found:not([hidden])")
    assert page.text_content("#not-found h2") == "This answer is not in the logs"
    assert UNKNOWN_ID in page.text_content("#not-found-text")
    assert page.is_hidden("#log")
    assert page.is_hidden("#error")
    assert page.is_hidden("#key-form")
    assert page.title() == "Not in the logs"
    # The one 404 is the look-up's, which the console reports as a failed load.
    assert len(problems) == 1
    assert "404" in problems[0]


def test_without_keys_an_answer_not_in_the_logs_gets_the_page_too(context: Any) -> None:
    pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 [1].")
    app = create_app(pipeline.settings, pipeline=pipeline, server=load_server_settings())
    with contextmanager(serve)(app) as base:
        page = context.new_page()
        response = page.goto(f"{base}/logs/{UNKNOWN_ID}")
        assert response.status == 404
        assert response.headers["content-type"].startswith("text/html")
        page.wait_for_selector("#not-found:not([hidden])")
        assert UNKNOWN_ID in page.text_content("#not-found-text")


def test_a_sources_list_the_model_wrote_itself_is_not_shown(context: Any, keyed: Server) -> None:
    # The model ends its answer with a list of its own, linking to a forged site: the reader
    # sees the answer and our Sources list, and nothing of the model's (issue 37, item 1).
    keyed.fake.behaviour = "own_sources"
    with_the_key(context)
    page = context.new_page()
    problems = watched(page)
    page.goto(f"{keyed.base}/")
    assert ask(page, QUESTION) == "answered"
    shown = page.inner_text("body")
    assert "definitive pathway" not in shown
    assert FORGED_SITE not in page.content()
    links = page.eval_on_selector_all("#answer a, #sources a", "as => as.map(a => a.href)")
    assert links, "the answer's markers and our Sources list link to Reactome"
    assert all(link.startswith("https://reactome.org/") for link in links), links
    assert page.locator("#sources li").count() >= 1
    assert not problems


TRACE_URL = "http://phoenix.example:6006/redirects/traces/{trace_id}"


def test_a_traced_answers_log_page_links_to_the_trace_the_collector_got(
    context: Any, sample_home: Path
) -> None:
    """With a collector and REACTOME_ANSWERS_TRACE_URL set, the log page names the answer's
    trace and links to it in the operator's backend; the collector holds that trace."""
    with collector() as received, fake_chat("ok") as fake:
        env = serving_env(fake) | {
            "OTEL_EXPORTER_OTLP_ENDPOINT": received.url,
            "OTEL_BSP_SCHEDULE_DELAY": "200",
            "REACTOME_ANSWERS_TRACE_URL": TRACE_URL,
        }
        with serve_command(sample_home, env=env) as served:
            page = context.new_page()
            problems = watched(page)
            page.goto(f"{served.base}/")
            assert ask(page, QUESTION) == "answered"
            request_id = page.get_attribute("#feedback .feedback", "data-request-id")
            assert request_id
            log = open_the_log(page)
            trace_id = logged_done(load_settings(home=sample_home).logs_dir, request_id).trace_id
            assert trace_id is not None
            link = log.locator("#facts a")
            assert link.text_content() == trace_id
            assert link.get_attribute("href") == TRACE_URL.format(trace_id=trace_id)
            assert log.locator("#facts dt", has_text="trace").count() == 1
            root = (trace_id, "")  # no parent: the request carried no traceparent
            wait_until(
                lambda: [s for s in received.spans if (s.trace_id, s.parent_span_id) == root],
                what="the answer's root span at the collector",
            )
            assert problems == []
            assert log.problems == []
