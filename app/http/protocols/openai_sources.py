"""The Sources list this server writes into an answer's text for the OpenAI-compatible
endpoint (:func:`app.links.sources_markdown`), recognized when a client sends an answer back
as history. (A list the model wrote itself never gets this far: the pipeline removes it,
:mod:`pipelines.citations.model_sources`.)

It is read line by line with anchored patterns and string scans, in time linear in the
text. A request's history comes from the client, up to the body limit, and this runs on the
event loop: a pattern that backtracked over it (``\\[.*\\]\\(\\S*\\)`` repeated, as once) would
stall every request on the worker.
"""

from __future__ import annotations

import re

from pipelines.language import SUPPORTED_LANGUAGES, fixed_text

__all__ = ["without_our_sources"]

# What sources_markdown puts before its list, in each language, and how each line starts.
_OUR_HEADINGS = tuple(
    dict.fromkeys(
        f"\n\n{fixed_text('sources_heading', language)}\n" for language in SUPPORTED_LANGUAGES
    )
)
_OUR_ITEM_START = re.compile(r"\d+\. \[")
_NO_SPACE = re.compile(r"\S*")


def _is_our_item(line: str) -> bool:
    """Whether ``line`` reads ``N. [label](link)`` with no space in the link: the label is
    whatever lies before the line's last ``](``."""
    start = _OUR_ITEM_START.match(line)
    if start is None or not line.endswith(")"):
        return False
    label_end = line.rfind("](")
    return (
        label_end >= start.end()
        and _NO_SPACE.fullmatch(line, label_end + 2, len(line) - 1) is not None
    )


def without_our_sources(text: str) -> str:
    """``text`` without the Sources list this server appended to it, when it ends with one:
    the last ``Sources:`` heading (in any answer language) followed only by
    ``N. [label](link)`` lines. (An earlier heading cannot start our list: a list has no
    blank line, the heading does.)"""
    heading, found = max((text.rfind(heading), heading) for heading in _OUR_HEADINGS)
    if heading < 0:
        return text
    lines = text[heading + len(found) :].removesuffix("\n").split("\n")
    return text[:heading] if all(_is_our_item(line) for line in lines) else text
