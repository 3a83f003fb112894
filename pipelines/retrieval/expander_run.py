"""The query expander as the retriever runs it: a child run of the retrieval (its tokens are
visible to callbacks, tagged as the expander's), the rules in its place when it fails, its
verdict on personal advice, and the custom events that record what was searched for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from pipelines.catalog.catalog import Catalog
from pipelines.core.errors import EventHandlerError, PersonalAdviceError
from pipelines.core.redaction import one_line, redact_secrets
from pipelines.core.tags import EXPANDER_TAG, EXPANSION_RECORD
from pipelines.retrieval.expander import (
    Expansion,
    expander_messages,
    parse_expansion,
    rule_expansion,
)

__all__ = [
    "EXPANSION",
    "EXPANSION_FALLBACK",
    "aexpand",
    "expand",
    "expansion_data",
    "fallback_data",
    "stop_if_personal_advice",
]

# The custom callback event that says the expander's own expansion was not used, and why;
# the event log records it.
EXPANSION_FALLBACK = "reactome-answers:expansion-fallback"
# The custom callback event that records what was searched for (its name lives with the tags,
# where the log's readers find it too).
EXPANSION = EXPANSION_RECORD


def expansion_data(expansion: Expansion, collections: Sequence[str]) -> dict[str, Any]:
    """The :data:`EXPANSION` event's data."""
    return {
        "queries": [redact_secrets(query) for query in expansion.queries],
        "collections": list(collections),
    }


def fallback_data(expansion: Expansion) -> dict[str, Any]:
    """The :data:`EXPANSION_FALLBACK` event's data."""
    return {
        "reason": expansion.fallback,
        "queries": [redact_secrets(query) for query in expansion.queries],
        "collections": expansion.collections,
    }


def stop_if_personal_advice(expansion: Expansion) -> None:
    """Raise :class:`PersonalAdviceError` when the expander said the question asks for
    personal medical advice: nothing is searched, and the pipeline answers ``refused``."""
    if expansion.personal_advice:
        raise PersonalAdviceError(
            "the query expander judged this a request for personal medical advice",
            detail={"personal_advice": True, "question": redact_secrets(expansion.question)},
        )


def _expansion_from(
    reply: Any,
    question: str,
    history: Sequence[tuple[str, str]],
    max_queries: int,
    catalog: Catalog,
) -> Expansion:
    text = str(getattr(reply, "content", reply))
    return parse_expansion(text, question, history, max_queries, catalog)


def _fallback(
    question: str, history: Sequence[tuple[str, str]], error: Exception, catalog: Catalog
) -> Expansion:
    # The question alone (made standalone from the history), routed by the rules: a
    # failing model is no reason to search for anything the user did not ask.
    alone = rule_expansion(question, history, max_queries=0, catalog=catalog)
    reason = f"expander failed ({one_line(error)}); searched the question alone"
    return Expansion(alone.queries, alone.collections, fallback=reason)


def _expander_call(
    question: str,
    history: Sequence[tuple[str, str]],
    max_queries: int,
    catalog: Catalog,
    run_manager: CallbackManagerForRetrieverRun | AsyncCallbackManagerForRetrieverRun,
) -> tuple[list[BaseMessage], RunnableConfig]:
    messages = expander_messages(question, history, max_queries, catalog)
    config: RunnableConfig = {
        "callbacks": run_manager.get_child(),
        "tags": [EXPANDER_TAG],
        "run_name": "expander",
    }
    return messages, config


def expand(
    expander: BaseChatModel,
    question: str,
    history: Sequence[tuple[str, str]],
    *,
    max_queries: int,
    catalog: Catalog,
    run_manager: CallbackManagerForRetrieverRun,
) -> Expansion:
    """``expander``'s expansion of ``question``, or the rules' of the question alone (with
    the reason in ``fallback``) when the model fails."""
    messages, config = _expander_call(question, history, max_queries, catalog, run_manager)
    try:
        reply = expander.invoke(messages, config=config)
    except EventHandlerError:
        raise  # our own handler broke, not the expander
    except Exception as error:  # the expander must never sink the answer
        return _fallback(question, history, error, catalog)
    return _expansion_from(reply, question, history, max_queries, catalog)


async def aexpand(
    expander: BaseChatModel,
    question: str,
    history: Sequence[tuple[str, str]],
    *,
    max_queries: int,
    catalog: Catalog,
    run_manager: AsyncCallbackManagerForRetrieverRun,
) -> Expansion:
    """:func:`expand`, asynchronously."""
    messages, config = _expander_call(question, history, max_queries, catalog, run_manager)
    try:
        reply = await expander.ainvoke(messages, config=config)
    except EventHandlerError:
        raise
    except Exception as error:  # CancelledError is not an Exception: it propagates
        return _fallback(question, history, error, catalog)
    return _expansion_from(reply, question, history, max_queries, catalog)
