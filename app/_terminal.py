"""Text from a request made harmless for the operator's terminal.

A question, an answer, a display name or an error message can hold escape sequences (ESC,
OSC, CSI, the C1 controls, bidirectional overrides) that retitle the window, clear the screen
or plant a link when printed raw. The command line writes through :func:`guard_output`, which
shows each such character as a ``\\u001b``-style escape: still readable, never acted on, and
still valid inside JSON, so ``--json`` output parses to the same data. Logs keep the exact text.
"""

from __future__ import annotations

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
]


def _table(keep: str) -> dict[int, str]:
    return {code: f"\\u{code:04x}" for code in _CONTROLS if chr(code) not in keep}


_TABLES = {keep: _table(keep) for keep in ("\n\t", "\n\t\r")}


def visible(text: str, keep: str = "\n\t") -> str:
    """``text`` with every terminal control except those in ``keep`` written as ``\\uXXXX``."""
    table = _TABLES.get(keep) or _table(keep)
    return text.translate(table)


class _Visible:
    """A text stream that passes everything through :func:`visible` on its way out."""

    def __init__(self, stream: TextIO, keep: str) -> None:
        self._stream, self._keep = stream, keep

    def write(self, text: str) -> int:
        self._stream.write(visible(text, self._keep))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def guard_output() -> Iterator[None]:
    """Standard output and error, for the duration, show controls instead of obeying them.
    Standard error keeps carriage returns: progress bars redraw their line with them."""
    saved = sys.stdout, sys.stderr
    sys.stdout = cast(TextIO, _Visible(saved[0], "\n\t"))
    sys.stderr = cast(TextIO, _Visible(saved[1], "\n\t\r"))
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
