// Thumbs up or down under a finished answer, with an optional comment, sent to
// POST /v1/answers/{request_id}/feedback. The server keeps the latest rating of an answer,
// so the rating is sent at the click (nothing is lost if the person goes no further) and
// again with the comment when they write one; changing one's mind is another click.

import { errorMessage } from "./errors.js";

export function feedbackPath(requestId) {
  return `/v1/answers/${encodeURIComponent(requestId)}/feedback`;
}

// The body the server takes: a blank comment is no comment.
export function feedbackBody(rating, comment) {
  const body = { rating };
  const text = (comment ?? "").trim();
  if (text) body.comment = text;
  return body;
}

// Send a rating; resolves to null once stored, else to the server's reason (or ours).
export async function sendFeedback(requestId, rating, comment, key, post = fetch) {
  const headers = { "Content-Type": "application/json", Accept: "application/json" };
  if (key) headers.Authorization = `Bearer ${key}`;
  let response;
  try {
    response = await post(feedbackPath(requestId), {
      method: "POST",
      headers,
      body: JSON.stringify(feedbackBody(rating, comment)),
    });
  } catch (error) {
    return `Could not send the rating: ${error.message}`;
  }
  if (response.ok) return null;
  return errorMessage(response);
}

const LABELS = { up: "Good answer", down: "Bad answer" };

// The thumbs are drawn, not written: an emoji needs a font that has it, and a machine without
// one shows an empty box. One outline, turned upside down for "down"; it takes the button's
// text colour, and the button's label is what a screen reader says.
const SVG = "http://www.w3.org/2000/svg";
const THUMB = "M7 10v11H3V10zM7 10l4-7c1.7 0 2.8 1.3 2.4 3L13 9h6.2c1.3 0 2.2 1.2 1.9 2.4"
  + "l-1.9 7.9c-.2 1-1.1 1.7-2.1 1.7H7";

export function thumb(direction) {
  const icon = document.createElementNS(SVG, "svg");
  icon.setAttribute("viewBox", "0 0 24 24");
  icon.setAttribute("width", "20");
  icon.setAttribute("height", "20");
  icon.setAttribute("aria-hidden", "true");
  icon.setAttribute("focusable", "false");
  icon.classList.add("thumb");
  const path = document.createElementNS(SVG, "path");
  path.setAttribute("d", THUMB);
  path.setAttribute("fill", "none");
  path.setAttribute("stroke", "currentColor");
  path.setAttribute("stroke-width", "1.8");
  path.setAttribute("stroke-linejoin", "round");
  if (direction === "down") path.setAttribute("transform", "rotate(180 12 12)");
  icon.append(path);
  return icon;
}

// The controls for one answer; apiKey() gives the key the page holds, if any.
export function feedbackControls(requestId, apiKey) {
  const box = document.createElement("section");
  box.className = "feedback";
  box.dataset.requestId = requestId;
  const prompt = document.createElement("span");
  prompt.textContent = "Was this answer useful?";
  box.append(prompt);

  const note = document.createElement("p");
  note.className = "feedback-note";
  note.setAttribute("role", "status");
  const form = document.createElement("form");
  form.className = "feedback-comment";
  form.hidden = true;
  const label = document.createElement("label");
  label.textContent = "What was right or wrong? (optional)";
  const comment = document.createElement("textarea");
  comment.rows = 2;
  label.append(comment);
  const submit = document.createElement("button");
  submit.type = "submit";
  submit.textContent = "Send comment";
  form.append(label, submit);

  let rating = null;
  const buttons = {};
  const send = async (text) => {
    note.textContent = "Sending\u2026";
    const problem = await sendFeedback(requestId, rating, text, apiKey());
    note.textContent = problem ?? (text.trim() ? "Thank you: comment sent." : "Thank you.");
    box.dataset.sent = problem === null ? rating : "";
    return problem;
  };
  for (const [value, name] of Object.entries(LABELS)) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "rate";
    button.dataset.rating = value;
    button.append(thumb(value));
    button.title = name;
    button.setAttribute("aria-label", name);
    button.setAttribute("aria-pressed", "false");
    button.addEventListener("click", () => {
      rating = value;
      for (const [other, element] of Object.entries(buttons)) {
        element.setAttribute("aria-pressed", String(other === value));
      }
      form.hidden = false;
      send(comment.value);
    });
    buttons[value] = button;
    box.append(button);
  }
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (rating === null) return;
    if ((await send(comment.value)) === null && comment.value.trim()) form.hidden = true;
  });
  box.append(form, note);
  return box;
}
