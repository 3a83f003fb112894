"""The fixed texts a user reads (refusals, "nothing found", headings), in each language.

One YAML file per language in ``texts/`` beside this module, shipped as package data, so a
translator adds or corrects a language without touching code. English (``texts/en.yaml``) is
the source: it names every key, and its text stands in for a language or a key not
translated.
"""

from __future__ import annotations

import functools
import string
from collections.abc import Mapping
from importlib import resources
from types import MappingProxyType

import yaml

from pipelines.language._tags import DEFAULT_LANGUAGE, normalize_language

__all__ = ["fixed_text", "placeholders"]


def placeholders(template: str) -> frozenset[str]:
    """The ``{fields}`` ``template`` fills in, as written ("{collections}" -> "collections")."""
    return frozenset(
        field for _, field, _, _ in string.Formatter().parse(template) if field is not None
    )


# Read once per language per process: the files are package data and do not change under a
# running server.
@functools.cache
def _texts(language: str) -> Mapping[str, str]:
    """The texts of ``language`` (a supported primary tag) by key; empty without a file."""
    resource = resources.files("pipelines.language") / "texts" / f"{language}.yaml"
    if not resource.is_file():
        return MappingProxyType({})
    loaded = yaml.safe_load(resource.read_text(encoding="utf-8")) or {}
    # A translator's slip (a list, a number, a nested key) is named at load, with its file,
    # rather than surfacing as a garbled refusal.
    if not isinstance(loaded, dict) or not all(
        isinstance(key, str) and isinstance(text, str) for key, text in loaded.items()
    ):
        raise ValueError(f"texts/{language}.yaml must map each key to one string")
    return MappingProxyType(loaded)


def fixed_text(key: str, language: str, **fields: str) -> str:
    """The text ``key`` in ``language`` (any tag :func:`normalize_language` reads: "es",
    "pt-BR"), its placeholders filled from ``fields``. English stands in for an unsupported
    language and for a key the language's file lacks or leaves empty; a key English lacks is
    a :class:`KeyError`, and so is a placeholder missing from ``fields``."""
    english = _texts(DEFAULT_LANGUAGE)
    if key not in english:
        raise KeyError(f"no fixed text {key!r}; the keys are {', '.join(sorted(english))}")
    primary = normalize_language(language)
    chosen = _texts(primary).get(key) if primary is not None else None
    template = chosen or english[key]
    missing = placeholders(template) - fields.keys()
    if missing:
        raise KeyError(f"fixed text {key!r} needs {', '.join(sorted(missing))}")
    return template.format_map(fields)
