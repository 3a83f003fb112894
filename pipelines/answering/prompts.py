"""The answer prompt: numbered sources, unnumbered context, the question.

Sources and context are written as tagged blocks so that any model can tell them apart and
the extractive model can read them back exactly (:func:`read_answer_prompt`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.documents import Document
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from pipelines.citations.sources import Source

__all__ = ["PromptBlock", "answer_messages", "read_answer_prompt"]

ANSWER_SYSTEM = """\
You answer questions about human biology and about using the Reactome website, using only the
material given inside <source> and <context> blocks.
- After every statement taken from a <source>, cite it with its number in square brackets,
  like [1] or [2][3]. Never cite a number that is not a <source> block's n.
- <context> blocks have no number: use them, but do not cite them.
- If the material does not answer the question, say so briefly instead of guessing.
- Write plain prose, a few sentences; no reference list at the end.
- Answer the <question> at the end; <turn> blocks are earlier turns of the conversation."""

_BLOCK_RE = re.compile(r'<(source|context) (?:n="(\d+)" )?name="([^"]*)">\n(.*?)\n</\1>', re.DOTALL)
_TURN_RE = re.compile(r'<turn role="([^"]*)">\n(.*?)\n</turn>', re.DOTALL)
_TAG_RE = re.compile(r"</?(?:source|context|question|turn)\b", re.IGNORECASE)


@dataclass(frozen=True)
class PromptBlock:
    n: int | None  # None for unnumbered context
    name: str
    text: str


def _clean(text: str) -> str:
    # Retrieved text (or a user's turn) must not be able to close its own block or open a
    # new one, in any letter case.
    return _TAG_RE.sub(lambda m: m.group(0).replace("<", "&lt;"), text)


def _attribute(text: str) -> str:
    return _clean(text).replace('"', "'").replace("\n", " ")


def answer_messages(
    question: str,
    sources: Sequence[Source],
    context: Sequence[Document],
    history: Sequence[tuple[str, str]] = (),
) -> list[BaseMessage]:
    blocks = [
        f'<source n="{s.n}" name="{_attribute(s.display_name)}">\n'
        f"{_clean(s.document.page_content)}\n</source>"
        for s in sources
    ]
    for document in context:
        name = str(document.metadata.get("title") or document.metadata.get("display_name") or "")
        section = document.metadata.get("section")
        if isinstance(section, str) and section and section != name:
            name = f"{name}: {section}"
        blocks.append(
            f'<context name="{_attribute(name)}">\n{_clean(document.page_content)}\n</context>'
        )
    body = "\n\n".join(blocks) if blocks else "(no material was found)"
    # Earlier turns let a follow-up's "it" be understood; the question comes last, tagged,
    # so nothing in the retrieved text can pass for it.
    turns = "".join(
        f'<turn role="{_attribute(role)}">\n{_clean(said)}\n</turn>\n'
        for role, said in history[-6:]
    )
    return [
        SystemMessage(content=ANSWER_SYSTEM),
        HumanMessage(content=f"{body}\n\n{turns}<question>\n{_clean(question)}\n</question>"),
    ]


def read_answer_prompt(
    messages: Sequence[BaseMessage],
) -> tuple[str, list[PromptBlock], list[tuple[str, str]]]:
    """The question, the blocks and the earlier turns of a prompt from :func:`answer_messages`."""
    text = str(messages[-1].content) if messages else ""
    body, marker, question = text.rpartition("<question>\n")
    if not marker:
        body, question = "", text
    question = question.removesuffix("</question>").strip()
    blocks = [
        PromptBlock(int(n) if n else None, name, block)
        for kind, n, name, block in _BLOCK_RE.findall(body)
        if (kind == "source") == bool(n)
    ]
    return question, blocks, _TURN_RE.findall(body)
