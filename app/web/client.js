// The reference client for POST /v1/answer/stream.
//
// Everything from the server is written into the page as text nodes: a source or a token
// that contains markup shows as characters, it never becomes part of the page.
"use strict";

const SITE = "https://reactome.org";
// A citation cluster as the finalizer writes it: [3], [1, 3], [1; 3], [1-3] (any dash).
const MARKER = /\[\s*(\d+(?:\s*[-\u2013\u2014\u2212]\s*\d+)?(?:\s*[,;]\s*\d+(?:\s*[-\u2013\u2014\u2212]\s*\d+)?)*)\s*\](?!\()/g;
// Code is shown as written, markers and all (the finalizer leaves markers in code alone too).
const CODE = /(```[\s\S]*?(?:```|$)|`[^`\n]*`)/;

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

function citeLink(number, byNumber) {
  const source = byNumber.get(number);
  const href = source && sourceHref(source);
  if (!href) return document.createTextNode(String(number));
  const link = document.createElement("a");
  link.className = "cite";
  link.href = href;
  link.textContent = String(number);
  link.title = source.display_name;
  link.target = "_blank";
  link.rel = "noopener noreferrer";
  return link;
}

function appendMarker(target, body, byNumber) {
  // Numbers become links, everything between them (commas, dashes, spaces) stays text.
  target.append("[");
  let last = 0;
  for (const match of body.matchAll(/\d+/g)) {
    if (match.index > last) target.append(body.slice(last, match.index));
    target.append(citeLink(Number(match[0]), byNumber));
    last = match.index + match[0].length;
  }
  target.append(body.slice(last), "]");
}

function renderText(target, text, byNumber) {
  const fragment = document.createDocumentFragment();
  text.split(CODE).forEach((piece, index) => {
    if (index % 2 === 1) {
      const code = document.createElement("code");
      code.textContent = piece;
      fragment.append(code);
      return;
    }
    let last = 0;
    for (const match of piece.matchAll(MARKER)) {
      if (match.index > last) fragment.append(piece.slice(last, match.index));
      appendMarker(fragment, match[1], byNumber);
      last = match.index + match[0].length;
    }
    if (last < piece.length) fragment.append(piece.slice(last));
  });
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

// Server-Sent Events from a fetch body (EventSource cannot POST). Yields each event's data
// parsed as JSON; comments (keep-alives) and fields other than data are skipped.
async function* readEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    for (;;) {
      const end = buffer.search(/\r\n|\r|\n/);
      // A lone \r at the end of what has arrived may be the first half of \r\n.
      if (end < 0 || (end === buffer.length - 1 && buffer[end] === "\r")) break;
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + (buffer.startsWith("\r\n", end) ? 2 : 1));
      if (line === "") {
        if (data.length) yield JSON.parse(data.join("\n"));
        data = [];
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
}

async function ask(question, citeUrls) {
  if (current) current.abort();
  const controller = new AbortController();
  current = controller;
  reset();
  setStatus("Searching Reactome\u2026");
  page.submit.disabled = true;

  const early = new Map(); // n -> citation, the list of everything retrieved
  let text = "";
  let pending = false;
  const renderSoon = () => {
    // Tokens arrive faster than frames: draw at most once per frame.
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      if (page.answer.dataset.state === "streaming") renderText(page.answer, text, early);
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
      setStatus("");
      page.answer.dataset.state = "failed";
      return;
    }
    let finished = false;
    for await (const event of readEvents(response)) {
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
        finish(event.data);
        finished = true;
      }
    }
    if (!finished) {
      showError("The answer stopped before it was complete; please ask again.");
      page.answer.dataset.state = "failed";
      setStatus("");
    }
  } catch (error) {
    if (error.name === "AbortError") return;
    showError(`Could not get an answer: ${error.message}`);
    page.answer.dataset.state = "failed";
    setStatus("");
  } finally {
    if (current === controller) {
      current = null;
      page.submit.disabled = false;
    }
  }
}

function finish(done) {
  // The early list was everything retrieved; the final one is what the answer cites, with
  // the markers renumbered to match. Swap both in together.
  const final = new Map(done.references.map((reference) => [reference.n, reference]));
  renderText(page.answer, done.text, final);
  renderSources(done.references);
  page.answer.dataset.state = done.state;
  const notes = {
    answered: "",
    nothing_found: "Nothing in the collections matched this question.",
    refused: "This question is outside what Reactome can answer.",
    failed: "The answer could not be completed.",
  };
  setStatus(notes[done.state] ?? "");
}

document.addEventListener("DOMContentLoaded", () => {
  for (const id of ["answer", "error", "status", "sources", "submit", "question"]) {
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
