"""The evidence of an answer as OpenAI's chat-completion annotations.

OpenAI marks a cited span of a message with ``{"type": "url_citation", "url_citation": {"url",
"title", "start_index", "end_index"}}`` in ``choices[0].message.annotations`` (streamed: in a
chunk's ``delta``). Here each *supported* evidence item becomes one: the span is the sentence
that cites the source, ``content[start_index:end_index]`` (the end is exclusive, as Python
slices and our own spans are), and the url and title are the reference's Reactome page and
display name.

A citation the judge found unsupported gets no annotation: a client that shows annotations
presents each as "this text comes from that page", which is exactly what the judge doubted.
Its marker stays in the text (the ``flag`` setting keeps it), and the full evidence, supported
or not, is in the response's ``evidence`` field for clients that know this server.

The offsets count Python string positions (Unicode code points) in the content the client
receives. That content starts with the answer's text (a Sources list the model wrote at its end
removed, ours appended), so an item keeps its offsets when its sentence stands at the same
place there; one that does not (a sentence of the removed list) is left out.
"""

from __future__ import annotations

from typing import Any

from app.links import reference_link
from callbacks.events import DoneData, EvidenceData

__all__ = ["evidence_in_content", "evidence_json", "url_citations"]


def evidence_in_content(done: DoneData, content: str) -> list[EvidenceData]:
    """The evidence items whose sentence stands in ``content`` at the offsets it has in the
    answer's text, in order."""
    kept = []
    for item in done.evidence:
        start, end = item.sentence
        if end > start and content[start:end] == done.text[start:end]:
            kept.append(item)
    return kept


def url_citations(done: DoneData, content: str) -> list[dict[str, Any]]:
    """One ``url_citation`` annotation per supported evidence item that points into
    ``content``."""
    references = {reference.n: reference for reference in done.references}
    annotations = []
    for item in evidence_in_content(done, content):
        reference = references.get(item.n)
        if reference is None or not item.supported:
            continue
        start, end = item.sentence
        citation = {
            "url": reference_link(reference),
            "title": reference.display_name,
            "start_index": start,
            "end_index": end,
        }
        annotations.append({"type": "url_citation", "url_citation": citation})
    return annotations


def evidence_json(done: DoneData, content: str) -> list[dict[str, Any]]:
    """The evidence items that point into ``content``, as the native API gives them."""
    return [item.model_dump(mode="json") for item in evidence_in_content(done, content)]
