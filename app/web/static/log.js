// The log page: one answer's log drawn from its view (callbacks/log_view.py builds it; this
// script only draws it). Served at /logs/{request_id}, where it fetches the view from
// /v1/logs/{request_id} with the API key the web client keeps for the tab; written by
// `reactome-answers logs view`, it finds the view embedded in the page (#log-view) instead.
//
// Everything in a view comes from a log, and a log holds what users typed: it is written into
// the page as text (textContent, text nodes), never as HTML.

import { sourceHref, textPieces } from "./answer.js";
import { errorMessage } from "./errors.js";
import { NOT_SUPPORTED, unsupportedLabel } from "./evidence.js";

const KEY_ITEM = "reactome-answers-api-key"; // the web client's, so one key serves both pages
const VIEW_VERSION = 1;
const page = {};

function element(tag, text = null, className = null) {
  const made = document.createElement(tag);
  if (text !== null) made.textContent = text;
  if (className) made.className = className;
  return made;
}

function shown(value) {
  // A number as a person reads it, absence as a dash, anything else as its JSON.
  if (value === null || value === undefined || value === "") return "–";
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : String(Number(value.toFixed(4)));
  if (typeof value === "string") return value;
  return JSON.stringify(value);
}

function plural(count, word) {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

function fact(list, name, value) {
  list.append(element("dt", name), element("dd", shown(value)));
}

function row(cells, tag = "td") {
  const tr = element("tr");
  for (const cell of cells) tr.append(cell instanceof Node ? wrap(tag, cell) : element(tag, shown(cell)));
  return tr;
}

function wrap(tag, child) {
  const cell = element(tag);
  cell.append(child);
  return cell;
}

function referenceLink(n) {
  const link = element("a", `[${n}]`, "cite");
  link.href = `#ref-${n}`;
  return link;
}

// --- Sections ---------------------------------------------------------------------------------

function drawFacts(view) {
  fact(page.facts, "request id", view.request_id);
  fact(page.facts, "created", view.created_at);
  if (view.trace_url) {
    // The operator's tracing backend (REACTOME_ANSWERS_TRACE_URL): the answer's spans there.
    const link = element("a", view.trace_id);
    link.href = view.trace_url;
    link.rel = "noopener noreferrer";
    page.facts.append(element("dt", "trace"), wrap("dd", link));
  } else if (view.trace_id) fact(page.facts, "trace", view.trace_id);
  fact(page.facts, "state", view.state);
  fact(page.facts, "collections asked", (view.collections || []).join(", "));
  for (const [name, value] of Object.entries(view.options || {})) fact(page.facts, name, value);
  page.log.dataset.state = view.state;
}

function drawQuestion(view) {
  page.question.textContent = view.question;
  if (view.normalized_question && view.normalized_question !== view.question) {
    page.normalized.textContent = `Read as: ${view.normalized_question}`;
    page.normalized.hidden = false;
  }
  const history = view.history || [];
  page.historySection.hidden = history.length === 0;
  for (const turn of history) {
    const item = element("li", null, "turn");
    item.append(element("span", `${turn.role}: `, "role"), element("span", turn.content, "text"));
    page.history.append(item);
  }
}

function drawSearched(view) {
  const searched = view.searched || { queries: [], collections: [] };
  for (const query of searched.queries) page.searched.append(element("li", query));
  if (!searched.queries.length) page.searched.append(element("li", "nothing recorded", "note"));
  page.searchedCollections.textContent = searched.collections.length
    ? `in ${searched.collections.join(", ")}`
    : "";
}

function evidenceOf(view) {
  // A view written before the log page showed evidence has none: that reads as no items.
  const evidence = view.answer.evidence;
  return Array.isArray(evidence) ? evidence : [];
}

function drawAnswer(view) {
  const { text, references, error } = view.answer;
  // Each marker links to its reference below; the reference links to Reactome. A marker the
  // judge found unsupported is set apart by shape and words, as in the web client.
  const fragment = document.createDocumentFragment();
  for (const piece of textPieces(text, references, evidenceOf(view))) {
    if ("code" in piece) fragment.append(element("code", piece.code));
    else if ("cite" in piece && piece.source) {
      const link = element("a", piece.cite, "cite");
      link.href = `#ref-${piece.source.n}`;
      link.title = piece.source.display_name;
      if (piece.evidence && !piece.evidence.supported) {
        link.classList.add("unsupported");
        link.title = `${piece.source.display_name}: ${NOT_SUPPORTED.toLowerCase()}`;
        link.setAttribute("aria-label", unsupportedLabel(piece.cite));
      }
      fragment.append(link);
    } else fragment.append("cite" in piece ? piece.cite : piece.text);
  }
  page.answer.replaceChildren(fragment);
  if (error) {
    page.answerError.textContent = `${error.code}: ${error.message}`;
    page.answerError.hidden = false;
  }
  page.noReferences.hidden = references.length > 0;
  for (const reference of references) {
    const item = element("li");
    item.id = `ref-${reference.n}`;
    item.value = reference.n;
    item.dataset.n = String(reference.n);
    const href = sourceHref(reference);
    const name = element(href ? "a" : "span", reference.display_name, "name");
    if (href) {
      name.href = href;
      name.target = "_blank";
      name.rel = "noopener noreferrer";
    }
    const where = reference.st_id || reference.url;
    const detail = ` (${reference.collection}, ${where}; citation ${reference.source_n})`;
    item.append(name, element("span", detail, "detail"));
    page.references.append(item);
  }
}

function codePoints(text, [start, end]) {
  // The offsets of evidence count code points, as Python does; JavaScript's count UTF-16 units.
  return Array.from(text).slice(start, end).join("");
}

function drawEvidence(view) {
  const { text } = view.answer;
  const evidence = evidenceOf(view);
  if (!evidence.length) {
    page.evidenceNote.textContent =
      "No evidence: the answer cites nothing, or the log was written before evidence was recorded.";
    return;
  }
  const flagged = evidence.filter((item) => !item.supported).length;
  page.evidenceNote.textContent =
    `${plural(evidence.length, "citation")} judged, ${flagged} not supported by the source cited: ` +
    "each sentence of the answer with the passage of its source that comes closest to it.";
  const thead = element("thead");
  thead.append(row(["citation", "sentence", "closest passage of the source", "score", "ruling"], "th"));
  const tbody = element("tbody");
  for (const item of evidence) {
    const ruling = item.supported ? "supported" : NOT_SUPPORTED.toLowerCase();
    const tr = row([referenceLink(item.n), codePoints(text, item.sentence), item.quote, item.score, ruling]);
    tr.dataset.supported = String(item.supported);
    if (!item.supported) tr.classList.add("unsupported");
    tbody.append(tr);
  }
  page.evidence.replaceChildren(thead, tbody);
  page.evidence.hidden = false;
}

function drawCandidates(view) {
  const record = view.candidates;
  if (!record) {
    page.candidatesNote.textContent =
      "No candidates recorded: the log was written before the retriever recorded them, or by another retriever.";
    return;
  }
  const { candidates, queries } = record;
  const considered = record.considered ?? candidates.length;
  const read = record.read === null || record.read === undefined ? "" : `, ${record.read} read and ranked`;
  const bound = record.bound === null ? "" : ` (at most ${record.bound} recorded)`;
  page.candidatesNote.textContent =
    `${plural(candidates.length, "candidate")} shown of ${considered} considered${read}${bound}; ` +
    "ranks are dense / keyword per query, a dash where that search did not find it.";
  const head = [
    "outcome", "n", "cited", "collection", "id", "title",
    ...queries.map((_, index) => `q${index + 1} ranks`),
    "fused", "similarity", "keyword evidence", "score",
  ];
  const header = row(head, "th");
  queries.forEach((query, index) => {
    header.children[6 + index].title = query; // the query itself, on hover
  });
  const thead = element("thead");
  thead.append(header);
  const tbody = element("tbody");
  for (const candidate of candidates) {
    const ranks = queries.map((_, index) => {
      const rank = candidate.ranks[index] || { dense: null, keyword: null };
      return `${shown(rank.dense)} / ${shown(rank.keyword)}`;
    });
    const cited = candidate.cited ? referenceLink(candidate.reference_n) : "";
    const tr = row([
      candidate.outcome, candidate.n, cited, candidate.collection,
      candidate.st_id || candidate.url || candidate.chunk_id, candidate.title,
      ...ranks, candidate.fused, candidate.similarity, candidate.keyword_evidence, candidate.score,
    ]);
    tr.dataset.outcome = candidate.outcome;
    if (candidate.cited) tr.classList.add("cited");
    tbody.append(tr);
  }
  page.candidates.replaceChildren(thead, tbody);
  page.candidates.hidden = false;
}

function drawTimeline(view) {
  const thead = element("thead");
  thead.append(row(["seq", "t (ms)", "type", "what"], "th"));
  const tbody = element("tbody");
  for (const event of view.timeline) {
    const grouped = event.count !== undefined && event.count > 1;
    const seq = grouped ? `${event.seq}–${event.seq_last}` : event.seq;
    const time = grouped ? `${shown(event.t_ms)}–${shown(event.t_ms_last)}` : event.t_ms;
    const tr = row([seq, time, event.type, event.summary]);
    tr.dataset.type = event.type;
    tbody.append(tr);
  }
  page.timeline.replaceChildren(thead, tbody);
}

function drawModel(view) {
  const { input, raw_text: raw } = view.model;
  page.noModelInput.hidden = Boolean(input);
  for (const message of input || []) {
    const details = element("details", null, "message");
    details.dataset.role = message.role;
    details.append(
      element("summary", `${message.role} (${plural(message.content.length, "character")})`),
      element("pre", message.content),
    );
    page.modelInput.append(details);
  }
  if (raw !== null && raw !== undefined) {
    page.rawText.textContent = raw;
    page.rawSection.hidden = false;
  }
}

function drawTimings(view) {
  if (!view.timings) {
    fact(page.timings, "timings", "none: the log does not end with its done event");
    return;
  }
  for (const [name, value] of Object.entries(view.timings)) fact(page.timings, name, value);
  for (const [name, value] of Object.entries(view.usage || {})) fact(page.timings, name, value);
}

function drawFeedback(view) {
  const feedback = view.feedback;
  if (!feedback) {
    page.feedback.textContent = "No feedback.";
    return;
  }
  page.feedback.dataset.rating = feedback.rating;
  const comment = feedback.comment ? `: ${feedback.comment}` : "";
  page.feedback.textContent = `Rated ${feedback.rating} at ${feedback.at}${comment}`;
}

function drawReleases(view) {
  const thead = element("thead");
  thead.append(row(["collection", "release", "version", "indexes"], "th"));
  const tbody = element("tbody");
  for (const release of view.releases || []) {
    tbody.append(row([release.collection, release.release, release.version, release.indexes.join(", ")]));
  }
  page.releases.replaceChildren(thead, tbody);
}

export function drawView(view) {
  if (view.view !== VIEW_VERSION) {
    showError(`This page draws log views of version ${VIEW_VERSION}; this one is ${view.view}.`);
  }
  document.title = `Log: ${view.question.slice(0, 60)}`;
  for (const draw of [drawFacts, drawQuestion, drawSearched, drawAnswer, drawEvidence,
    drawCandidates, drawTimeline, drawModel, drawTimings, drawFeedback, drawReleases]) {
    draw(view);
  }
  page.log.hidden = false;
  page.status.textContent = "";
  // A marker followed from another page lands on its reference once the list exists.
  if (location.hash) document.getElementById(location.hash.slice(1))?.scrollIntoView();
}

// --- Loading ----------------------------------------------------------------------------------

function showError(message) {
  page.error.textContent = message;
  page.error.hidden = false;
}

function showNotFound() {
  // The server's 404 names the id and the retention; the page says the same for a person,
  // with what to try.
  page.error.hidden = true;
  page.keyForm.hidden = true;
  document.title = "Not in the logs";
  page.notFoundText.textContent =
    `No answer with the request id “${requestId()}” is in this server's logs. ` +
    "Answers are kept for the log retention only and not at all while logs are off; " +
    "check the id, or find the answer with 'reactome-answers logs list'.";
  page.notFound.hidden = false;
}

function storedKey() {
  try {
    return sessionStorage.getItem(KEY_ITEM);
  } catch (_) {
    return null; // storage switched off: the key is asked for each time
  }
}

function keep(key) {
  try {
    sessionStorage.setItem(KEY_ITEM, key);
  } catch (_) {
    // Used for this load only.
  }
}

function requestId() {
  const last = location.pathname.split("/").pop();
  try {
    return decodeURIComponent(last);
  } catch (_) {
    return last;
  }
}

async function fetchView(key) {
  const headers = { Accept: "application/json" };
  if (key) headers.Authorization = `Bearer ${key}`;
  page.status.textContent = "Loading the log…";
  let response;
  try {
    response = await fetch(`../v1/logs/${encodeURIComponent(requestId())}`, { headers });
  } catch (error) {
    page.status.textContent = "";
    showError(`The server could not be reached (${error.message}).`);
    return;
  }
  page.status.textContent = "";
  if (response.status === 401) {
    page.error.hidden = true;
    showError(await errorMessage(response));
    page.keyForm.hidden = false;
    page.apiKey.value = "";
    page.apiKey.focus();
    return;
  }
  if (response.status === 404) {
    showNotFound();
    return;
  }
  if (!response.ok) {
    showError(await errorMessage(response));
    return;
  }
  page.error.hidden = true;
  page.keyForm.hidden = true;
  drawView(await response.json());
}

function start() {
  for (const id of ["status", "error", "log", "facts", "question", "normalized", "history",
    "searched", "answer", "references", "candidates", "timeline", "feedback", "releases",
    "timings", "api-key", "key-form", "history-section", "searched-collections",
    "answer-error", "no-references", "candidates-note", "no-model-input", "model-input",
    "raw-section", "raw-text", "evidence", "evidence-note", "not-found", "not-found-text"]) {
    page[id.replace(/-(.)/g, (_, letter) => letter.toUpperCase())] = document.getElementById(id);
  }
  const embedded = document.getElementById("log-view");
  if (embedded) {
    drawView(JSON.parse(embedded.textContent));
    return;
  }
  page.keyForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const key = page.apiKey.value.trim();
    if (!key) return;
    keep(key);
    fetchView(key);
  });
  fetchView(storedKey());
}

start();
