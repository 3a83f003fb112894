// Which item of done.data.evidence backs each [n] marker of the answer on the page. Pure, so
// tests/web/test_client_logic.py checks it in Node against the server's own reading of which
// sentence owns which marker.
//
// An item names a number n and a sentence: [start, end) in done.text, counted in code points
// (Python's string offsets), and holding the markers that sentence owns. A marker is backed
// by the item with its number whose sentence holds it; the page's offsets are UTF-16 units,
// which differ from code points past any character outside the Basic Multilingual Plane.

// A function from a UTF-16 offset into `text` to the code point offset Python would give.
export function codePointOffsets(text) {
  if (!/[\uD800-\uDFFF]/.test(text)) return (offset) => offset;
  const points = new Uint32Array(text.length + 1);
  let count = 0;
  for (let index = 0; index < text.length; index += 1) {
    points[index] = count;
    const code = text.charCodeAt(index);
    const next = text.charCodeAt(index + 1);
    // A surrogate pair is one code point; a lone surrogate is one too, as in Python.
    if (code >= 0xd800 && code <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
      index += 1;
      points[index] = count;
    }
    count += 1;
  }
  points[text.length] = count;
  return (offset) => points[offset];
}

// A function from (UTF-16 offset of a marker's digits in `text`, the number they read) to
// the evidence item that backs that marker, or null.
export function evidenceLookup(text, evidence) {
  if (!evidence || evidence.length === 0) return () => null;
  const toPoint = codePointOffsets(text);
  return (offset, n) => {
    const at = toPoint(offset);
    return (
      evidence.find((item) => item.n === n && item.sentence[0] <= at && at < item.sentence[1]) ??
      null
    );
  };
}

export const NOT_SUPPORTED = "Not supported by this source";

// What a screen reader says for a marker judged unsupported, in place of its bare number.
export function unsupportedLabel(digits) {
  return `${digits}: ${NOT_SUPPORTED.toLowerCase()}`;
}
