// The reference client for POST /v1/answer/stream: the page, which wires the form, the API
// key, the conversation and the stream to the answer view. Loaded as an ES module by
// app/web/index.html; no build step.
//
// The modules, one job each:
// - markers.js: the [n] markers of a text, read as the server's finalizer reads them;
// - answer.js: one answer's state from its events, and its text and Sources drawn;
// - evidence.js: which item of done's evidence backs each marker;
// - popover.js: the quote behind a marker, shown when the marker is hovered, focused or
//   activated;
// - sse.js: the events of a Server-Sent Events body;
// - limits.js: the server's request limits and the history that keeps to them;
// - feedback.js: thumbs up or down, and a comment, under a finished answer.

import { AnswerState, drawer, logPath } from "./answer.js";
import { errorMessage } from "./errors.js";
import { feedbackControls } from "./feedback.js";
import { fetchLimits, history } from "./limits.js";
import { closeEvidence, installEvidencePopover } from "./popover.js";
import { readEvents } from "./sse.js";

const page = {};
let current = null; // the AbortController of the request in flight
// The conversation so far, as the server takes it as history: each answered question and its
// final text, sent within the server's limits.
const conversation = [];
let limits = null; // the promise of the server's limits, asked for once when the page opens
let turnOnPage = false; // a finished answer is showing, to keep above the next one

function showError(message) {
  page.error.textContent = message;
  page.error.hidden = false;
}

function setStatus(message) {
  page.status.textContent = message;
}

function reset() {
  closeEvidence();
  page.answer.replaceChildren();
  page.error.hidden = true;
  page.error.textContent = "";
  page.sources.replaceChildren();
  page.sourcesSection.hidden = true;
  page.retrieved.replaceChildren();
  page.retrievedSection.hidden = true;
  page.retrievedSection.open = false;
  page.feedback.replaceChildren();
  page.answer.dataset.state = "streaming";
  page.answer.setAttribute("aria-busy", "true");
  page.answer.removeAttribute("lang");
  page.asked.removeAttribute("lang");
}

// The asker's language as the server read it (the start event's options), then as the answer
// is in (done): screen readers and fonts follow the element's lang.
function setLanguage(language) {
  if (typeof language !== "string" || !language) return;
  page.asked.lang = language;
  page.answer.lang = language;
}

function settle(state, status) {
  page.answer.dataset.state = state;
  page.answer.removeAttribute("aria-busy");
  setStatus(status);
}

function keepTurn() {
  // The finished answer on the page becomes an earlier turn: a copy of its question, text and
  // Sources (without ids, so the page's own elements stay the current answer's).
  closeEvidence(); // the copy keeps no open state
  const turn = document.createElement("section");
  turn.className = "turn";
  for (const element of [page.asked, page.answer, page.sourcesSection]) {
    if (element.hidden) continue;
    const copy = element.cloneNode(true);
    copy.removeAttribute("id");
    for (const inner of copy.querySelectorAll("[id]")) inner.removeAttribute("id");
    turn.append(copy);
  }
  // The rating controls move with their answer, still working: an earlier answer can be rated.
  turn.append(...page.feedback.childNodes);
  page.conversation.append(turn);
}

function newConversation() {
  if (current) current.abort();
  conversation.length = 0;
  turnOnPage = false;
  page.conversation.replaceChildren();
  reset();
  page.answer.removeAttribute("data-state");
  page.answer.removeAttribute("aria-busy");
  page.asked.textContent = "";
  page.asked.hidden = true;
  page.newConversation.hidden = true;
  setStatus("");
  page.question.focus();
}

// A server with API keys answers 401 until the page sends one: the page asks for it once and
// keeps it for the tab (sessionStorage), never longer.
const KEY_ITEM = "reactome-answers-api-key";
let waitingForKey = null; // the question to ask again once a key is given

function apiKey() {
  try {
    return sessionStorage.getItem(KEY_ITEM);
  } catch (_) {
    return null; // storage switched off: the key is asked for again
  }
}

function askForKey(question, citeUrls, message) {
  try {
    sessionStorage.removeItem(KEY_ITEM);
  } catch (_) {
    // Nothing kept.
  }
  waitingForKey = { question, citeUrls };
  showError(message);
  page.keyForm.hidden = false;
  page.apiKey.value = "";
  page.apiKey.focus();
}

function useKey(key) {
  try {
    sessionStorage.setItem(KEY_ITEM, key);
  } catch (_) {
    // Kept for this question only.
  }
  page.keyForm.hidden = true;
  const pending = waitingForKey;
  waitingForKey = null;
  if (pending) ask(pending.question, pending.citeUrls, key);
}

async function ask(question, citeUrls, keyOnce = null) {
  // Asking again abandons the answer in flight (the server then stops its model). An answer
  // whose done has come is kept even if its stream has not closed yet.
  if (current) current.abort();
  if (turnOnPage) keepTurn();
  turnOnPage = false;
  const controller = new AbortController();
  current = controller;
  reset();
  page.asked.textContent = question;
  page.asked.hidden = false;
  page.newConversation.hidden = false;
  setStatus("Searching Reactome\u2026");

  const answer = new AnswerState();
  const drawNow = drawer(page);
  const draw = () => {
    if (current === controller) drawNow(answer);
  };
  let pending = false;
  const drawSoon = () => {
    // Tokens arrive faster than frames: draw at most once per frame. A reference is drawn
    // with the token that follows it, which cites it.
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      draw();
    });
  };

  try {
    // A server without live citations ignores the field; start then says it is off.
    const body = { question, live_citations: true };
    if (citeUrls) body.cite_urls = true;
    // None unless the reader chose one: the server detects the question's own.
    if (page.language.value) body.language = page.language.value;
    if (conversation.length) body.history = history(conversation, await limits);
    const headers = { "Content-Type": "application/json", Accept: "text/event-stream" };
    const key = keyOnce || apiKey();
    if (key) headers.Authorization = `Bearer ${key}`;
    const response = await fetch("/v1/answer/stream", {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    if (response.status === 401) {
      askForKey(question, citeUrls, await errorMessage(response));
      settle("failed", "");
      return;
    }
    if (!response.ok) {
      showError(await errorMessage(response));
      settle("failed", "");
      return;
    }
    let requestId = null; // from the start event: what a rating of this answer names
    for await (const event of readEvents(response.body)) {
      answer.apply(event);
      if (event.type === "start") {
        requestId = event.request_id;
        setLanguage(event.data.options?.language);
      } else if (event.type === "citation") {
        draw();
        const count = answer.retrieved.length;
        setStatus(`Found ${count} source${count === 1 ? "" : "s"}; writing\u2026`);
      } else if (event.type === "token" || event.type === "reference") {
        drawSoon();
      } else if (event.type === "error") {
        showError(event.data.message);
      } else if (event.type === "done") {
        // Known before the answer settles, so its controls appear in the same moment.
        const offers = (await limits) || { feedback: true, logs: false };
        setLanguage(event.data.language);
        finish(answer, draw);
        if (current === controller) {
          turnOnPage = true;
          if (requestId && offers.feedback && !answer.failedWithoutText) {
            page.feedback.append(feedbackControls(requestId, apiKey));
          }
          // A failed answer has a log too, and it says what went wrong.
          if (requestId && offers.logs) page.feedback.append(logLink(requestId));
          if (answer.done.state === "answered") {
            conversation.push(
              { role: "user", content: question },
              { role: "assistant", content: answer.done.text },
            );
          }
        }
      }
    }
    if (answer.done === null) {
      showError("The answer stopped before it was complete; please ask again.");
      settle("failed", "");
    }
  } catch (error) {
    // An abort means another question replaced this one; a failure after done changes nothing.
    if (error.name === "AbortError" || answer.done !== null) return;
    showError(`Could not get an answer: ${error.message}`);
    settle("failed", "");
  } finally {
    if (current === controller) current = null;
  }
}

function logLink(requestId) {
  const line = document.createElement("p");
  line.className = "answer-log";
  const link = document.createElement("a");
  link.href = logPath(requestId);
  link.textContent = "How this answer was made (its log)";
  // A tab of its own, so the conversation stays; with the opener, the new tab starts with a
  // copy of this one's session storage, so a key given here opens the log without asking.
  link.target = "_blank";
  link.rel = "opener";
  line.append(link);
  return line;
}

const DONE_NOTES = {
  answered: "",
  nothing_found: "Nothing in the collections matched this question.",
  refused: "This question is outside what Reactome can answer.",
  failed: "The answer could not be completed.",
};

function finish(answer, draw) {
  // Live, the text and its Sources are already final: this draws what the last frame had
  // not yet. Otherwise the early list was everything retrieved, and the final text, with
  // its markers renumbered, and the sources it cites are swapped in together.
  draw();
  settle(answer.done.state, DONE_NOTES[answer.done.state] ?? "");
}

function start() {
  limits = fetchLimits();
  installEvidencePopover();
  for (const id of ["answer", "error", "status", "sources", "retrieved", "question", "asked",
                    "conversation", "feedback"]) {
    page[id] = document.getElementById(id);
  }
  page.newConversation = document.getElementById("new-conversation");
  page.newConversation.addEventListener("click", newConversation);
  const form = document.getElementById("ask");
  page.question.addEventListener("keydown", (event) => {
    // Enter asks; Shift+Enter is a new line (and so is Enter while an input method composes).
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  page.sourcesSection = document.getElementById("sources-section");
  page.retrievedSection = document.getElementById("retrieved-section");
  page.retrievedSummary = document.getElementById("retrieved-summary");
  page.citeUrls = document.getElementById("cite-urls");
  page.language = document.getElementById("language");
  page.keyForm = document.getElementById("key-form");
  page.apiKey = document.getElementById("api-key");
  page.keyForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const key = page.apiKey.value.trim();
    if (key) useKey(key);
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const question = page.question.value.trim();
    if (!question) {
      showError("Type a question first.");
      return;
    }
    page.question.value = "";
    ask(question, page.citeUrls.checked);
  });
}

// A module runs once the document is parsed, before DOMContentLoaded: the page is all there.
start();
