"""The citation contract's rows, one per marker form and rule: the finalizer's table tests
and the live numbering both run every row, so the two paths are held to the same cases."""

from __future__ import annotations

import pytest

__all__ = ["FINALIZE_TABLE", "SOURCES", "STRIP_TABLE"]

SOURCES = ["A", "B", "C", "D"]

# (text, number of sources, stripped text).
STRIP_TABLE = [
    pytest.param("Bound [3].", 4, "Bound [3].", id="in-range-kept-verbatim"),
    pytest.param("Bound [7].", 4, "Bound.", id="above-range-removed"),
    pytest.param("Bound [0].", 4, "Bound.", id="zero-removed"),
    pytest.param("Bound [1, 9].", 4, "Bound [1].", id="group-keeps-valid-part"),
    pytest.param("Bound [1,9].", 4, "Bound [1].", id="group-without-space"),
    pytest.param("Bound [9, 2, 3].", 4, "Bound [2, 3].", id="group-rewritten-with-rest"),
    pytest.param("Bound [3-6].", 4, "Bound [3-4].", id="range-clipped"),
    pytest.param("Bound [4-9].", 4, "Bound [4].", id="range-clipped-to-one"),
    pytest.param("Bound [5-9].", 4, "Bound.", id="range-fully-out"),
    pytest.param("Bound [1][9].", 4, "Bound [1].", id="adjacent-pair-keeps-valid"),
    pytest.param("Bound [1] [9] here.", 4, "Bound [1] here.", id="no-doubled-space"),
    pytest.param(
        "Bound [9], then [9]; so [9]: yes [9]! ok [9]?",
        4,
        "Bound, then; so: yes! ok?",
        id="no-space-before-punctuation",
    ),
    pytest.param("[9] Opening words.", 4, "Opening words.", id="at-text-start"),
    pytest.param("line one\n[9] line two", 4, "line one\nline two", id="at-line-start"),
    pytest.param("  [9] indented", 4, "  indented", id="indentation-kept"),
    pytest.param("last words [9]\nnext", 4, "last words\nnext", id="before-newline"),
    pytest.param("(see [9]) after", 4, "(see) after", id="before-closing-paren"),
    pytest.param("anything [1]", 0, "anything", id="no-sources-removes-all"),
    pytest.param("[[9]1]", 1, "[1]", id="new-marker-from-removal-is-judged-too"),
    pytest.param("[[9]7]", 1, "", id="new-out-of-range-marker-removed-too"),
    pytest.param("[[9]0[9]][1]1", 0, "1", id="two-removals-in-one-pass-make-a-marker"),
    pytest.param("[2][9]: x\n", 1, "[2][9]: x\n", id="cluster-as-reference-definition-kept"),
    pytest.param("\r[3]\n[3][2]:", 1, "\r[3][2]:", id="a-lone-carriage-return-starts-a-line"),
    pytest.param("8[9\t[9]]9", 3, "89", id="a-removed-tab-makes-a-marker"),
    pytest.param("see [99999999999999999999999]", 4, "see", id="huge-number"),
    pytest.param("see [3-1] and [9]", 4, "see [3-1] and", id="descending-range-not-a-marker"),
    pytest.param("x [" + "9" * 5000 + "] y", 4, "x y", id="digits-beyond-int-limit"),
    pytest.param("**bold [9]**. [1]", 1, "**bold**. [1]", id="before-closing-emphasis"),
    pytest.param('He said "yes [9]".', 1, 'He said "yes".', id="before-closing-quote"),
    pytest.param("word [9] *emph* here", 1, "word *emph* here", id="before-opening-emphasis"),
    pytest.param("[see [9]] now", 1, "[see] now", id="before-closing-bracket"),
    pytest.param(
        "one line\n[9]\nsame paragraph",
        1,
        "one line\nsame paragraph",
        id="lone-marker-takes-its-line",
    ),
    pytest.param("a\r\n[9]\r\nb", 1, "a\r\nb", id="lone-marker-crlf"),
    pytest.param("X [1\u20143] [1\u22123].", 2, "X [1-2] [1-2].", id="em-dash-and-minus"),
    pytest.param("X [1; 3].", 2, "X [1].", id="semicolon-group"),
    pytest.param("X [ 1 ] and [ 9 ].", 2, "X [ 1 ] and.", id="spaces-inside-brackets"),
    pytest.param(
        "[9]: https://reactome.org\n",
        1,
        "[9]: https://reactome.org\n",
        id="reference-definition-not-a-marker",
    ),
]

# (text, finalized text, kept sources of SOURCES).
FINALIZE_TABLE = [
    pytest.param("X [1] and Y [3].", "X [1] and Y [2].", ["A", "C"], id="gap-closed"),
    pytest.param("X [3] then [1].", "X [1] then [2].", ["C", "A"], id="first-citation-order"),
    pytest.param("X [1, 3].", "X [1][2].", ["A", "C"], id="comma-space-group"),
    pytest.param("X [1,3].", "X [1][2].", ["A", "C"], id="comma-group"),
    pytest.param("X [2-4].", "X [1][2][3].", ["B", "C", "D"], id="range-expanded"),
    pytest.param("X [2\u20133].", "X [1][2].", ["B", "C"], id="en-dash-range"),
    pytest.param("X [1][3].", "X [1][2].", ["A", "C"], id="adjacent-pair"),
    pytest.param("X [3, 1].", "X [1][2].", ["C", "A"], id="order-inside-group"),
    pytest.param("X [2][2].", "X [1].", ["B"], id="repeated-adjacent-collapses"),
    pytest.param("X [2, 2].", "X [1].", ["B"], id="repeated-in-group-collapses"),
    pytest.param("X [4][2] and [2].", "X [1][2] and [2].", ["D", "B"], id="cluster-ascending"),
    pytest.param("X [1]. Y [1].", "X [1]. Y [1].", ["A"], id="repeat-keeps-number"),
    pytest.param("X [2] [9].", "X [1].", ["B"], id="out-of-range-dropped-tidily"),
    pytest.param(
        "See [docs](https://reactome.org) [2].",
        "See [docs](https://reactome.org) [1].",
        ["B"],
        id="markdown-link-untouched",
    ),
    pytest.param(
        "See [1](https://x.org) [3].",
        "See [1](https://x.org) [1].",
        ["C"],
        id="numeric-link-text-not-marker",
    ),
    pytest.param("Step [a] then [3].", "Step [a] then [1].", ["C"], id="letter-not-marker"),
    pytest.param("Use `x[2]` then [3].", "Use `x[2]` then [1].", ["C"], id="inline-code"),
    pytest.param(
        "Use ``a`[2]`` then [3].", "Use ``a`[2]`` then [1].", ["C"], id="double-backtick-code"
    ),
    pytest.param(
        "Code:\n```python\ny = x[2]\n```\nThen [4].",
        "Code:\n```python\ny = x[2]\n```\nThen [1].",
        ["D"],
        id="fenced-code",
    ),
    pytest.param(
        "Code:\n~~~\ny = x[2]\n~~~\nThen [4].",
        "Code:\n~~~\ny = x[2]\n~~~\nThen [1].",
        ["D"],
        id="tilde-fence",
    ),
    pytest.param(
        "Open fence:\n```\n[2]",
        "Open fence:\n```\n[2]",
        SOURCES,
        id="unclosed-fence-runs-to-end",
    ),
    pytest.param(
        "A lone ` backtick [3].",
        "A lone ` backtick [1].",
        ["C"],
        id="unmatched-backtick-is-literal",
    ),
    pytest.param(
        "ABCA1`s role is central [1].\n\nTangier disease [2][7].\n\nThe gene is `ABCA1` [3].",
        "ABCA1`s role is central [1].\n\nTangier disease [2].\n\nThe gene is `ABCA1` [3].",
        ["A", "B", "C"],
        id="inline-code-never-crosses-a-blank-line",
    ),
    pytest.param(
        "Use \\`x [2] then `y` [3].",
        "Use \\`x [1] then `y` [2].",
        ["B", "C"],
        id="escaped-backtick-opens-nothing",
    ),
    pytest.param(
        "See [[2]](https://x.org) and [3].",
        "See [[2]](https://x.org) and [1].",
        ["C"],
        id="link-text-not-marker",
    ),
    pytest.param(
        "````\n```\n[2]\n````\nafter [3]",
        "````\n```\n[2]\n````\nafter [1]",
        ["C"],
        id="shorter-fence-does-not-close",
    ),
    pytest.param(
        "```a`b [2]\n[3]",
        "```a`b [1]\n[2]",
        ["B", "C"],
        id="backtick-in-info-string-is-no-fence",
    ),
    pytest.param("[9] ```\n[2]", "```\n[2]", SOURCES, id="removal-that-opens-a-fence"),
]
