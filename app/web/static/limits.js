// The server's limits on what one request may carry, from GET /v1/limits, so that the page
// never repeats them. The page asks once when it opens. null means the server could not say
// (an older server, a network failure, another shape): the page then sends the conversation
// as it is and leaves every limit to the server, which enforces them anyway.

// The fields of /v1/limits, by the names the page uses. The question limit is read but not
// checked here: the server's refusal says what the limit is and by how much it was passed.
const FIELDS = {
  maxQuestionChars: "max_question_chars",
  maxTurns: "max_turns",
  maxTurnChars: "max_turn_chars",
};

export function readLimits(body) {
  const limits = {};
  for (const [name, field] of Object.entries(FIELDS)) {
    const value = body !== null && typeof body === "object" ? body[field] : undefined;
    if (!Number.isSafeInteger(value) || value < 0) return null;
    limits[name] = value;
  }
  // Whether answers can be rated: only a server that says it cannot hides the thumbs.
  limits.feedback = body.feedback !== false;
  // Whether each answer has a log page: only a server that says so gets a link to one.
  limits.logs = body.logs === true;
  return limits;
}

export async function fetchLimits(get = fetch) {
  try {
    const response = await get("/v1/limits", { headers: { Accept: "application/json" } });
    if (!response.ok) return null;
    return readLimits(await response.json());
  } catch (_) {
    return null; // no answer, or not JSON: no limits known
  }
}

// The conversation ({role, content} turns, oldest first) as the server takes it as history:
// the last maxTurns turns, each cut to maxTurnChars characters; all of it, as it is, when the
// limits are not known.
export function history(conversation, limits) {
  if (limits === null) return conversation.map(({ role, content }) => ({ role, content }));
  return conversation.slice(Math.max(conversation.length - limits.maxTurns, 0)).map((turn) => ({
    role: turn.role,
    content: turn.content.slice(0, limits.maxTurnChars),
  }));
}
