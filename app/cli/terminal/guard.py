"""Text from a request made harmless for the operator's terminal.

A question, an answer, a display name or an error message can hold escape sequences (ESC,
OSC, CSI, the C1 controls, bidirectional overrides) that retitle the window, clear the screen
or plant a link when printed raw. The command line writes through :func:`guard_output`, which
shows each such character as a ``\\u001b``-style escape: still readable, never acted on, and
still valid inside JSON, so ``--json`` output parses to the same data. Logs keep the text as
it was sent.

Text the output cannot carry is shown the same way, never raised: a lone surrogate (from an
undecodable argument, or a log written by an older version) as ``\\ud800``, and on a
terminal whose encoding is narrower than the text (``LANG=C`` without UTF-8,
``PYTHONIOENCODING=ascii``) each character it lacks as ``\\u00e9`` (``\\ud83d\\ude00`` beyond
the Basic Multilingual Plane), so no stored text can end a command in a traceback.
"""

from __future__ import annotations

import codecs
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO, cast

__all__ = ["guard_output", "visible"]

_CONTROLS = [
    *range(0x00, 0x20),
    *range(0x7F, 0xA0),
    0x061C,  # Arabic letter mark
    0x200E,  # left-to-right and right-to-left marks
    0x200F,
    *range(0x202A, 0x202F),  # embeddings and overrides
    *range(0x2066, 0x206A),  # isolates
    *range(0xD800, 0xE000),  # surrogates: in a str always lone ones, which no encoding carries
]


def _table(keep: str) -> dict[int, str]:
    return {code: f"\\u{code:04x}" for code in _CONTROLS if chr(code) not in keep}


_TABLES = {keep: _table(keep) for keep in ("\n\t", "\n\t\r")}


def visible(text: str, keep: str = "\n\t") -> str:
    """``text`` with every terminal control except those in ``keep`` written as ``\\uXXXX``."""
    table = _TABLES.get(keep) or _table(keep)
    return text.translate(table)


def _json_escapes(error: UnicodeError) -> tuple[str, int]:
    """A codec error handler: each character the encoding lacks as a JSON ``\\uXXXX`` escape
    (a surrogate pair beyond U+FFFF), so JSON output stays JSON on an ASCII terminal, where
    Python's ``backslashreplace`` would write ``\\xe9``, which JSON does not have."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    escapes = []
    for character in error.object[error.start : error.end]:
        code = ord(character)
        if code > 0xFFFF:
            code -= 0x10000
            escapes.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            escapes.append(f"\\u{code:04x}")
    return "".join(escapes), error.end


_ESCAPES = "reactome-answers-json-escapes"
codecs.register_error(_ESCAPES, _json_escapes)


class _Visible:
    """A text stream that passes everything through :func:`visible` on its way out, and
    escapes what the stream's encoding cannot carry instead of failing."""

    def __init__(self, stream: TextIO, keep: str) -> None:
        self._stream, self._keep = stream, keep

    def write(self, text: str) -> int:
        shown = visible(text, self._keep)
        try:
            self._stream.write(shown)
        except UnicodeEncodeError:  # raised while encoding, before anything was written
            encoding = getattr(self._stream, "encoding", None) or "ascii"
            self._stream.write(shown.encode(encoding, _ESCAPES).decode(encoding))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _reconfigure(stream: object, errors: str) -> str | None:
    """Set a text stream's error handler; the one it had, or None for a stream that has no
    such setting (a test's replacement)."""
    previous = getattr(stream, "errors", None)
    reconfigure = getattr(stream, "reconfigure", None)
    if not isinstance(previous, str) or reconfigure is None:
        return None
    reconfigure(errors=errors)
    return previous


@contextmanager
def guard_output() -> Iterator[None]:
    """Standard output and error, for the duration, show controls instead of obeying them.
    Standard error keeps carriage returns: progress bars redraw their line with them.
    Standard input (``chat`` reads it) reads bytes its encoding lacks as U+FFFD instead of
    failing, as a log stores them."""
    saved = sys.stdout, sys.stderr
    sys.stdout = cast(TextIO, _Visible(saved[0], "\n\t"))
    sys.stderr = cast(TextIO, _Visible(saved[1], "\n\t\r"))
    stdin = sys.stdin
    stdin_errors = _reconfigure(stdin, "replace")
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
        if stdin_errors is not None:
            _reconfigure(stdin, stdin_errors)
