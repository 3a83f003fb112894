"""Where a reference points on the Reactome website, for every front-end that shows links."""

from __future__ import annotations

from callbacks.events import Reference
from pipelines.language import DEFAULT_LANGUAGE, fixed_text

__all__ = ["REACTOME_DETAIL", "REACTOME_SITE", "reference_link", "sources_markdown"]

REACTOME_DETAIL = "https://reactome.org/content/detail/"
REACTOME_SITE = "https://reactome.org"


def reference_link(reference: Reference) -> str:
    """The detail page of a stable id, or the user-guide page of a url (site paths made
    absolute)."""
    if reference.st_id:
        return REACTOME_DETAIL + reference.st_id
    url = reference.url or ""
    return url if url.startswith("http") else REACTOME_SITE + url


def _markdown_label(text: str) -> str:
    # A bracket in a display name would end the link text early.
    return text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def sources_markdown(references: list[Reference], language: str = DEFAULT_LANGUAGE) -> str:
    """A short Markdown list of the references, numbered as the answer's markers, to append to
    an answer for clients that render text only, under the heading in ``language``; empty
    when there are none."""
    if not references:
        return ""
    lines = [
        f"{reference.n}. [{_markdown_label(reference.display_name)}]({reference_link(reference)})"
        for reference in references
    ]
    return f"\n\n{fixed_text('sources_heading', language)}\n" + "\n".join(lines)
