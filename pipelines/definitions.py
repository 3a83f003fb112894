"""Each collection's definition, read from ``collections/<name>/collection.toml``."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

from pipelines.errors import ConfigurationError, InputError

__all__ = ["COLLECTION_NAMES", "CollectionDefinition", "check_collection_names", "load_definitions"]

# The collections the pipeline knows, in the order they are ingested and listed.
COLLECTION_NAMES = ("reactome", "disease_variants", "userguide")


def check_collection_names(names: Sequence[str]) -> list[str]:
    """``names`` as a list, or an :class:`InputError` naming the ones we do not know."""
    unknown = [name for name in names if name not in COLLECTION_NAMES]
    if unknown:
        raise InputError(
            f"unknown collection(s) {', '.join(unknown)}",
            fix=f"choose from {', '.join(COLLECTION_NAMES)}",
        )
    return list(names)


@dataclass(frozen=True)
class CollectionDefinition:
    name: str
    description: str
    files: tuple[str, ...]
    document: str
    cited_as: Literal["st_id", "url"]


def load_definitions(directory: Path) -> dict[str, CollectionDefinition]:
    """Every ``<directory>/<name>/collection.toml``, keyed by collection name."""
    definitions = {}
    for path in sorted(directory.glob("*/collection.toml")):
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
            definition = CollectionDefinition(
                name=str(raw["name"]),
                description=str(raw["description"]),
                files=tuple(str(name) for name in raw["files"]),
                document=str(raw["document"]),
                cited_as=cast(Literal["st_id", "url"], str(raw["cited_as"])),
            )
        except (tomllib.TOMLDecodeError, KeyError, TypeError) as error:
            raise ConfigurationError(
                f"{path} is not a valid collection definition ({error!r})",
                fix="restore it from the repository",
            ) from error
        if definition.name != path.parent.name or definition.cited_as not in ("st_id", "url"):
            raise ConfigurationError(
                f"{path}: name must be {path.parent.name!r} and cited_as 'st_id' or 'url'",
                fix="restore it from the repository",
            )
        definitions[definition.name] = definition
    return definitions
