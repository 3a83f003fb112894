"""The query expander: a standalone question, alternative queries, and which collections to ask.

A generative model is asked for JSON (:func:`expander_messages`, :func:`parse_expansion`). The
offline default, :class:`RuleExpanderModel`, answers the same prompt through the same chat
model interface by rules, so its tokens flow through the callbacks like any model's and the
handler's gate is exercised for real. Whatever the model says, :func:`parse_expansion` keeps
only what it can check, and falls back to the question alone and rule-based routing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import Field

from pipelines.catalog.catalog import Catalog, catalog_for, catalog_from_path
from pipelines.core.composed_chat import ComposedChatModel

__all__ = [
    "STOPWORDS",
    "Expansion",
    "RuleExpanderModel",
    "expander_messages",
    "parse_expansion",
    "route",
    "rule_expansion",
]

EXPANDER_SYSTEM = """\
You prepare searches over Reactome. Given a question (and maybe earlier turns of the chat):
1. Rewrite it as one standalone question.
2. Write up to {n} short alternative search queries: gene and protein symbols, variant
   notations such as R132H, disease and pathway names, synonyms.
3. Choose the collections to search, one or more of:
{collections}
4. Say whether it asks for personal medical advice: a decision about the asker's own (or a
   relative's) treatment, dose, medication, symptoms or test results ("should I", "is it safe
   for me", "for my ..."). How a drug or disease works, or how to use the website, is not.
Reply with JSON only: {{"question": "...", "queries": ["..."], "collections": ["..."], \
"personal_advice": false}}"""

# Words that carry nothing a search or a quote could match on (the extractive model weighs
# a question's other words with them too).
STOPWORDS = frozenset(
    """a about above after again all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers him his how i if in into is it its itself
    just me more most my no nor not now of off on once only or other our out over own same
    she should so some such than that the their them then there these they this those
    through to too under until up very was we were what when where which while who whom why
    will with would you your yours role happen happens explain tell describe give know mean
    means""".split()  # noqa: SIM905 - a word list reads better as text
)
_WORD_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9'+-]*")
# Protein changes as papers and Reactome write them: R132H, V600E, W590S, p.R132H, E17K.
_VARIANT_RE = re.compile(
    r"\b(?:p\.)?[ACDEFGHIKLMNPQRSTVWY]\d{1,5}(?:[ACDEFGHIKLMNPQRSTVWY*]|fs|del)\b"
)
# A gene or protein symbol: a capital, and a second capital or digit later in the same run
# (ABCA1, TP53, BRCA2, IL-6; not Tangier). The look-ahead starts after the first capital and
# stops at the first capital or digit: two open-ended runs in it, tried at every word start,
# made a long hyphenated run ("a-a-a-...") cost quadratic time.
_SYMBOL_RE = re.compile(r"\b[A-Z](?=[a-z-]*[A-Z0-9])[A-Za-z0-9-]{1,11}\b")
_PRONOUN_RE = re.compile(r"\b(?:it|its|they|them|their|this|that|these|those)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Expansion:
    """What to search: ``queries[0]`` is the standalone question."""

    queries: list[str]
    collections: list[str]
    fallback: str | None = None  # why the model's own expansion was not used
    # The model said the question asks for personal medical advice: the retriever stops and
    # the pipeline refuses (the rule expander never says so; the offline gate ran already).
    personal_advice: bool = False

    @property
    def question(self) -> str:
        return self.queries[0]


def route(question: str, catalog: Catalog | None = None) -> list[str]:
    """Collections a question needs, by the routing hints each collection declares
    (:meth:`pipelines.catalog.catalog.Catalog.route`)."""
    return (catalog or catalog_for()).route(question)


def _content_words(text: str) -> list[str]:
    return [w for w in _WORD_RE.findall(text) if w.lower() not in STOPWORDS and len(w) > 1]


def _standalone(question: str, history: Sequence[tuple[str, str]]) -> str:
    """A follow-up made to stand alone. When the last question named a gene, protein or
    variant, it takes the place of the follow-up's first pronoun ("a defect in it" becomes "a
    defect in ABCA1"), which searches far better than the name appended; the last question's
    other content words are appended as what the follow-up is about."""
    earlier = [text for role, text in history if role in ("user", "human")]
    pronoun = _PRONOUN_RE.search(question) if earlier else None
    if pronoun is None:
        return question
    names = list(dict.fromkeys(_SYMBOL_RE.findall(earlier[-1])))
    words = _content_words(earlier[-1])
    if 0 < len(names) <= 2:
        subject = " and ".join(names)
        if pronoun.group().lower() in ("its", "their"):
            subject += "'s"
        question = question[: pronoun.start()] + subject + question[pronoun.end() :]
        words = [word for word in words if word not in names]  # the rest of what was asked
    about = " ".join(words[:8])
    return f"{question} (about: {about})" if about else question


def rule_expansion(
    question: str,
    history: Sequence[tuple[str, str]] = (),
    max_queries: int = 3,
    catalog: Catalog | None = None,
) -> Expansion:
    """The deterministic expansion: content words, symbols and variant notations, acronyms."""
    standalone = _standalone(question.strip(), history)
    words = _content_words(standalone)
    variants = _VARIANT_RE.findall(standalone)
    symbols = [s for s in _SYMBOL_RE.findall(standalone) if s not in variants]
    candidates = [
        " ".join(words),
        " ".join(dict.fromkeys([*symbols, *variants])),
        " ".join(dict.fromkeys([*symbols, *variants, *(w for w in words if w.islower())][:6])),
    ]
    queries = [standalone]
    for candidate in candidates:
        if candidate and candidate.lower() not in {q.lower() for q in queries}:
            queries.append(candidate)
    return Expansion(queries[: max_queries + 1], route(standalone, catalog))


def expander_messages(
    question: str,
    history: Sequence[tuple[str, str]] = (),
    max_queries: int = 3,
    catalog: Catalog | None = None,
) -> list[BaseMessage]:
    turns = "\n".join(f"{role}: {text}" for role, text in history[-6:])
    body = (f"Earlier turns:\n{turns}\n\n" if turns else "") + f"Question: {question}"
    listed = "\n".join(
        f'   "{definition.name}": {definition.routing.prompt}'
        for definition in catalog or catalog_for()
    )
    return [
        SystemMessage(content=EXPANDER_SYSTEM.format(n=max_queries, collections=listed)),
        HumanMessage(content=body),
    ]


def _read_expander_prompt(messages: Sequence[BaseMessage]) -> tuple[str, list[tuple[str, str]]]:
    text = str(messages[-1].content) if messages else ""
    question = text.rsplit("Question: ", 1)[-1].strip()
    history: list[tuple[str, str]] = []
    if text.startswith("Earlier turns:\n"):
        for line in text.split("\n\n", 1)[0].splitlines()[1:]:
            role, _, said = line.partition(": ")
            history.append((role, said))
    return question, history


def parse_expansion(
    text: str,
    question: str,
    history: Sequence[tuple[str, str]] = (),
    max_queries: int = 3,
    catalog: Catalog | None = None,
) -> Expansion:
    """The model's JSON expansion, checked; rules fill in whatever is missing or invalid."""
    catalog = catalog or catalog_for()
    # From the first "{" to the last "}": found with two string scans, as a pattern such as
    # \{.*\} would rescan the rest of the text from every "{" when no "}" follows.
    start, end = text.find("{"), text.rfind("}")
    try:
        data = json.loads(text[start : end + 1]) if 0 <= start < end else None
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        rules = rule_expansion(question, history, max_queries, catalog)
        return Expansion(rules.queries, rules.collections, fallback="expander reply was not JSON")
    standalone = data.get("question")
    standalone = (
        standalone.strip() if isinstance(standalone, str) and standalone.strip() else question
    )
    queries = [standalone]
    for query in data.get("queries") or []:
        if isinstance(query, str) and query.strip() and query.strip() not in queries:
            queries.append(query.strip()[:300])
    collections = [
        name
        for name in dict.fromkeys(data.get("collections") or [])
        if isinstance(name, str) and name in catalog
    ]
    fallback = None
    if not collections:
        collections, fallback = catalog.route(standalone), "expander chose no known collection"
    return Expansion(queries[: max_queries + 1], collections, fallback, _flag(data))


def _flag(data: dict[str, object]) -> bool:
    """The model's ``personal_advice``: true only when it plainly says so (small models write
    booleans as strings now and then)."""
    said = data.get("personal_advice")
    return said is True or (isinstance(said, str) and said.strip().lower() in ("true", "yes"))


class RuleExpanderModel(ComposedChatModel):
    """A chat model that answers the expander prompt by rules (no generative model)."""

    model_name: str = "rule-expander"
    max_queries: int = 3
    collections_path: str | None = Field(
        default=None,
        description="the settings' collections_path: which collections to route to (unset: "
        "as the environment's settings say)",
    )

    @property
    def _llm_type(self) -> str:
        return "reactome-answers-rule-expander"

    def reply(self, messages: list[BaseMessage]) -> str:
        question, history = _read_expander_prompt(messages)
        catalog = (
            catalog_for()
            if self.collections_path is None
            else catalog_from_path(self.collections_path)
        )
        expansion = rule_expansion(question, history, self.max_queries, catalog)
        return json.dumps(
            {
                "question": expansion.question,
                "queries": expansion.queries[1:],
                "collections": expansion.collections,
            }
        )
