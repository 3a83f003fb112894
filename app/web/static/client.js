// The reference client for POST /v1/answer/stream.
//
// Everything from the server is written into the page as text nodes: a source or a token
// that contains markup shows as characters, it never becomes part of the page.
"use strict";

const SITE = "https://reactome.org";

// --- Markers, read exactly as pipelines/citations.py reads them ------------------------------
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
  const lineStart = text.lastIndexOf("\n", start - 1) + 1;
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
  return { code, groups };
}

// --- Rendering --------------------------------------------------------------------------------

const page = {};
let current = null; // the AbortController of the request in flight

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

function citeLink(digits, byNumber) {
  const source = byNumber.get(toNumber(digits));
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

function renderText(target, text, byNumber) {
  const { code, groups } = findMarkers(text);
  // Code spans and marker groups never overlap: walk both in text order.
  const pieces = [
    ...code.map(([start, end]) => ({ start, end, code: true })),
    ...groups.map((group) => ({ ...group, code: false })),
  ].sort((a, b) => a.start - b.start);
  const fragment = document.createDocumentFragment();
  let last = 0;
  for (const piece of pieces) {
    if (piece.start > last) fragment.append(text.slice(last, piece.start));
    if (piece.code) {
      const element = document.createElement("code");
      element.textContent = text.slice(piece.start, piece.end);
      fragment.append(element);
    } else {
      // Numbers become links; brackets, commas, dashes and spaces stay text.
      let inside = piece.start;
      for (const [start, end] of piece.numbers) {
        fragment.append(text.slice(inside, start), citeLink(text.slice(start, end), byNumber));
        inside = end;
      }
      fragment.append(text.slice(inside, piece.end));
    }
    last = piece.end;
  }
  if (last < text.length) fragment.append(text.slice(last));
  target.replaceChildren(fragment);
}

function renderSources(sources) {
  // The heading and the list appear together, and only when there is something to list.
  const items = sources.map((source) => {
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
  });
  page.sources.replaceChildren(...items);
  page.sourcesSection.hidden = items.length === 0;
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
  renderSources([]);
  page.answer.dataset.state = "streaming";
  page.answer.setAttribute("aria-busy", "true");
}

function settle(state, status) {
  page.answer.dataset.state = state;
  page.answer.removeAttribute("aria-busy");
  setStatus(status);
}

async function ask(question, citeUrls) {
  // Asking again abandons the answer in flight (the server then stops its model).
  if (current) current.abort();
  const controller = new AbortController();
  current = controller;
  reset();
  setStatus("Searching Reactome\u2026");

  const early = new Map(); // n -> citation, the list of everything retrieved
  let text = "";
  let pending = false;
  let finished = false;
  const renderSoon = () => {
    // Tokens arrive faster than frames: draw at most once per frame.
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      if (!finished && current === controller) renderText(page.answer, text, early);
    });
  };

  try {
    const body = { question };
    if (citeUrls) body.cite_urls = true;
    const response = await fetch("/v1/answer/stream", {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    if (!response.ok) {
      showError(await errorMessage(response));
      settle("failed", "");
      return;
    }
    for await (const event of readEvents(response.body)) {
      if (event.type === "citation") {
        early.set(event.data.n, event.data);
        renderSources([...early.values()]);
        setStatus(`Found ${early.size} source${early.size === 1 ? "" : "s"}; writing\u2026`);
      } else if (event.type === "token") {
        text += event.data.text;
        renderSoon();
      } else if (event.type === "error") {
        showError(event.data.message);
      } else if (event.type === "done") {
        finished = true;
        finish(event.data);
      }
    }
    if (!finished) {
      showError("The answer stopped before it was complete; please ask again.");
      settle("failed", "");
    }
  } catch (error) {
    // An abort means another question replaced this one; a failure after done changes nothing.
    if (error.name === "AbortError" || finished) return;
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

function finish(done) {
  // The early list was everything retrieved; the final one is what the answer cites, with
  // the markers renumbered to match. Swap both in together.
  const final = new Map(done.references.map((reference) => [reference.n, reference]));
  renderText(page.answer, done.text, final);
  renderSources(done.references);
  settle(done.state, DONE_NOTES[done.state] ?? "");
}

if (typeof document !== "undefined") {
  document.addEventListener("DOMContentLoaded", () => {
    for (const id of ["answer", "error", "status", "sources", "question"]) {
      page[id] = document.getElementById(id);
    }
    page.sourcesSection = document.getElementById("sources-section");
    page.citeUrls = document.getElementById("cite-urls");
    document.getElementById("ask").addEventListener("submit", (event) => {
      event.preventDefault();
      const question = page.question.value.trim();
      if (!question) {
        showError("Type a question first.");
        return;
      }
      ask(question, page.citeUrls.checked);
    });
  });
}

// Node (the tests) loads this file to check the marker rules and the SSE reader.
if (typeof module !== "undefined") module.exports = { findMarkers, readEvents };
