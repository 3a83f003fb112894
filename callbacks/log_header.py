"""The first line of an event log: what was asked, how, and who answered.

:class:`LogHeader` is written by one function (:meth:`LogHeader.record`, through
:class:`callbacks.log.EventLog`) and read by one (:meth:`LogHeader.read`, through
:func:`callbacks.log.read_log`), which every reader of logs uses: replay, rerun, the stats,
the log page, the command line's tables.

One tolerance rule for every field but ``request_id`` (without which a file is no log of
ours): a field that is missing takes its default, and a field holding something this program
never writes is read as missing and named in :attr:`LogHeader.problems`. So a log altered by
hand, or written by an older version, can still be listed, shown and replayed; a reader that
needs the field (a rerun needs the question and its history) refuses the log with the problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LogHeader"]


@dataclass(frozen=True)
class LogHeader:
    request_id: str
    question: str | None = None  # as asked, pasted credentials redacted
    normalized_question: str | None = None  # what the rules and the search read
    history: tuple[tuple[str, str], ...] = ()  # (role, content), oldest first
    collections: tuple[str, ...] = ("auto",)  # as asked; "auto": the expander chose
    releases: Mapping[str, Any] = field(default_factory=dict)  # per collection, its version
    options: Mapping[str, Any] = field(default_factory=dict)  # the start event's options
    settings_digest: str | None = None
    host: str | None = None
    process: int | None = None
    created_at: str | None = None  # ISO 8601, UTC
    # Where the question came from: "http", "sse", "openai", "ai_sdk", "mcp", "cli", "python"
    # or "runnable"; a trace's root span says it too.
    surface: str | None = None
    # The answer's trace, when it was traced: its id (32 hex digits), its root span's id and
    # the caller's span it continues (16 hex digits each), so that a log exported as spans
    # (`logs export --otlp`) lands in the very trace the live answer made.
    trace_id: str | None = None
    span_id: str | None = None
    parent_span_id: str | None = None
    # Each field read as missing because it held what we never write: why, in words.
    problems: Mapping[str, str] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The header as a log writes it (``kind`` and ``schema`` are the writer's)."""
        written: dict[str, Any] = {
            "request_id": self.request_id,
            "question": self.question,
            "normalized_question": self.normalized_question,
            "history": [{"role": role, "content": content} for role, content in self.history],
            "collections": list(self.collections),
            "releases": dict(self.releases),
            "options": dict(self.options),
            "settings_digest": self.settings_digest,
            "host": self.host,
            "process": self.process,
            "created_at": self.created_at,
            "surface": self.surface,
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "parent_span_id": self.parent_span_id,
        }
        return {key: value for key, value in written.items() if value is not None}

    @classmethod
    def read(cls, record: Mapping[str, Any]) -> LogHeader:
        """The header in ``record`` (a log's first line, parsed), by the module's rule
        (:func:`callbacks.log.read_log` reads no file whose ``request_id`` is not text)."""
        problems: dict[str, str] = {}
        request_id = record.get("request_id")
        if not isinstance(request_id, str):
            problems["request_id"] = "its request_id is not text"
            request_id = ""

        def text(key: str) -> str | None:
            value = record.get(key)
            if value is None or isinstance(value, str):
                return value
            problems[key] = f"its {key} is not text"
            return None

        def mapping(key: str) -> Mapping[str, Any]:
            value = record.get(key, {})
            if isinstance(value, dict):
                return value
            problems[key] = f"its {key} are not a mapping"
            return {}

        def hex_id(key: str, digits: int) -> str | None:
            value = record.get(key)
            if value is None or (
                isinstance(value, str) and len(value) == digits and _is_lower_hex(value)
            ):
                return value
            problems[key] = f"its {key} is not {digits} hex digits"
            return None

        process = record.get("process")
        if process is not None and (isinstance(process, bool) or not isinstance(process, int)):
            problems["process"] = "its process is not a process id"
            process = None
        return cls(
            request_id=request_id,
            question=text("question"),
            normalized_question=text("normalized_question"),
            history=_history(record.get("history", []), problems),
            collections=_collections(record.get("collections", ["auto"]), problems),
            releases=mapping("releases"),
            options=mapping("options"),
            settings_digest=text("settings_digest"),
            host=text("host"),
            process=process,
            created_at=text("created_at"),
            surface=text("surface"),
            trace_id=hex_id("trace_id", 32),
            span_id=hex_id("span_id", 16),
            parent_span_id=hex_id("parent_span_id", 16),
            problems=problems,
        )


def _is_lower_hex(value: str) -> bool:
    return all(character in "0123456789abcdef" for character in value)


def _history(value: object, problems: dict[str, str]) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list):
        problems["history"] = "its history is not a list of turns"
        return ()
    turns = []
    for number, turn in enumerate(value, start=1):
        role = turn.get("role") if isinstance(turn, dict) else None
        content = turn.get("content") if isinstance(turn, dict) else None
        if role not in ("user", "assistant") or not isinstance(content, str):
            problems["history"] = f"history turn {number} has no role and content"
            return ()
        turns.append((str(role), content))
    return tuple(turns)


def _collections(value: object, problems: dict[str, str]) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        problems["collections"] = "its collections are not a list of names"
        return ("auto",)
    return tuple(value) or ("auto",)
