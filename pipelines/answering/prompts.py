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
from pipelines.language import DEFAULT_LANGUAGE

__all__ = [
    "LANGUAGE_NAMES",
    "PromptBlock",
    "answer_messages",
    "prompt_language",
    "read_answer_prompt",
]

ANSWER_SYSTEM = """\
You answer questions about human biology and about using the Reactome website, using only the
material given inside <source> and <context> blocks.
- After every statement taken from a <source>, cite it with its number in square brackets,
  like [1] or [2][3]. Never cite a number that is not a <source> block's n.
- <context> blocks have no number: use them, but do not cite them.
- If the material does not answer the question, say so briefly instead of guessing.
- Write plain prose, a few sentences; no reference list at the end.
- Answer the <question> at the end; <turn> blocks are earlier turns of the conversation.
- Write the answer in {language_name} (language code {language}), whatever the language of
  the material. Keep Reactome names, gene symbols, identifiers (R-HSA-..., HGVS) and URLs
  exactly as written in the material, and every [n] marker exactly as given."""

# The languages' names as a model reads them best: in English, the prompt's own language.
LANGUAGE_NAMES = {
    "en": "English",
    "es": "Spanish",
    "pt": "Portuguese",
    "fr": "French",
    "de": "German",
    "it": "Italian",
    "zh": "Chinese (Simplified)",
    "ja": "Japanese",
}

_BLOCK_RE = re.compile(r'<(source|context) (?:n="(\d+)" )?name="([^"]*)">\n(.*?)\n</\1>', re.DOTALL)
_LANGUAGE_RE = re.compile(r'<question lang="([a-z]{2,3})">')
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
    language: str = DEFAULT_LANGUAGE,
) -> list[BaseMessage]:
    """The system and human messages; ``language`` (a tag of
    :data:`pipelines.language.SUPPORTED_LANGUAGES`) is the one the answer is asked in, a
    variable of the system prompt and the question block's ``lang`` (never part of the
    search query)."""
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
    name = LANGUAGE_NAMES.get(language, language)
    return [
        SystemMessage(content=ANSWER_SYSTEM.format(language_name=name, language=language)),
        HumanMessage(
            content=f'{body}\n\n{turns}<question lang="{language}">\n{_clean(question)}\n'
            "</question>"
        ),
    ]


def read_answer_prompt(
    messages: Sequence[BaseMessage],
) -> tuple[str, list[PromptBlock], list[tuple[str, str]]]:
    """The question, the blocks and the earlier turns of a prompt from :func:`answer_messages`."""
    text = str(messages[-1].content) if messages else ""
    body, marker, question = _LANGUAGE_RE.sub("<question>", text).rpartition("<question>\n")
    if not marker:
        body, question = "", text
    question = question.removesuffix("</question>").strip()
    blocks = [
        PromptBlock(int(n) if n else None, name, block)
        for kind, n, name, block in _BLOCK_RE.findall(body)
        if (kind == "source") == bool(n)
    ]
    return question, blocks, _TURN_RE.findall(body)


def prompt_language(messages: Sequence[BaseMessage]) -> str:
    """The language a prompt from :func:`answer_messages` asks the answer in ("en" for a
    prompt without one)."""
    text = str(messages[-1].content) if messages else ""
    found = _LANGUAGE_RE.findall(text)
    return found[-1] if found else DEFAULT_LANGUAGE
