// The quote behind a marker, shown beside it once the answer is done: the passage of the
// source that backs the marker's sentence, and a link to the source; a marker judged
// unsupported says so. One popover for the page, so only one quote shows at a time.
//
// A marker shows its quote when the mouse rests on it, when it has keyboard focus, and when
// it is activated (click, tap, Enter) while its quote is not showing; activated while its
// quote shows, a marker that is a link follows it. So a mouse or keyboard user reaches the
// source as before, and a touch screen, which has no hover, shows the quote at the first tap.
// Escape closes the popover. Listeners sit on the document, so the markers of earlier turns
// (copies, without listeners of their own) work too: all a marker needs is on its data-*
// attributes (answer.js).

import { POPOVER_ID } from "./answer.js";
import { NOT_SUPPORTED } from "./evidence.js";

const MARKER = ".cite[data-quote]";
// How long the popover of a marker the mouse left stays, so the pointer can cross the gap
// into the popover (to follow its link).
const HOVER_GRACE_MS = 300;

let popover = null;
let openFor = null; // the marker whose quote shows
let openedBy = null; // "hover", "focus" or "click": what closes it again
let pressed = null; // {marker, showing}: a pointer went down on a marker, before any focus
let closing = 0; // the timer closing a hover popover

function markerOf(target) {
  return target instanceof Element ? target.closest(MARKER) : null;
}

function inside(node) {
  return Boolean(node && ((openFor && openFor.contains(node)) || popover.contains(node)));
}

function sourceLine(marker) {
  const line = document.createElement("p");
  line.className = "evidence-source";
  line.append(`Source ${marker.dataset.n}: `);
  const href = marker.getAttribute("href");
  const name = document.createElement(href ? "a" : "span");
  name.textContent = marker.dataset.name;
  if (href) {
    name.href = href;
    name.target = "_blank";
    name.rel = "noopener noreferrer";
  }
  line.append(name);
  return line;
}

function fill(marker) {
  const supported = marker.dataset.supported === "true";
  const parts = [];
  if (!supported) {
    const note = document.createElement("p");
    note.className = "evidence-note";
    note.textContent = NOT_SUPPORTED;
    const closest = document.createElement("p");
    closest.className = "evidence-label";
    closest.textContent = "Its closest passage:";
    parts.push(note, closest);
  }
  const quote = document.createElement("blockquote");
  quote.className = "evidence-quote";
  quote.textContent = marker.dataset.quote;
  parts.push(quote, sourceLine(marker));
  popover.classList.toggle("unsupported", !supported);
  popover.replaceChildren(...parts);
}

function place(marker) {
  // Below the marker, kept inside the window's width; in page coordinates, so it scrolls
  // with the text.
  const box = marker.getBoundingClientRect();
  const width = document.documentElement.clientWidth;
  const left = Math.max(8, Math.min(box.left, width - popover.offsetWidth - 8));
  popover.style.left = `${left + window.scrollX}px`;
  popover.style.top = `${box.bottom + window.scrollY + 4}px`;
}

function open(marker, by) {
  clearTimeout(closing);
  if (openFor !== marker) {
    if (openFor) openFor.removeAttribute("aria-expanded");
    openFor = marker;
    fill(marker);
    popover.hidden = false;
    place(marker);
  }
  openFor.setAttribute("aria-expanded", "true");
  // Opened by focus or a click, it stays when the mouse leaves, and takes the pointer; opened
  // by hover, the pointer passes through it (but for its link) to the markers it covers.
  openedBy = by;
  popover.classList.toggle("pinned", by !== "hover");
}

export function closeEvidence() {
  clearTimeout(closing);
  if (openFor) openFor.removeAttribute("aria-expanded");
  openFor = null;
  openedBy = null;
  if (popover) popover.hidden = true;
}

function onPointerOver(event) {
  if (inside(event.target)) {
    clearTimeout(closing);
    return;
  }
  const marker = markerOf(event.target);
  // A touch has no hover: its tap is a click.
  if (marker && event.pointerType !== "touch") open(marker, "hover");
}

function onPointerOut(event) {
  if (openedBy !== "hover" || !inside(event.target) || inside(event.relatedTarget)) return;
  clearTimeout(closing);
  closing = setTimeout(closeEvidence, HOVER_GRACE_MS);
}

function onFocusIn(event) {
  const marker = markerOf(event.target);
  if (marker) open(marker, "focus");
}

function onFocusOut(event) {
  if (openedBy === "focus" && inside(event.target) && !inside(event.relatedTarget)) {
    closeEvidence();
  }
}

function onPointerDown(event) {
  const marker = markerOf(event.target);
  // Whether its quote showed before this press: the focus the press gives opens it.
  pressed = marker ? { marker, showing: openFor === marker } : null;
  if (!marker && openFor && !inside(event.target)) closeEvidence();
}

function onClick(event) {
  const marker = markerOf(event.target);
  const press = pressed;
  pressed = null;
  if (!marker) return;
  const showing = press && press.marker === marker ? press.showing : openFor === marker;
  if (!showing) {
    event.preventDefault();
    open(marker, "click");
  } else if (!marker.hasAttribute("href")) {
    closeEvidence();
  }
}

function onKeyDown(event) {
  if (event.key === "Escape" && openFor) {
    event.preventDefault();
    closeEvidence();
  }
}

// Makes the page's popover and listens for markers; once, when the page starts.
export function installEvidencePopover() {
  popover = document.createElement("div");
  popover.id = POPOVER_ID;
  popover.className = "evidence-popover";
  popover.hidden = true;
  document.body.append(popover);
  document.addEventListener("pointerover", onPointerOver);
  document.addEventListener("pointerout", onPointerOut);
  document.addEventListener("focusin", onFocusIn);
  document.addEventListener("focusout", onFocusOut);
  document.addEventListener("pointerdown", onPointerDown);
  document.addEventListener("click", onClick);
  document.addEventListener("keydown", onKeyDown);
  window.addEventListener("resize", closeEvidence);
}
