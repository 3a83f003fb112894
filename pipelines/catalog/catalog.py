"""Collections as data: each one is declared by ``<folder>/<name>/collection.toml``.

The bundled collections live in the project's ``collections/`` folder (or its installed copy);
the folders named in ``REACTOME_ANSWERS_COLLECTIONS_PATH`` add more. A declaration says which
loader reads the collection and which files it takes, how the files are downloaded, how the
collection's documents are cited, and what the router needs to send questions to it. No other
module names a collection: they all ask the :class:`Catalog`.

    name = "glossary"                    # the folder's name
    label = "glossary"                   # how a sentence names it ("nothing in ... answers")
    description = "..."                  # one line, for people and for a routing model
    order = 40                           # where it is ingested, listed and searched
    loader = "package.module:function"   # called with one keyword argument per file role
    cited_as = "st_id"                   # "st_id", "url" or "context" (never cited)
    download = "release"                 # or "package.module:function"; absent: --from only

    [files.terms]                        # role -> the loader's keyword argument
    name = "terms.tsv"                   # one file ... or: patterns = ["*.md", "*.html"]
    required = true                      # (a folder holding files like these)
    about = "one term and its definition per row"

    [routing]
    prompt = "questions about what a term means"  # told to a routing model
    default = false                      # searched for any question no exclusive one claims
    exclusive = false                    # when its hints match, search only such collections
    hints = ['\\bglossary\\b']           # regular expressions (case-insensitive) choosing it
    also = []                            # regular expressions adding it after the others
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import sys
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from pipelines.core.errors import ConfigurationError, InputError
from pipelines.core.redaction import one_line
from pipelines.language import DEFAULT_LANGUAGE, detect_language, fixed_text

__all__ = [
    "COLLECTION_NAMES",
    "Catalog",
    "CollectionDefinition",
    "FileSpec",
    "Routing",
    "bundled_dir",
    "catalog_for",
    "catalog_from_path",
    "load_catalog",
    "load_definitions",
]

CitedAs = Literal["st_id", "url", "context"]
_CITED_AS = ("st_id", "url", "context")
_KEYS = {
    "name",
    "label",
    "description",
    "order",
    "loader",
    "cited_as",
    "download",
    "files",
    "routing",
}
_FILE_KEYS = {"name", "patterns", "required", "about"}
_ROUTING_KEYS = {"prompt", "default", "exclusive", "hints", "also"}
_NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,62}")
_IMPORTABLE_RE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


@dataclass(frozen=True)
class FileSpec:
    """One input of a loader: a file by name, or a folder holding files like ``patterns``."""

    role: str
    name: str | None
    patterns: tuple[str, ...]
    required: bool
    about: str

    def find(self, folders: Sequence[Path]) -> Path | None:
        """The first of ``folders`` that has this file (or such files), as the loader takes it."""
        for folder in folders:
            if self.name is not None:
                if (folder / self.name).is_file():
                    return folder / self.name
            elif folder.is_dir() and any(self.matches(path) for path in folder.iterdir()):
                return folder
        return None

    def matches(self, path: Path) -> bool:
        # A folder's README is about the files beside it, never one of them.
        return path.name.lower() != "readme.md" and any(
            path.match(pattern) for pattern in self.patterns
        )

    def describe(self) -> str:
        return self.name or f"files like {', '.join(self.patterns)}"


@dataclass(frozen=True)
class Routing:
    prompt: str
    default: bool
    exclusive: bool
    hints: tuple[re.Pattern[str], ...]
    also: tuple[re.Pattern[str], ...]

    def hinted(self, question: str) -> bool:
        return any(hint.search(question) for hint in self.hints)

    def added(self, question: str) -> bool:
        return any(pattern.search(question) for pattern in self.also)


@dataclass(frozen=True)
class CollectionDefinition:
    name: str
    label: str
    description: str
    order: int
    folder: Path
    loader: str
    cited_as: CitedAs
    download: str | None
    files: tuple[FileSpec, ...]
    routing: Routing

    @property
    def path(self) -> Path:
        return self.folder / "collection.toml"

    def load_function(self) -> Callable[..., Any]:
        """The loader, imported; called with one keyword argument per file role."""
        return _import(self.loader, self.path, "loader")

    def download_function(self) -> Callable[..., Any] | None:
        """The downloader for a ``download = "module:function"`` collection, else ``None``."""
        if self.download is None or self.download == "release":
            return None
        return _import(self.download, self.path, "download")


class Catalog:
    """The collections one process knows, in their declared order."""

    def __init__(self, definitions: Sequence[CollectionDefinition]) -> None:
        ordered = sorted(definitions, key=lambda d: (d.order, d.name))
        self._by_name = {definition.name: definition for definition in ordered}

    def __iter__(self) -> Any:
        return iter(self._by_name.values())

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __getitem__(self, name: str) -> CollectionDefinition:
        return self._by_name[name]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    def check(self, names: Sequence[str]) -> list[str]:
        """``names`` as a list, or an :class:`InputError` naming the ones not declared."""
        unknown = [name for name in names if name not in self._by_name]
        if unknown:
            raise InputError(
                f"unknown collection(s) {', '.join(unknown)}",
                fix=f"choose from {', '.join(self.names)}",
            )
        return list(names)

    @property
    def default_names(self) -> list[str]:
        """What a question is searched in when nothing more specific is chosen."""
        return [d.name for d in self if d.routing.default] or list(self.names)

    def route(self, question: str) -> list[str]:
        """The collections a question needs, by the declared hints: collections whose hints
        match come first; an exclusive one that matches takes the question alone (with any
        other exclusive match); the defaults follow; ``also`` patterns add theirs last.

        The hints are English words: a question in another language goes to every
        collection a question can be routed to (a default, or one with hints), and the
        ranking's collection margin keeps the ones near it (decision 0037)."""
        if detect_language(question) != DEFAULT_LANGUAGE:
            routable = [d.name for d in self if d.routing.default or d.routing.hints]
            return routable or list(self.names)
        return self.route_by_hints(question)

    def route_by_hints(self, question: str) -> list[str]:
        """:meth:`route` by the declared hints alone, whatever the question's language (the
        advice gate asks whether a question reads as one about the website)."""
        exclusive = [d.name for d in self if d.routing.exclusive and d.routing.hinted(question)]
        if exclusive:
            return exclusive
        chosen = [d.name for d in self if not d.routing.exclusive and d.routing.hinted(question)]
        chosen += [d.name for d in self if d.routing.default and d.name not in chosen]
        chosen += [d.name for d in self if d.name not in chosen and d.routing.added(question)]
        return chosen or list(self.names)

    def nothing_found(self, language: str = DEFAULT_LANGUAGE) -> str:
        """What an answer says when no collection had anything relevant, in ``language``
        (the collections keep the labels they are declared with)."""
        labels = [d.label for d in self]
        named = labels[-1]
        if len(labels) > 1:
            first = fixed_text("list_separator", language).join(labels[:-1])
            named = fixed_text("list_or", language, first=first, last=labels[-1])
        return fixed_text("nothing_found", language, collections=named)


def bundled_dir() -> Path:
    """The bundled collections: ``collections/`` in a source checkout, or the copy installed
    as data files (``<scheme>/share/reactome-answers/collections``, where the scheme is the
    prefix the package was installed under: a venv, ``--user``, ``--prefix``, /usr/local)."""
    here = Path(__file__).resolve()
    candidates = [here.parents[2] / "collections"]
    shared = Path("share") / "reactome-answers" / "collections"
    candidates += [ancestor / shared for ancestor in here.parents]
    candidates.append(Path(sys.prefix) / shared)
    for candidate in candidates:
        if any(candidate.glob("*/collection.toml")):
            return candidate
    raise InputError(
        "the bundled collections are missing from this installation",
        fix="reinstall reactome-answers",
    )


def load_definitions(directory: Path) -> dict[str, CollectionDefinition]:
    """Every ``<directory>/<name>/collection.toml``, keyed by collection name."""
    definitions = {}
    for path in sorted(directory.glob("*/collection.toml")):
        definition = _read_definition(path)
        definitions[definition.name] = definition
    return definitions


def load_catalog(extra_folders: Sequence[Path] = ()) -> Catalog:
    """The bundled collections plus those declared under each of ``extra_folders``."""
    return _catalog(tuple(Path(folder).resolve() for folder in extra_folders))


def catalog_for(settings: Any = None) -> Catalog:
    """The catalog for ``settings`` (its ``collections_path``), else for the settings the
    environment gives (read as :func:`pipelines.core.settings.load_settings` reads them)."""
    if settings is None:
        from pipelines.core.settings import load_settings

        settings = load_settings()
    return catalog_from_path(settings.collections_path)


def catalog_from_path(collections_path: str) -> Catalog:
    """The catalog for a ``collections_path`` setting: folders separated by ``os.pathsep``."""
    # Asked several times per request; resolving the folders each time cost more than the
    # rest of routing. Relative folders resolve against the working directory, hence its key.
    return _catalog_for_path(collections_path, Path.cwd())


@functools.lru_cache(maxsize=64)
def _catalog_for_path(collections_path: str, working_directory: Path) -> Catalog:
    parts = collections_path.split(os.pathsep)
    return load_catalog([working_directory / part.strip() for part in parts if part.strip()])


@functools.cache
def _catalog(extra_folders: tuple[Path, ...]) -> Catalog:
    found: dict[str, CollectionDefinition] = {}
    for folder in (bundled_dir(), *extra_folders):
        if not folder.is_dir():
            raise ConfigurationError(
                f"collections folder {folder} does not exist",
                fix="set REACTOME_ANSWERS_COLLECTIONS_PATH to folders holding "
                "<name>/collection.toml",
            )
        for name, definition in load_definitions(folder).items():
            if name in found:
                raise ConfigurationError(
                    f"collection {name!r} is declared twice: {found[name].path} and "
                    f"{definition.path}",
                    fix="rename one of them (the folder and its name key)",
                )
            found[name] = definition
    return Catalog(list(found.values()))


# --- reading one declaration ------------------------------------------------------------------


def _bad(path: Path, key: str, problem: str) -> ConfigurationError:
    return ConfigurationError(
        f"{path}: {key}: {problem}", fix="correct the collection's declaration (docs/extending.md)"
    )


def _string(raw: Mapping[str, Any], key: str, path: Path, *, where: str = "") -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise _bad(path, where + key, "must be a non-empty string")
    return value.strip()


def _flag(raw: Mapping[str, Any], key: str, path: Path, *, where: str) -> bool:
    value = raw.get(key, False)
    if not isinstance(value, bool):
        raise _bad(path, where + key, "must be true or false")
    return value


def _unknown_keys(raw: Mapping[str, Any], allowed: set[str], path: Path, where: str) -> None:
    extra = sorted(set(raw) - allowed)
    if extra:
        raise _bad(
            path, where + extra[0], f"is not a known key (known: {', '.join(sorted(allowed))})"
        )


def _patterns(raw: Mapping[str, Any], key: str, path: Path) -> tuple[re.Pattern[str], ...]:
    values = raw.get(key, [])
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise _bad(path, f"routing.{key}", "must be a list of regular expressions")
    compiled = []
    for value in values:
        try:
            compiled.append(re.compile(value, re.IGNORECASE))
        except re.error as error:
            raise _bad(
                path, f"routing.{key}", f"{value!r} is not a regular expression ({error})"
            ) from error
    return tuple(compiled)


def _files(raw: Any, path: Path) -> tuple[FileSpec, ...]:
    if not isinstance(raw, dict) or not raw:
        raise _bad(path, "files", "must be a table of file roles, [files.<role>]")
    specs = []
    for role, spec in raw.items():
        where = f"files.{role}."
        if not role.isidentifier() or not isinstance(spec, dict):
            raise _bad(path, f"files.{role}", "must be a table named like a Python argument")
        _unknown_keys(spec, _FILE_KEYS, path, where)
        name = spec.get("name")
        patterns = spec.get("patterns")
        if (name is None) == (patterns is None):
            raise _bad(path, f"files.{role}", "needs exactly one of name or patterns")
        if name is not None and (not isinstance(name, str) or "/" in name or not name.strip()):
            raise _bad(path, where + "name", "must be a file name")
        if patterns is not None and (
            not isinstance(patterns, list)
            or not patterns
            or not all(isinstance(p, str) and p for p in patterns)
        ):
            raise _bad(path, where + "patterns", "must be a list of file name patterns")
        specs.append(
            FileSpec(
                role=role,
                name=name,
                patterns=tuple(patterns or ()),
                required=_flag(spec, "required", path, where=where),
                about=_string(spec, "about", path, where=where),
            )
        )
    if not any(spec.required for spec in specs):
        raise _bad(path, "files", "at least one file must be required = true")
    return tuple(specs)


def _read_definition(path: Path) -> CollectionDefinition:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ConfigurationError(
            f"{path}: cannot be read as TOML ({error})",
            fix="correct the collection's declaration (docs/extending.md)",
        ) from error
    _unknown_keys(raw, _KEYS, path, "")
    name = _string(raw, "name", path)
    if name != path.parent.name or not _NAME_RE.fullmatch(name):
        raise _bad(
            path,
            "name",
            f"must be the folder's name ({path.parent.name!r}): lower case letters, digits, _",
        )
    cited_as = raw.get("cited_as")
    if cited_as not in _CITED_AS:
        raise _bad(path, "cited_as", f"must be one of {', '.join(_CITED_AS)}")
    order = raw.get("order", 100)
    if not isinstance(order, int) or isinstance(order, bool):
        raise _bad(path, "order", "must be a whole number")
    for key in ("loader", "download"):
        value = raw.get(key)
        if key == "download" and value in (None, "release"):
            continue
        if not isinstance(value, str) or not _IMPORTABLE_RE.fullmatch(value):
            raise _bad(path, key, "must be an importable name, package.module:function")
    routing = raw.get("routing", {})
    if not isinstance(routing, dict):
        raise _bad(path, "routing", "must be a table")
    _unknown_keys(routing, _ROUTING_KEYS, path, "routing.")
    definition = CollectionDefinition(
        name=name,
        label=_string(raw, "label", path),
        description=_string(raw, "description", path),
        order=order,
        folder=path.parent.resolve(),
        loader=raw["loader"],
        cited_as=cast(CitedAs, cited_as),
        download=raw.get("download"),
        files=_files(raw.get("files"), path),
        routing=Routing(
            prompt=_string(routing, "prompt", path, where="routing."),
            default=_flag(routing, "default", path, where="routing."),
            exclusive=_flag(routing, "exclusive", path, where="routing."),
            hints=_patterns(routing, "hints", path),
            also=_patterns(routing, "also", path),
        ),
    )
    definition.load_function()  # an unknown loader is named now, not in the middle of an ingest
    return definition


def _import(target: str, path: Path, key: str) -> Callable[..., Any]:
    module_name, _, attribute = target.partition(":")
    try:
        function = getattr(importlib.import_module(module_name), attribute)
    except Exception as error:  # a syntax error or a failing import in the module too
        raise _bad(
            path, key, f"{target!r} cannot be imported ({type(error).__name__}: {one_line(error)})"
        ) from error
    if not callable(function):
        raise _bad(path, key, f"{target!r} is not a function")
    return cast(Callable[..., Any], function)


if TYPE_CHECKING:
    COLLECTION_NAMES: tuple[str, ...]


def __getattr__(name: str) -> Any:
    # COLLECTION_NAMES, the bundled collections' names in their declared order (for code
    # that needs no others), is read on first use: importing this module reads no files.
    if name == "COLLECTION_NAMES":
        return load_catalog().names
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
