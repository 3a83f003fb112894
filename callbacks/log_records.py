"""What a log's callback records say beyond its events: the searches, the candidates, the
answer model's input and its raw text.

Every reader here is tolerant: a log altered by hand can hold anything where we wrote an
object, so a record of the wrong shape reads as absent rather than failing whoever shows it
(``replay``, ``logs show``, the log page).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from callbacks.finish_record import FinishRecord
from callbacks.log import LogContents
from pipelines.core.tags import ANSWER_TAG, EXPANSION_RECORD, RETRIEVAL_RECORD
from pipelines.retrieval.retrieval_record import RetrievalRecord

__all__ = [
    "answer_run_ids",
    "custom_data",
    "mapping",
    "model_input",
    "model_raw_text",
    "read_retrieval_record",
    "searched_queries",
]


def mapping(value: object) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return dict(value) if isinstance(value, Mapping) else {}


def custom_data(contents: LogContents, name: str) -> dict[str, Any] | None:
    """The data of the last custom event ``name`` the log recorded, or None."""
    found: dict[str, Any] | None = None
    for record in contents.callbacks:
        if record.get("hook") == "custom_event" and record.get("name") == name:
            found = mapping(record.get("data"))
    return found


def searched_queries(contents: LogContents) -> list[str]:
    """The queries the retriever searched for, the standalone question first."""
    queries = mapping(custom_data(contents, EXPANSION_RECORD)).get("queries")
    return [str(query) for query in queries] if isinstance(queries, list) else []


def read_retrieval_record(contents: LogContents) -> RetrievalRecord | None:
    """The retriever's candidates and their outcomes (``reactome-answers:retrieval``), read
    by :meth:`RetrievalRecord.read`'s one tolerance rule; None for a log written before the
    retriever recorded them, or by another retriever."""
    data = custom_data(contents, RETRIEVAL_RECORD)
    return None if data is None else RetrievalRecord.read(data)


def answer_run_ids(contents: LogContents) -> list[str]:
    """The run ids of the answer model's runs, in the order they started."""
    return [
        str(record.get("run_id"))
        for record in contents.callbacks
        if record.get("hook") == "model_start"
        and isinstance(record.get("tags"), list)
        and ANSWER_TAG in record["tags"]
    ]


def model_input(contents: LogContents) -> list[dict[str, str]] | None:
    """The answer model's input as it was sent: a chat model's messages (``role``,
    ``content``), or a completion model's prompts as ``user`` messages. None when the model
    was never asked (a refusal, nothing found) or the log predates recording it."""
    for record in contents.callbacks:
        if record.get("hook") != "model_start" or ANSWER_TAG not in (record.get("tags") or ()):
            continue
        messages = record.get("messages")
        if isinstance(messages, list):
            return [
                {"role": str(mapping(m).get("role", "")), "content": str(mapping(m).get("content"))}
                for m in messages
            ]
    return None


def model_raw_text(contents: LogContents) -> str | None:
    """What the answer model wrote, before its markers were finalized: its streamed tokens,
    or the reply of a model that did not stream. None when it was never asked."""
    runs = set(answer_run_ids(contents))
    if not runs:
        return None
    tokens = [
        str(record.get("token", ""))
        for record in contents.callbacks
        if record.get("hook") == "llm_new_token" and str(record.get("run_id")) in runs
    ]
    if tokens:
        return "".join(tokens)
    for record in contents.callbacks:
        if record.get("hook") == "finish":
            text = FinishRecord.read(record).text
            if text is not None:
                return text
    return ""
