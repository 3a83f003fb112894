// The [n] markers of an answer's text, read exactly as pipelines/citations/finalize.py reads
// them: a bracket group of numbers and ascending ranges ([3], [1, 3], [1; 3], [1-3]; spaces
// only) that is not a link, not a reference definition and not inside code. The server
// renumbers exactly these, so the client must link exactly these:
// tests/web/test_client_logic.py runs both implementations on the same texts.

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

export function toNumber(digits) {
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

export function findMarkers(text) {
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
