"""Where a reference points on the Reactome website, for every front-end that shows links."""

from __future__ import annotations

from callbacks.events import Reference

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


def sources_markdown(references: list[Reference]) -> str:
    """A short Markdown list of the references, numbered as the answer's markers, to append to
    an answer for clients that render text only; empty when there are none."""
    if not references:
        return ""
    lines = [
        f"{reference.n}. [{_markdown_label(reference.display_name)}]({reference_link(reference)})"
        for reference in references
    ]
    return "\n\nSources:\n" + "\n".join(lines)
