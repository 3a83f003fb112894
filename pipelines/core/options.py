"""What a caller may ask of one answer besides the question, as one typed object.

The entry points (the pipeline's four methods, its Runnable, the HTTP request models) build a
:class:`RequestOptions`; the chain hands it to the retriever unchanged, so an option is
spelled, typed and defaulted in one place from the caller down to the search. The four
methods take the options as keywords typed by :class:`AskOptions` (PEP 692), which names the
same fields for type checkers; a test keeps the two alike (decision 0040).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from pipelines.core.errors import InputError
from pipelines.language import SUPPORTED_LANGUAGES, normalize_language

__all__ = ["AskOptions", "History", "RequestOptions", "asked_options", "checked_language"]

History = Sequence[tuple[str, str]]


@dataclass(frozen=True, kw_only=True)
class RequestOptions:
    """One request's options.

    ``history``: earlier turns, ``(role, text)`` pairs, oldest first. ``collections``: search
    only these (None: the router chooses). ``cite_urls``: number user-guide pages as sources
    (None: the setting decides). ``live_citations``: tokens carry their final markers
    (docs/contract.md). ``language``: the asker's language as a BCP 47 tag ("es", "pt-BR":
    the primary tag of a supported language is kept; None: detected from the question), the
    answer's language and its fixed texts'. ``traceparent`` and ``tracestate``: the W3C
    Trace Context headers of a caller whose trace the answer joins, when tracing is on (None:
    the current OpenTelemetry span's, else a new trace). ``surface`` is set by the entry point
    (``http``, ``sse``, ``openai``, ``ai_sdk``, ``mcp``, ``cli``, ``runnable``; None:
    ``python``), and ``versions`` by the pipeline, never by a caller: the collection versions
    the request's log header names, which the search then reads."""

    history: tuple[tuple[str, str], ...] = ()
    collections: tuple[str, ...] | None = None
    cite_urls: bool | None = None
    live_citations: bool = False
    language: str | None = None
    traceparent: str | None = None
    tracestate: str | None = None
    surface: str | None = None
    versions: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        # Callers pass lists (JSON has no tuples); the object stays hashable and immutable.
        object.__setattr__(self, "history", tuple(_turn(turn) for turn in self.history))
        if self.collections is not None:
            object.__setattr__(self, "collections", tuple(self.collections) or None)
        if self.language is not None:
            object.__setattr__(self, "language", checked_language(self.language))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> RequestOptions:
        """The options in a plain mapping (a Runnable's input, minus its question); a key
        given as None counts as absent. Unknown keys are an :class:`InputError` naming them."""
        accepted = [f.name for f in dataclasses.fields(cls) if f.name not in _SET_INSIDE]
        unknown = sorted(set(values) - set(accepted))
        if unknown:
            raise InputError(
                f"the input has keys it does not take: {', '.join(unknown)}",
                fix=f"use question, {', '.join(accepted)}",
            )
        return cls(**{key: value for key, value in values.items() if value is not None})

    def pinned_to(self, versions: Mapping[str, str] | None) -> RequestOptions:
        """These options, searching the given collection versions."""
        return dataclasses.replace(self, versions=versions)


# Fields the entry points and the pipeline set, never a caller's options.
_SET_INSIDE = frozenset({"surface", "versions"})


def checked_language(value: object) -> str:
    """A request's ``language`` as the supported primary tag it names, or an
    :class:`InputError` naming the value and the languages there are."""
    tag = normalize_language(value) if isinstance(value, str) else None
    if tag is None:
        raise InputError(
            f"language {str(value)[:40]!r} is not one we answer in",
            fix=f"give one of {', '.join(SUPPORTED_LANGUAGES)}, or none to detect it",
        )
    return tag


def _turn(turn: Any) -> tuple[str, str]:
    if isinstance(turn, Mapping):
        return str(turn.get("role")), str(turn.get("content"))
    role, content = turn
    return str(role), str(content)


class AskOptions(TypedDict, total=False):
    """:class:`RequestOptions` as a caller of ``stream``, ``invoke``, ``astream`` and
    ``ainvoke`` spells them (``**options: Unpack[AskOptions]``): every field but ``surface``
    and ``versions``, which only the entry points and the pipeline set. What each means is
    :class:`RequestOptions`' docstring."""

    history: History
    collections: Sequence[str] | None
    cite_urls: bool | None
    live_citations: bool
    language: str | None
    traceparent: str | None
    tracestate: str | None


def asked_options(options: AskOptions) -> RequestOptions:
    """The :class:`RequestOptions` of a method's keyword options; a keyword it does not take
    is a ``TypeError`` at the call, as a misspelt keyword of a written-out signature was."""
    unknown = sorted(set(options) - set(AskOptions.__annotations__))
    if unknown:
        raise TypeError(f"got an unexpected keyword argument {unknown[0]!r}")
    given: dict[str, Any] = dict(options)  # sequences: RequestOptions makes them tuples
    return RequestOptions(**given)
