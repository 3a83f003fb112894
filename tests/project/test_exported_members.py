"""The public surface of each package, pinned as httpx pins its own (its
tests/test_exported_members.py): every public name a package's ``__init__`` defines or imports
is in its ``__all__``, ``__all__`` is sorted the way ruff's RUF022 sorts it, and every name in
``__all__`` resolves, lazy re-exports (pipelines/core/lazy.py) included.

The packages are found on disk (every folder with an ``__init__.py`` under ``pipelines/`` and
``callbacks/`` and ``app/``), so a new subpackage is covered without an edit here.
"""

from __future__ import annotations

import ast
import importlib
import random
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
PUBLIC_TOP = ("pipelines", "callbacks", "app")
# Names an ``__init__`` imports for its own machinery, not to offer: ``from __future__ import
# annotations``, ``TYPE_CHECKING`` for the imports only type checkers see, and the helper that
# builds a lazy ``__getattr__``.
MACHINERY = frozenset({"annotations", "TYPE_CHECKING", "lazy_attributes"})


def packages(root: Path, tops: tuple[str, ...] = PUBLIC_TOP) -> dict[str, Path]:
    """Each package under ``root/top`` by its dotted name, with its ``__init__.py``."""
    found = {}
    for top in tops:
        for init in sorted((root / top).rglob("__init__.py")):
            found[".".join(init.parent.relative_to(root).parts)] = init
    return found


def _bindings(body: list[ast.stmt]) -> Iterator[str]:
    """The names a module body binds at its top level, inside ``if`` and ``try`` blocks too
    (the imports under ``if TYPE_CHECKING:`` are how a lazy re-export is declared)."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                yield alias.asname or alias.name.partition(".")[0]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                yield from (n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.If | ast.Try):
            yield from _bindings(node.body)
            yield from _bindings(node.orelse)
            if isinstance(node, ast.Try):
                yield from _bindings(node.finalbody)
                for handler in node.handlers:
                    yield from _bindings(handler.body)


def bound_names(init: Path) -> set[str]:
    return set(_bindings(ast.parse(init.read_text(encoding="utf-8")).body))


def public_names(package: ModuleType, init: Path) -> set[str]:
    """What ``init`` defines or imports for users: not private, not machinery, not a
    submodule."""
    return {
        name
        for name in bound_names(init)
        if not name.startswith("_")
        and name not in MACHINERY
        and not isinstance(getattr(package, name, None), ModuleType)
    }


def ruff_sort_key(name: str) -> tuple[int, list[str | int]]:
    """RUF022's isort-style order: SCREAMING_SNAKE_CASE, then CamelCase, then the rest, each
    in natural order (``a2`` before ``a10``), case-sensitive."""
    if len(name) > 1 and name.isupper():
        kind = 0
    elif name[:1].isupper():
        kind = 1
    else:
        kind = 2
    natural: list[str | int] = [
        int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)
    ]
    return kind, natural


def surface_problems(name: str, init: Path) -> list[str]:
    """What is wrong with package ``name``'s ``__all__``, one line each."""
    package = importlib.import_module(name)
    exported = getattr(package, "__all__", None)
    if not isinstance(exported, list):
        return [f"{name}: no __all__ list"]
    problems = [
        f"{name}: {missing} is public in its __init__ but not in __all__"
        for missing in sorted(public_names(package, init) - set(exported))
    ]
    if exported != sorted(exported, key=ruff_sort_key):
        problems.append(f"{name}: __all__ is not sorted (ruff check --select RUF022 --fix)")
    if len(set(exported)) != len(exported):
        problems.append(f"{name}: __all__ names something twice")
    # What type checkers see: a lazy re-export is imported under ``if TYPE_CHECKING:``.
    problems += [
        f"{name}: {listed} is in __all__ but its __init__ neither defines nor imports it"
        for listed in exported
        if listed not in bound_names(init)
    ]
    for listed in exported:
        try:
            getattr(package, listed)
        except AttributeError:
            problems.append(f"{name}: {listed} is in __all__ but does not resolve")
    return problems


PACKAGES = packages(ROOT)


def test_every_package_is_found() -> None:
    assert {
        "pipelines",
        "pipelines.core",
        "pipelines.citations",
        "pipelines.catalog",
        "pipelines.catalog.loaders",
        "pipelines.index",
        "pipelines.retrieval",
        "pipelines.answering",
        "pipelines.pipeline",
        "callbacks",
    } <= set(PACKAGES)


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_all_lists_the_public_names_sorted(name: str) -> None:
    problems = surface_problems(name, PACKAGES[name])
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_a_name_shared_with_a_submodule_stays_the_name_once_the_submodule_is_imported(
    name: str,
) -> None:
    # Importing ``package.x`` sets the package's attribute ``x`` to the module, and that beats a
    # lazy ``__getattr__``: a public ``x`` must be bound in the package itself, or renamed.
    package = importlib.import_module(name)
    folder = PACKAGES[name].parent
    for public in getattr(package, "__all__", ()):
        if (folder / f"{public}.py").is_file() or (folder / public / "__init__.py").is_file():
            submodule = importlib.import_module(f"{name}.{public}")
            if isinstance(getattr(submodule, public, None), ModuleType | None):
                continue  # the public name is the submodule itself
            assert getattr(package, public) is getattr(submodule, public), f"{name}.{public}"


def test_the_check_finds_each_kind_of_break(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {
        "probe_surface/__init__.py": (
            "from __future__ import annotations\n"
            "from typing import TYPE_CHECKING\n"
            "from pipelines.core.lazy import lazy_attributes\n"
            "from probe_surface import helpers\n"  # a submodule: not a name to export
            "from probe_surface.helpers import LIMIT, Widget, make, forgotten\n"
            "if TYPE_CHECKING:\n"
            "    from probe_surface.heavy import lazily_forgotten, broken\n"
            "__all__ = ['Widget', 'LIMIT', 'broken', 'make', 'unseen', 'vanished']\n"
            "__getattr__ = lazy_attributes(\n"
            "    __name__, dict.fromkeys(['broken', 'unseen'], 'probe_surface.heavy')\n"
            ")\n"
        ),
        "probe_surface/helpers.py": "LIMIT = 1\nclass Widget: ...\ndef make(): ...\n"
        "def forgotten(): ...\n",
        # ``broken`` is in the lazy map, but its module does not define it; ``unseen``
        # resolves, but type checkers do not see it
        "probe_surface/heavy.py": "def lazily_forgotten(): ...\ndef unseen(): ...\n",
        "probe_surface/fine/__init__.py": "from probe_surface.helpers import make\n"
        "__all__ = ['make']\n",
    }
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        found = packages(tmp_path, ("probe_surface",))
        assert set(found) == {"probe_surface", "probe_surface.fine"}
        assert surface_problems("probe_surface.fine", found["probe_surface.fine"]) == []
        assert surface_problems("probe_surface", found["probe_surface"]) == [
            "probe_surface: forgotten is public in its __init__ but not in __all__",
            "probe_surface: lazily_forgotten is public in its __init__ but not in __all__",
            "probe_surface: __all__ is not sorted (ruff check --select RUF022 --fix)",
            "probe_surface: unseen is in __all__ but its __init__ neither defines nor imports it",
            "probe_surface: vanished is in __all__ but its __init__ neither defines nor imports it",
            "probe_surface: broken is in __all__ but does not resolve",
            "probe_surface: vanished is in __all__ but does not resolve",
        ]
    finally:
        for module in [m for m in sys.modules if m.partition(".")[0] == "probe_surface"]:
            del sys.modules[module]


def test_the_sort_is_ruffs() -> None:
    # The order `ruff check --select RUF022 --fix` (ruff 0.17) gives these names.
    ruffs = [
        "B2B", "HTTP_URL", "IS_OK", "MINILM_NAME", "MINILM_Q8_NAME", "X1",
        "A", "A_b", "Ab", "Is_ok", "LoadResult", "LoadedDocument",
        "_x", "a2", "a10", "aB", "ab", "isOk", "is_ok", "zeta",
    ]  # fmt: skip
    shuffled = random.Random(25).sample(ruffs, len(ruffs))
    assert sorted(shuffled, key=ruff_sort_key) == ruffs


# --- one meaning per name -------------------------------------------------------------------

# What every command module defines for the registry (app.cli.registry.CommandModule): the
# same names by design, one module per command.
COMMAND_MODULES = "app.cli.commands."
COMMAND_PROTOCOL = frozenset({"SUMMARY", "add_arguments", "run"})


def public_definitions(root: Path) -> dict[str, list[str]]:
    """Each public class and function defined at the top of a module under ``root``'s
    ``pipelines/``, ``callbacks/`` and ``app/``, with the modules that define it."""
    found: dict[str, list[str]] = {}
    for top in PUBLIC_TOP:
        for path in sorted((root / top).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                definition = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
                if not isinstance(node, definition) or node.name.startswith("_"):
                    continue
                if module.startswith(COMMAND_MODULES) and node.name in COMMAND_PROTOCOL:
                    continue
                found.setdefault(node.name, []).append(module)
    return found


def test_no_two_modules_define_a_public_class_or_function_of_one_name() -> None:
    twice = {
        name: modules for name, modules in public_definitions(ROOT).items() if len(modules) > 1
    }
    assert twice == {}, "rename one of each, so that a name says one thing"


def test_the_name_check_finds_a_name_defined_twice(tmp_path: Path) -> None:
    files = {
        "pipelines/pipeline/_request.py": "class AnswerRequest: ...\ndef _helper(): ...\n",
        "app/http/models.py": "class AnswerRequest: ...\ndef _helper(): ...\n",
        "app/cli/commands/ask.py": "def run(): ...\n",
        "app/cli/commands/chat.py": "def run(): ...\n",
        "callbacks/log.py": "def run(): ...\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    twice = {
        name: modules for name, modules in public_definitions(tmp_path).items() if len(modules) > 1
    }
    assert twice == {"AnswerRequest": ["pipelines.pipeline._request", "app.http.models"]}
