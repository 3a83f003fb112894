"""The log page (app/http/routes/log_page.py, app/web/static/log.*): one answer's log in a real
Chromium, from a real `serve` over the ingested sample, from `logs view`'s file and from `replay
--serve`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.http.routes.log_page import STATIC_DIR, bundle_modules, standalone_page, write_log_page
from callbacks.log import find_request_logs
from callbacks.log_view import read_log_view, shorten
from tests.support.browser import launched
from tests.support.cli import cli
from tests.support.fake_pipeline import ABCA1, CDK5, make_pipeline
from tests.support.servers import Served, serve_command

QUESTION = "What does ABCA1 do?"
# Markup that would run, or fetch, were it ever written into the page as HTML.
HOSTILE = (
    '</script><script>window.__ran = "script"</script>'
    '<img src="x" onerror="window.__ran = \'img\'"> What does ABCA1 do?'
)
KEY = "log-page-key-0123456789"


# --- Without a browser ------------------------------------------------------------------------


def _logged(home: Path, question: str) -> Path:
    pipeline, _, _ = make_pipeline([ABCA1, CDK5], "ABCA1 exports cholesterol [1].", home=home)
    events = list(pipeline.stream(question, request_id="req-page"))
    return find_request_logs(pipeline.settings.logs_dir, events[0].request_id)[-1]


def _embedded_view(html: str) -> Any:
    found = re.search(r'<script type="application/json" id="log-view">(.*?)</script>', html, re.S)
    assert found is not None
    return json.loads(found.group(1))


def test_a_question_cannot_end_the_script_it_is_embedded_in(tmp_path: Path) -> None:
    view = read_log_view(_logged(tmp_path, HOSTILE + "<!-- & -->"))
    html = standalone_page(view)
    # The two scripts the page has, and no third opened or closed by the question.
    assert html.count("</script>") == 2
    assert len(re.findall(r"<script\b", html)) == 2
    assert "<!--" not in html
    assert _embedded_view(html) == view
    assert _embedded_view(html)["question"] == HOSTILE + "<!-- & -->"


def test_logs_view_writes_next_to_the_caller_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _logged(tmp_path / "home", QUESTION)
    monkeypatch.chdir(tmp_path)
    written = write_log_page(log, None)
    assert written == tmp_path / "log-req-page.html"
    assert _embedded_view(written.read_text(encoding="utf-8"))["question"] == QUESTION


def test_the_inlined_script_has_no_module_syntax_left() -> None:
    script = bundle_modules(STATIC_DIR, "log.js")
    assert not re.search(r"^\s*(import|export)\b", script, re.M)
    # Dependencies come before what imports them.
    assert script.index("module_markers_js =") < script.index("module_answer_js =")
    assert script.index("module_answer_js =") < script.index("module_log_js =")


def test_module_syntax_the_inliner_does_not_read_is_refused(tmp_path: Path) -> None:
    (tmp_path / "entry.js").write_text('import thing from "./other.js";\n')
    with pytest.raises(ValueError, match="cannot inline"):
        bundle_modules(tmp_path, "entry.js")
    (tmp_path / "entry.js").write_text("export default 1;\n")
    with pytest.raises(ValueError, match="cannot inline"):
        bundle_modules(tmp_path, "entry.js")


# --- In Chromium -------------------------------------------------------------------------------


def test_without_keys_the_page_lookup_is_rate_limited(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without keys the page looks its id up in the logs folder (404 for an unknown one), so
    # it counts against the rate limit like any other request.
    from app.http.factory import create_app
    from app.http.settings import load_server_settings
    from tests.support.servers import serve

    monkeypatch.setenv("REACTOME_ANSWERS_RATE_LIMIT", "3")
    pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 [1].")
    app = create_app(pipeline.settings, pipeline=pipeline, server=load_server_settings())
    with contextmanager(serve)(app) as base:
        statuses = [httpx.get(f"{base}/logs/unknown-id", timeout=30).status_code for _ in range(5)]
    assert statuses[:3] == [404, 404, 404]
    assert statuses[3:] == [429, 429]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with launched() as chromium:
        yield chromium


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    context.set_default_timeout(90_000)  # a bound for a page that never gets there
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.problems = problems
    yield page
    context.close()


@pytest.fixture(scope="module")
def served(sample_home: Path) -> Iterator[Served]:
    """The real `serve` over the ingested sample (extractive model), writing its logs."""
    with serve_command(sample_home) as server:
        yield server


@pytest.fixture(scope="module")
def keyed(sample_home: Path) -> Iterator[Served]:
    env = {"REACTOME_ANSWERS_API_KEYS": KEY, "REACTOME_ANSWERS_AUTH_FAILURES_PER_MINUTE": "1000"}
    with serve_command(sample_home, env=env) as server:
        yield server


def ask(base: str, question: str, key: str | None = None) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    response = httpx.post(
        f"{base}/v1/answer", json={"question": question}, headers=headers, timeout=120
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def open_log(page: Any, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("#log:not([hidden])")


def check_the_page_shows(page: Any, answer: dict[str, Any], question: str) -> None:
    """The question, the timeline, the answer with markers that jump to their reference, the
    candidates with the cited ones marked, and what the model was sent."""
    assert page.text_content("#question") == question
    assert page.eval_on_selector("#question", "p => p.children.length") == 0
    assert answer["request_id"] in page.text_content("#facts")
    types = page.eval_on_selector_all("#timeline tbody tr", "rows => rows.map(r => r.dataset.type)")
    assert types[0] == "start"
    assert types[-1] == "done"
    assert "citation" in types
    assert "token" in types
    start = page.text_content("#timeline tbody tr[data-type=start] td:last-child")
    assert start == shorten(question)

    references = answer["references"]
    assert references, "the sample answer cites its sources"
    shown = page.eval_on_selector_all(
        "#references li", "items => items.map(li => [li.id, li.querySelector('.name').textContent])"
    )
    assert shown == [[f"ref-{r['n']}", r["display_name"]] for r in references]
    marker = page.locator("#answer a.cite").first
    target = marker.get_attribute("href")
    assert target in {f"#ref-{r['n']}" for r in references}
    marker.click()
    page.wait_for_function("target => location.hash === target", arg=target)
    assert page.evaluate("document.querySelector(':target').id") == target[1:]
    assert page.locator(target).is_visible()

    cited = page.eval_on_selector_all(
        "#candidates tr.cited", "rows => rows.map(r => [r.dataset.outcome, r.cells[2].textContent])"
    )
    assert sorted(cited) == sorted(["kept", f"[{r['n']}]"] for r in references)

    roles = page.eval_on_selector_all("#model-input details", "ds => ds.map(d => d.dataset.role)")
    assert roles[0] == "system"
    assert "user" in roles
    page.click("#model-input details[data-role=user] summary")
    assert question in page.text_content("#model-input details[data-role=user] pre")
    assert "total_ms" in page.text_content("#timings")
    assert page.text_content("#feedback") == "No feedback."
    assert page.evaluate("window.__ran") is None  # no markup from the log ever ran
    assert page.problems == []


@pytest.mark.slow
def test_the_page_of_an_answer_served(page: Any, served: Served) -> None:
    answer = ask(served.base, QUESTION)
    open_log(page, f"{served.base}/logs/{answer['request_id']}")
    check_the_page_shows(page, answer, QUESTION)


@pytest.mark.slow
def test_markup_in_a_question_is_shown_as_text(page: Any, served: Served) -> None:
    answer = ask(served.base, HOSTILE)
    open_log(page, f"{served.base}/logs/{answer['request_id']}")
    check_the_page_shows(page, answer, HOSTILE)
    assert page.locator("img").count() == 0


@pytest.mark.slow
def test_feedback_is_shown(page: Any, served: Served) -> None:
    answer = ask(served.base, QUESTION)
    rid = answer["request_id"]
    feedback = {"rating": "down", "comment": "<b>cites the variant</b>, not the pathway"}
    rated = httpx.post(f"{served.base}/v1/answers/{rid}/feedback", json=feedback, timeout=30)
    assert rated.status_code == 201, rated.text
    open_log(page, f"{served.base}/logs/{rid}")
    assert page.get_attribute("#feedback", "data-rating") == "down"
    assert "<b>cites the variant</b>, not the pathway" in page.text_content("#feedback")


@pytest.mark.slow
def test_an_unknown_request_is_404(served: Served) -> None:
    for path in ("/v1/logs/0123456789abcdef", "/v1/logs/*"):
        response = httpx.get(f"{served.base}{path}", timeout=30)
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] == "not_found"
    # The page is 404 too, and still the page: it tells a reader, in words, what is wrong.
    page = httpx.get(f"{served.base}/logs/0123456789abcdef", timeout=30)
    assert page.status_code == 404
    assert page.headers["content-type"].startswith("text/html")


@pytest.mark.slow
def test_with_keys_the_log_is_shown_only_with_a_key(page: Any, keyed: Served) -> None:
    answer = ask(keyed.base, QUESTION, key=KEY)
    rid = answer["request_id"]
    for headers in ({}, {"Authorization": "Bearer wrong-key"}):
        refused = httpx.get(f"{keyed.base}/v1/logs/{rid}", headers=headers, timeout=30)
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "unauthorized"
        assert QUESTION not in refused.text
    # The page itself is open, and holds nothing of the log.
    shell = httpx.get(f"{keyed.base}/logs/{rid}", timeout=30)
    assert shell.status_code == 200
    assert QUESTION not in shell.text
    assert "script-src 'self'" in shell.headers["content-security-policy"]
    with_key = httpx.get(
        f"{keyed.base}/v1/logs/{rid}", headers={"Authorization": f"Bearer {KEY}"}, timeout=30
    )
    assert with_key.json()["question"] == QUESTION
    assert with_key.headers["cache-control"] == "no-store"
    unknown = httpx.get(
        f"{keyed.base}/v1/logs/nope", headers={"Authorization": f"Bearer {KEY}"}, timeout=30
    )
    assert unknown.status_code == 404

    # In the browser: asked for the key, then shown; the tab keeps it for the next log.
    page.goto(f"{keyed.base}/logs/{rid}")
    page.wait_for_selector("#key-form:not([hidden])")
    assert "needs an API key" in page.text_content("#error")
    assert page.is_hidden("#log")
    page.fill("#api-key", KEY)
    page.click("#key-form button")
    page.wait_for_selector("#log:not([hidden])")
    assert page.text_content("#question") == QUESTION
    page.reload()
    page.wait_for_selector("#log:not([hidden])")
    assert page.is_hidden("#key-form")


@pytest.mark.slow
def test_logs_view_writes_a_page_that_opens_from_a_file(
    page: Any, served: Served, sample_home: Path, tmp_path: Path
) -> None:
    answer = ask(served.base, HOSTILE)
    output = tmp_path / "page.html"
    done = cli(sample_home, "logs", "view", answer["request_id"], "--output", str(output))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(output.resolve())
    open_log(page, output.as_uri())
    check_the_page_shows(page, answer, HOSTILE)


@pytest.mark.slow
def test_logs_view_of_an_unknown_request_is_one_line(sample_home: Path, tmp_path: Path) -> None:
    done = cli(sample_home, "logs", "view", "no-such-request", "--output", str(tmp_path / "x"))
    assert done.returncode == 1
    assert "no-such-request" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_replay_serve_serves_the_page(page: Any, served: Served, sample_home: Path) -> None:
    answer = ask(served.base, QUESTION)
    rid = answer["request_id"]
    command = ("replay", rid, "--instant", "--serve")
    with serve_command(sample_home, command=command) as replay:
        open_log(page, f"{replay.base}/logs/{rid}")
        check_the_page_shows(page, answer, QUESTION)
        assert httpx.get(f"{replay.base}/logs/other", timeout=30).status_code == 404
        assert httpx.get(f"{replay.base}/v1/logs/{rid}", timeout=30).json()["request_id"] == rid
    assert f"/logs/{rid}" in replay.stderr
