// The reference client for POST /v1/answer/stream.
//
// Everything from the server is written into the page as text nodes: a source or a token
// that contains markup shows as characters, it never becomes part of the page.
"use strict";

const SITE = "https://reactome.org";

// --- Markers, read exactly as pipelines/citations/finalize.py reads them ------------------------------
// A bracket group of numbers and ascending ranges ([3], [1, 3], [1; 3], [1-3]; spaces only)
// that is not a link, not a reference definition and not inside code. The server renumbers
// exactly these, so the client must link exactly these: tests/test_web_client_logic.py runs
// both implementations on the same texts.

const DASHES = "-\u2013\u2014\u2212";
const ITEM = `[0-9]+(?: *[${DASHES}] *[0-9]+)?`;
const GROUP_RE = new RegExp(`\\[ *(${ITEM}(?: *[,;] *${ITEM})*) *\\]`, "g");
const ITEM_RE = new RegExp(`([0-9]+)(?: *[${DASHES}] *([0-9]+))?`, "g");
const FENCE_RE = /^ {0,3}(`{3,}|~{3,})([^\n]*)$/;
// What Python's str.strip() removes (JavaScript's trim() differs in a few characters).
const PY_SPACE = "\\t\\n\\x0b\\x0c\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const ONLY_SPACE_RE = new RegExp(`^[${PY_SPACE}]*$`);

function isBlank(text) {
  return ONLY_SPACE_RE.test(text);
}

function escaped(text, position) {
  let backslashes = 0;
  while (position - backslashes - 1 >= 0 && text[position - backslashes - 1] === "\\") {
    backslashes += 1;
  }
  return backslashes % 2 === 1;
}

function inlineCodeSpans(text, start, end) {
  const runs = [];
  const backticks = /`+/g;
  backticks.lastIndex = start;
  for (let match = backticks.exec(text); match; match = backticks.exec(text)) {
    if (match.index >= end) break;
    runs.push([match.index, Math.min(match.index + match[0].length, end)]);
  }
  const spans = [];
  let index = 0;
  while (index < runs.length) {
    let [runStart] = runs[index];
    const runEnd = runs[index][1];
    // `\`` is a literal backtick; the rest of the run may still open a span.
    if (escaped(text, runStart)) runStart += 1;
    const length = runEnd - runStart;
    // A span closes at the next backtick run of exactly the opening length.
    let closer = -1;
    for (let later = index + 1; length && later < runs.length; later += 1) {
      if (runs[later][1] - runs[later][0] === length) {
        closer = later;
        break;
      }
    }
    if (closer >= 0) {
      spans.push([runStart, runs[closer][1]]);
      index = closer + 1;
    } else {
      index += 1;
    }
  }
  return spans;
}

function codeSpans(text) {
  // [start, end) of fenced code blocks and inline code spans; inline code never crosses a
  // blank line, and an unclosed fence runs to the end.
  const spans = [];
  let paragraphStart = 0;
  let fence = null; // {char, length, start}
  let lineStart = 0;
  while (lineStart < text.length) {
    const newline = text.indexOf("\n", lineStart);
    const lineEnd = newline < 0 ? text.length : newline + 1;
    const content = text.slice(lineStart, newline < 0 ? text.length : newline);
    const opener = FENCE_RE.exec(content);
    if (fence === null) {
      if (isBlank(content)) {
        spans.push(...inlineCodeSpans(text, paragraphStart, lineStart));
        paragraphStart = lineEnd;
      } else if (opener && !(opener[1][0] === "`" && opener[2].includes("`"))) {
        spans.push(...inlineCodeSpans(text, paragraphStart, lineStart));
        fence = { char: opener[1][0], length: opener[1].length, start: lineStart };
      }
    } else if (
      opener &&
      opener[1][0] === fence.char &&
      opener[1].length >= fence.length &&
      isBlank(opener[2])
    ) {
      spans.push([fence.start, lineEnd]);
      fence = null;
      paragraphStart = lineEnd;
    }
    lineStart = lineEnd;
  }
  if (fence !== null) spans.push([fence.start, text.length]);
  else spans.push(...inlineCodeSpans(text, paragraphStart, text.length));
  return spans.sort((a, b) => a[0] - b[0]);
}

// Numbers longer than 15 digits all count as one huge number, as on the server.
const MAX_DIGITS = 15;
const HUGE = 10 ** MAX_DIGITS;

function toNumber(digits) {
  const significant = digits.replace(/^0+/, "") || "0";
  return significant.length > MAX_DIGITS ? HUGE : Number(significant);
}

function parseItems(body) {
  // Each item as [low, high]; null for a descending range, which is not a marker.
  const items = [];
  for (const match of body.matchAll(ITEM_RE)) {
    const low = toNumber(match[1]);
    const high = match[2] === undefined ? low : toNumber(match[2]);
    if (high < low) return null;
    items.push([low, high]);
  }
  return items;
}

function isReferenceDefinition(text, start, end) {
  if (text[end] !== ":") return false;
  // A lone carriage return ends a line too, as on the server.
  const lineStart =
    Math.max(text.lastIndexOf("\n", start - 1), text.lastIndexOf("\r", start - 1)) + 1;
  return start - lineStart <= 3 && /^ *$/.test(text.slice(lineStart, start));
}

function findMarkers(text) {
  // {code: [[start, end)...], groups: [{start, end, numbers: [[start, end)...]}...]}
  const code = codeSpans(text);
  const inCode = (position) => code.some(([start, end]) => start <= position && position < end);
  const groups = [];
  for (const match of text.matchAll(GROUP_RE)) {
    const start = match.index;
    const end = start + match[0].length;
    const link =
      text[end] === "(" || (start > 0 && text[start - 1] === "[" && text.startsWith("](", end));
    if (link || isReferenceDefinition(text, start, end) || inCode(start)) continue;
    if (parseItems(match[1]) === null) continue;
    const numbers = [];
    const digits = /[0-9]+/g;
    for (const number of match[0].matchAll(digits)) {
      numbers.push([start + number.index, start + number.index + number[0].length]);
    }
    groups.push({ start, end, numbers });
  }
  return { code, groups: withoutDefinitionClusters(text, groups) };
}

function withoutDefinitionClusters(text, groups) {
  // Groups with nothing between them form a cluster; a whole cluster where a reference
  // definition would start ("[2][2]: x") is not a marker, as on the server.
  const kept = [];
  let run = [];
  const flush = () => {
    if (run.length && !isReferenceDefinition(text, run[0].start, run[run.length - 1].end)) {
      kept.push(...run);
    }
    run = [];
  };
  for (const group of groups) {
    if (run.length && run[run.length - 1].end !== group.start) flush();
    run.push(group);
  }
  flush();
  return kept;
}

// --- One answer, from its events -------------------------------------------------------------
// What the page shows of one answer, kept apart from the page itself so that
// tests/test_web_client_logic.py can feed it the events of real streams in Node.
//
// Two modes, told apart by start.data.options.live_citations:
// - live: the tokens carry their final markers, and a reference event comes right before the
//   token that first cites each source. The text is the tokens and done never replaces it;
//   the Sources list grows one reference at a time.
// - not live (a server without the option ignores the field): the tokens carry the model's
//   markers, numbered as the retrieved list, so that list is the Sources while the answer
//   streams; done swaps in the final text and the sources it cites, together.
// Either way the retrieved list (every citation event) is kept as what was searched.

// The states whose done text is the text streamed; any other (a refusal, nothing found) is a
// message the server writes in done itself.
const STREAMED_STATES = new Set(["answered", "failed"]);

class AnswerState {
  constructor() {
    this.live = false;
    this.retrieved = []; // every citation, in retrieval order
    this.references = []; // live: the reference events so far, in final order
    this.tokens = "";
    this.done = null; // done's data, once it came
  }

  apply(event) {
    const data = event.data || {};
    if (event.type === "start") {
      this.live = Boolean(data.options && data.options.live_citations === true);
    } else if (event.type === "citation") {
      this.retrieved.push(data);
    } else if (event.type === "reference") {
      if (this.live) this.references.push(data);
    } else if (event.type === "token") {
      this.tokens += data.text;
    } else if (event.type === "done") {
      this.done = data;
    }
  }

  // The answer's text as the page shows it.
  get text() {
    if (this.done === null) return this.tokens;
    if (this.live && STREAMED_STATES.has(this.done.state)) return this.tokens;
    return this.done.text ?? "";
  }

  // The answer's Sources list; its numbers are the ones the text's markers use.
  get sources() {
    if (this.done !== null) {
      // An answer that cites nothing had no reference events: like any answer, it lists
      // what done lists (the untouched retrieved list, or nothing).
      if (this.live && this.references.length) return this.references;
      return this.done.references ?? [];
    }
    return this.live ? this.references : this.retrieved;
  }
}

// --- Rendering --------------------------------------------------------------------------------

const page = {};
let current = null; // the AbortController of the request in flight
// The conversation so far, as the server takes it as history: each answered question and its
// final text. The server keeps the last 50 turns of at most 20,000 characters each.
const conversation = [];
const MAX_TURNS = 50;
const MAX_TURN_CHARS = 20000;
let turnOnPage = false; // a finished answer is showing, to keep above the next one

function sourceHref(source) {
  if (source.st_id) return `${SITE}/content/detail/${encodeURIComponent(source.st_id)}`;
  const url = source.url || "";
  if (/^https?:\/\//i.test(url)) return url;
  if (url.startsWith("/")) return SITE + url;
  return null;
}

function sourceLabel(source) {
  return source.st_id || source.url;
}

function textPieces(text, sources) {
  // The text cut into plain text ({text}), code ({code}) and the numbers of its markers
  // ({cite: digits, source}: the source with that number, or null); joined, the pieces are
  // the text. Brackets, commas, dashes and spaces of a marker stay plain text.
  const byNumber = new Map(sources.map((source) => [source.n, source]));
  const { code, groups } = findMarkers(text);
  // Code spans and marker groups never overlap: walk both in text order.
  const spans = [
    ...code.map(([start, end]) => ({ start, end, code: true })),
    ...groups.map((group) => ({ ...group, code: false })),
  ].sort((a, b) => a.start - b.start);
  const pieces = [];
  const plain = (start, end) => {
    if (end > start) pieces.push({ text: text.slice(start, end) });
  };
  let last = 0;
  for (const span of spans) {
    plain(last, span.start);
    if (span.code) {
      pieces.push({ code: text.slice(span.start, span.end) });
    } else {
      let inside = span.start;
      for (const [start, end] of span.numbers) {
        plain(inside, start);
        const digits = text.slice(start, end);
        pieces.push({ cite: digits, source: byNumber.get(toNumber(digits)) ?? null });
        inside = end;
      }
      plain(inside, span.end);
    }
    last = span.end;
  }
  plain(last, text.length);
  return pieces;
}

function citeLink(digits, source) {
  const href = source && sourceHref(source);
  if (!href) return document.createTextNode(digits);
  const link = document.createElement("a");
  link.className = "cite";
  link.href = href;
  link.textContent = digits;
  link.title = source.display_name;
  link.target = "_blank";
  link.rel = "noopener noreferrer";
  return link;
}

function renderText(target, text, sources) {
  const fragment = document.createDocumentFragment();
  for (const piece of textPieces(text, sources)) {
    if ("code" in piece) {
      const element = document.createElement("code");
      element.textContent = piece.code;
      fragment.append(element);
    } else if ("cite" in piece) {
      fragment.append(citeLink(piece.cite, piece.source));
    } else {
      fragment.append(piece.text);
    }
  }
  target.replaceChildren(fragment);
}

function sourceItem(source) {
  const item = document.createElement("li");
  item.value = source.n;
  item.dataset.n = String(source.n);
  item.dataset.source = sourceLabel(source);
  const href = sourceHref(source);
  const name = document.createElement(href ? "a" : "span");
  name.className = "name";
  name.textContent = source.display_name;
  if (href) {
    name.href = href;
    name.target = "_blank";
    name.rel = "noopener noreferrer";
  }
  const detail = document.createElement("span");
  detail.className = "collection";
  detail.textContent = ` (${source.collection}, ${sourceLabel(source)})`;
  item.append(name, detail);
  return item;
}

function renderList(list, sources, shown) {
  // A list that only grew gets the new entries appended; any other change redraws it.
  const grew = shown.length <= sources.length && shown.every((s, i) => s === sources[i]);
  if (grew) list.append(...sources.slice(shown.length).map(sourceItem));
  else list.replaceChildren(...sources.map(sourceItem));
}

function sameList(a, b) {
  return a.length === b.length && a.every((item, index) => item === b[index]);
}

// Draws what changed since the last call: the text, the Sources (the heading and the list
// appear together, and only when there is something to list) and what was searched.
function drawer() {
  let shown = { text: "", sources: [], retrieved: [] };
  return (answer) => {
    const { text, sources, retrieved } = answer;
    const sourcesChanged = !sameList(sources, shown.sources);
    // The links of the markers follow the Sources, so the text is redrawn with them.
    if (text !== shown.text || sourcesChanged) renderText(page.answer, text, sources);
    if (sourcesChanged) {
      renderList(page.sources, sources, shown.sources);
      page.sourcesSection.hidden = sources.length === 0;
    }
    if (!sameList(retrieved, shown.retrieved)) {
      renderList(page.retrieved, retrieved, shown.retrieved);
      const count = retrieved.length;
      page.retrievedSummary.textContent = `Searched ${count} source${count === 1 ? "" : "s"}`;
      page.retrievedSection.hidden = count === 0;
    }
    shown = { text, sources: [...sources], retrieved: [...retrieved] };
  };
}

function showError(message) {
  page.error.textContent = message;
  page.error.hidden = false;
}

function setStatus(message) {
  page.status.textContent = message;
}

// --- The stream -------------------------------------------------------------------------------

// Server-Sent Events from a fetch body (EventSource cannot POST). Yields each event's data
// parsed as JSON; comments (keep-alives) and fields other than data are skipped. Lines end
// with \n, \r\n or a lone \r, and a chunk may end between the \r and the \n.
async function* readEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let data = [];
  let skipNewline = false; // the last line ended with \r: a \n starting the next chunk is its
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    if (skipNewline && buffer.startsWith("\n")) buffer = buffer.slice(1);
    skipNewline = false;
    for (;;) {
      const end = buffer.search(/[\r\n]/);
      if (end < 0) break;
      const line = buffer.slice(0, end);
      if (buffer[end] === "\r" && end === buffer.length - 1) skipNewline = true;
      buffer = buffer.slice(end + (buffer.startsWith("\r\n", end) ? 2 : 1));
      if (line === "") {
        if (data.length) yield JSON.parse(data.join("\n"));
        data = [];
      } else if (line === "data") {
        data.push("");
      } else if (line.startsWith("data:")) {
        data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
      }
    }
  }
}

async function errorMessage(response) {
  try {
    const body = await response.json();
    if (body && body.error && body.error.message) return body.error.message;
  } catch (_) {
    // Not our JSON error: fall through to the status line.
  }
  return `The server answered ${response.status} ${response.statusText}.`;
}

function reset() {
  page.answer.replaceChildren();
  page.error.hidden = true;
  page.error.textContent = "";
  page.sources.replaceChildren();
  page.sourcesSection.hidden = true;
  page.retrieved.replaceChildren();
  page.retrievedSection.hidden = true;
  page.retrievedSection.open = false;
  page.answer.dataset.state = "streaming";
  page.answer.setAttribute("aria-busy", "true");
}

function settle(state, status) {
  page.answer.dataset.state = state;
  page.answer.removeAttribute("aria-busy");
  setStatus(status);
}

function keepTurn() {
  // The finished answer on the page becomes an earlier turn: a copy of its question, text and
  // Sources (without ids, so the page's own elements stay the current answer's).
  const turn = document.createElement("section");
  turn.className = "turn";
  for (const element of [page.asked, page.answer, page.sourcesSection]) {
    if (element.hidden) continue;
    const copy = element.cloneNode(true);
    copy.removeAttribute("id");
    for (const inner of copy.querySelectorAll("[id]")) inner.removeAttribute("id");
    turn.append(copy);
  }
  page.conversation.append(turn);
}

function history() {
  return conversation.slice(-MAX_TURNS).map((turn) => ({
    role: turn.role,
    content: turn.content.slice(0, MAX_TURN_CHARS),
  }));
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
  // Asking again abandons the answer in flight (the server then stops its model).
  if (current) current.abort();
  else if (turnOnPage) keepTurn();
  turnOnPage = false;
  const controller = new AbortController();
  current = controller;
  reset();
  page.asked.textContent = question;
  page.asked.hidden = false;
  page.newConversation.hidden = false;
  setStatus("Searching Reactome\u2026");

  const answer = new AnswerState();
  const drawNow = drawer();
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
    if (conversation.length) body.history = history();
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
    for await (const event of readEvents(response.body)) {
      answer.apply(event);
      if (event.type === "citation") {
        draw();
        const count = answer.retrieved.length;
        setStatus(`Found ${count} source${count === 1 ? "" : "s"}; writing\u2026`);
      } else if (event.type === "token" || event.type === "reference") {
        drawSoon();
      } else if (event.type === "error") {
        showError(event.data.message);
      } else if (event.type === "done") {
        finish(answer, draw);
        if (current === controller) {
          turnOnPage = true;
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

if (typeof document !== "undefined") {
  document.addEventListener("DOMContentLoaded", () => {
    for (const id of ["answer", "error", "status", "sources", "retrieved", "question", "asked",
                      "conversation"]) {
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
  });
}

// Node (the tests) loads this file to check the marker rules, the SSE reader and what the page
// shows of an answer.
if (typeof module !== "undefined") {
  module.exports = { AnswerState, findMarkers, readEvents, sourceHref, textPieces };
}
