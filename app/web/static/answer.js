// One answer as the page shows it: its state from the events of the stream, and its text,
// markers and Sources drawn into the page. Kept apart from the page itself so that
// tests/web/test_client_logic.py can feed it the events of real streams in Node.
//
// Everything from the server is written into the page as text nodes: a source or a token
// that contains markup shows as characters, it never becomes part of the page.

import { evidenceLookup, unsupportedLabel } from "./evidence.js";
import { findMarkers, toNumber } from "./markers.js";

const SITE = "https://reactome.org";

// --- One answer, from its events -------------------------------------------------------------
// Two modes, told apart by start.data.options.live_citations:
// - live: the tokens carry their final markers, and a reference event comes right before the
//   token that first cites each source. The text is the tokens and done never replaces it;
//   the Sources list grows one reference at a time.
// - not live (a server without the option ignores the field): the tokens carry the model's
//   markers, numbered as the retrieved list, so that list is the Sources while the answer
//   streams; done swaps in the final text and the sources it cites, together.
// Either way the retrieved list (every citation event) is kept as what was searched, and
// done's evidence (the quote behind each marker) applies to the text once done came.

// The states whose done text is the text streamed; any other (a refusal, nothing found) is a
// message the server writes in done itself.
const STREAMED_STATES = new Set(["answered", "failed"]);

export class AnswerState {
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

  // done's evidence items, whose sentence offsets point into the text shown: nothing while
  // the answer streams, nor when the text shown is not done's (the offsets would miss).
  get evidence() {
    if (this.done === null || this.text !== (this.done.text ?? "")) return [];
    return this.done.evidence ?? [];
  }

  // A failure before any text: nothing was answered, so nothing is cited or to be rated.
  get failedWithoutText() {
    return this.done !== null && this.done.state === "failed" && this.text === "";
  }

  // The answer's Sources list; its numbers are the ones the text's markers use.
  get sources() {
    if (this.done !== null) {
      // Whatever done lists: a server older than this page listed every source retrieved.
      if (this.failedWithoutText) return [];
      // An answer that cites nothing had no reference events: like any answer, it lists
      // what done lists (the untouched retrieved list, or nothing).
      if (this.live && this.references.length) return this.references;
      return this.done.references ?? [];
    }
    return this.live ? this.references : this.retrieved;
  }
}

// --- Rendering --------------------------------------------------------------------------------

// Where the server shows the log of the answer with this request id (the log page).
export function logPath(requestId) {
  return `/logs/${encodeURIComponent(requestId)}`;
}

export function sourceHref(source) {
  if (source.st_id) return `${SITE}/content/detail/${encodeURIComponent(source.st_id)}`;
  const url = source.url || "";
  if (/^https?:\/\//i.test(url)) return url;
  if (url.startsWith("/")) return SITE + url;
  return null;
}

function sourceLabel(source) {
  return source.st_id || source.url;
}

export function textPieces(text, sources, evidence = []) {
  // The text cut into plain text ({text}), code ({code}) and the numbers of its markers
  // ({cite: digits, source, evidence}: the source with that number, or null, and the
  // evidence item that backs this marker, or null); joined, the pieces are the text.
  // Brackets, commas, dashes and spaces of a marker stay plain text.
  const byNumber = new Map(sources.map((source) => [source.n, source]));
  const backing = evidenceLookup(text, evidence);
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
        const source = byNumber.get(toNumber(digits)) ?? null;
        const item = source && backing(start, source.n);
        pieces.push({ cite: digits, source, evidence: item || null });
        inside = end;
      }
      plain(inside, span.end);
    }
    last = span.end;
  }
  plain(last, text.length);
  return pieces;
}

// The element popover.js shows a marker's quote in; every marker with a quote names it as
// its description.
export const POPOVER_ID = "evidence-popover";

function citeLink(digits, source, evidence) {
  const href = source && sourceHref(source);
  if (!href && !evidence) return document.createTextNode(digits);
  // A marker with a quote but no link to follow is still reachable by keyboard.
  const marker = document.createElement(href ? "a" : "span");
  marker.className = "cite";
  marker.textContent = digits;
  if (href) {
    marker.href = href;
    marker.target = "_blank";
    marker.rel = "noopener noreferrer";
  } else {
    marker.tabIndex = 0;
  }
  if (!evidence) {
    marker.title = source.display_name;
    return marker;
  }
  // What popover.js needs to show the quote, kept on the marker itself, so that a marker
  // copied into an earlier turn of the conversation still shows its own.
  marker.dataset.quote = evidence.quote;
  marker.dataset.supported = String(evidence.supported);
  marker.dataset.name = source.display_name;
  marker.dataset.n = String(source.n);
  marker.setAttribute("aria-describedby", POPOVER_ID);
  if (!evidence.supported) {
    marker.classList.add("unsupported");
    marker.setAttribute("aria-label", unsupportedLabel(digits));
  }
  return marker;
}

function renderText(target, text, sources, evidence) {
  const fragment = document.createDocumentFragment();
  for (const piece of textPieces(text, sources, evidence)) {
    if ("code" in piece) {
      const element = document.createElement("code");
      element.textContent = piece.code;
      fragment.append(element);
    } else if ("cite" in piece) {
      fragment.append(citeLink(piece.cite, piece.source, piece.evidence));
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

// Draws what changed since the last call into the page's elements (`view`: answer, sources,
// sourcesSection, retrieved, retrievedSection, retrievedSummary): the text, the Sources (the
// heading and the list appear together, and only when there is something to list) and what
// was searched.
export function drawer(view) {
  let shown = { text: "", sources: [], retrieved: [], evidence: [] };
  return (answer) => {
    const { text, sources, retrieved, evidence } = answer;
    const sourcesChanged = !sameList(sources, shown.sources);
    // The links of the markers follow the Sources, and their quotes the evidence, so the
    // text is redrawn with either.
    if (text !== shown.text || sourcesChanged || !sameList(evidence, shown.evidence)) {
      renderText(view.answer, text, sources, evidence);
    }
    if (sourcesChanged) {
      renderList(view.sources, sources, shown.sources);
      view.sourcesSection.hidden = sources.length === 0;
    }
    if (!sameList(retrieved, shown.retrieved)) {
      renderList(view.retrieved, retrieved, shown.retrieved);
      const count = retrieved.length;
      view.retrievedSummary.textContent = `Searched ${count} source${count === 1 ? "" : "s"}`;
      view.retrievedSection.hidden = count === 0;
    }
    shown = { text, sources: [...sources], retrieved: [...retrieved], evidence: [...evidence] };
  };
}
