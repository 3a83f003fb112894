"""The layering rule, enforced on the source, and the pipeline's typed keyword options.

The code is grouped in subsystems, each a folder, and a subsystem imports only those below it
(the README draws the same order):

    app                      the package's front (``__init__``, ``__main__``)
    app.cli                  the command line: its commands, options, terminal renderers
    app.http                 the HTTP service: its routes, middlewares, protocols
    app.links                where a reference points on the website (both fronts use it)
    pipelines.pipeline       the composition root: joins the pipeline to the events
    callbacks                the event model, the callback handler, event logs and replay
    pipelines.evidence       each citation's claims, the judges and their verdicts
    pipelines.answering      prompts, the extractive model, the models each setting chooses
    pipelines.retrieval      refusal rules, the advice gate, the expander, the retriever
    pipelines.index          the store, chunk tables, keyword index, embeddings, ingestion
    pipelines.catalog        the collections' declarations, their loaders and downloads
    pipelines.citations      numbered sources, the finalizer, live numbering
    pipelines.core           errors, settings, redaction, identifiers, tags, tokens
    pipelines.language       the asker's language: its detection and the fixed texts in it

``pipelines`` itself (its ``__init__``) is the package's front door: it re-exports names from
below and nothing inside the project imports it. Every import counts, at module level, inside
a function or under ``TYPE_CHECKING``.

Inside a subsystem too, no module imports one that imports it, directly or through others
(decision 0038): a module's imports are the project modules it names (``from a.b import c``
names ``a.b.c`` when that is a module, else ``a.b``), not the packages above them."""

from __future__ import annotations

import ast
import dataclasses
import graphlib
from collections.abc import Collection
from pathlib import Path

import pytest
from mypy import api as mypy_api

from pipelines.core.options import AskOptions, RequestOptions
from pipelines.pipeline import AnswerPipeline

ROOT = Path(__file__).resolve().parents[2]
# Lowest first: a subsystem may import only subsystems earlier in this list.
ORDER = (
    "pipelines.language",
    "pipelines.core",
    "pipelines.citations",
    "pipelines.catalog",
    "pipelines.index",
    "pipelines.retrieval",
    "pipelines.answering",
    "pipelines.evidence",
    "callbacks",
    "pipelines.pipeline",
    "app.links",
    "app.http",
    "app.cli",
    "app",
)
FRONT_DOOR = "pipelines"
PROJECT_TOP = ("pipelines", "callbacks", "app")


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(root: Path, path: Path) -> set[str]:
    """Every module ``path`` imports, relative imports resolved."""
    name = module_name(root, path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def subsystem_of(module: str) -> str | None:
    """The subsystem ``module`` belongs to; ``FRONT_DOOR`` for the bare ``pipelines``
    package (a name imported from it, ``pipelines.X``, counts as the front door too);
    None outside the project."""
    for subsystem in ORDER:
        if _within(module, subsystem):
            return subsystem
    if _within(module, FRONT_DOOR):
        return FRONT_DOOR
    return None


def project_modules(root: Path) -> dict[str, Path]:
    return {
        module_name(root, path): path
        for top in PROJECT_TOP
        if (root / top).is_dir()
        for path in sorted((root / top).rglob("*.py"))
    }


def subsystem_edges(root: Path) -> dict[tuple[str, str], list[str]]:
    """``(importer, imported)`` between different subsystems, with the imports behind each."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module, path in project_modules(root).items():
        here = subsystem_of(module)
        for imported in sorted(imports_of(root, path)):
            there = subsystem_of(imported)
            if there is None or there == here or here is None:
                continue
            edges.setdefault((here, there), []).append(f"{module} -> {imported}")
    return edges


def layer_violations(root: Path) -> list[str]:
    """``module -> imported`` for each import that breaks the order, under ``root``."""
    violations = []
    for (here, there), imports in sorted(subsystem_edges(root).items()):
        if here == FRONT_DOOR:
            allowed = there != "app" and there != "callbacks"
        elif there == FRONT_DOOR:
            # The front door is for users (app is one); below it, import the subsystem.
            allowed = _within(here, "app")
        else:
            allowed = ORDER.index(there) < ORDER.index(here)
        if not allowed:
            violations += imports
    return violations


def modules_outside_subsystems(root: Path) -> list[str]:
    """Modules directly in ``pipelines/`` other than its front door: each belongs in a
    subsystem's folder."""
    return [
        module
        for module in project_modules(root)
        if _within(module, FRONT_DOOR)
        and subsystem_of(module) == FRONT_DOOR
        and module != FRONT_DOOR
    ]


def _named_module(name: str, modules: Collection[str]) -> str | None:
    """The project module an import of ``name`` runs last: ``name`` itself, or the module
    it is an attribute of; None outside the project."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _modules_named(root: Path, path: Path, modules: Collection[str]) -> set[str]:
    """The project modules ``path``'s imports name: ``import a.b`` and ``from a import b``
    name ``a.b`` when it is a module (not the package ``a`` it is in)."""
    name = module_name(root, path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    named: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            named.update(_named_module(alias.name, modules) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            named.update(_named_module(f"{base}.{alias.name}", modules) for alias in node.names)
    return {found for found in named if found is not None and found != name}


def module_graph(root: Path) -> dict[str, set[str]]:
    """Each project module and the project modules it imports (itself left out)."""
    modules = project_modules(root)
    return {module: _modules_named(root, path, modules) for module, path in modules.items()}


def module_cycles(root: Path) -> list[list[str]]:
    """The groups of modules that import each other, directly or through others (strongly
    connected components of more than one module), each sorted."""
    graph = module_graph(root)
    order: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's algorithm
        order[module] = lowest[module] = len(order)
        stack.append(module)
        for imported in sorted(graph[module]):
            if imported not in order:
                visit(imported)
                lowest[module] = min(lowest[module], lowest[imported])
            elif imported in stack:
                lowest[module] = min(lowest[module], order[imported])
        if lowest[module] == order[module]:
            group: list[str] = []
            while not group or group[-1] != module:
                group.append(stack.pop())
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return sorted(cycles)


def test_no_module_imports_one_that_imports_it() -> None:
    assert module_cycles(ROOT) == []


def test_the_cycle_check_finds_cycles_however_imported(tmp_path: Path) -> None:
    files = {
        # under TYPE_CHECKING, and a name imported from a module
        "pipelines/pipeline/_answer.py": "from pipelines.pipeline._request import Request\n",
        "pipelines/pipeline/_request.py": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from pipelines.pipeline._answer import AnswerPipeline\n"
        ),
        # inside a function, through a third module, one relative import
        "app/cli/logs.py": "def f():\n    from app.cli import rerun\n",
        "app/cli/rerun.py": "from .selection import pick\n",
        "app/cli/selection.py": "import app.cli.logs\n",
        # not a cycle: a package's __init__ re-exporting its module, which imports a sibling
        "app/http/__init__.py": "from app.http.factory import create_app\n",
        "app/http/factory.py": "from app.http.deps import share\n",
        "app/http/deps.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert module_cycles(tmp_path) == [
        ["app.cli.logs", "app.cli.rerun", "app.cli.selection"],
        ["pipelines.pipeline._answer", "pipelines.pipeline._request"],
    ]


def test_the_project_keeps_its_layers() -> None:
    assert layer_violations(ROOT) == []
    assert modules_outside_subsystems(ROOT) == []
    edges = subsystem_edges(ROOT)
    graph: dict[str, set[str]] = {}
    for here, there in edges:
        graph.setdefault(here, set()).add(there)
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError on a cycle
    # The rule is about real imports: the composition root imports callbacks and the
    # subsystems below, and callbacks imports the citations it numbers.
    assert ("pipelines.pipeline", "callbacks") in edges
    assert ("callbacks", "pipelines.citations") in edges
    assert ("pipelines.retrieval", "pipelines.index") in edges


def test_the_check_finds_each_kind_of_violation(tmp_path: Path) -> None:
    files = {
        # a lower subsystem importing a higher one, inside a function
        "pipelines/retrieval/retriever.py": "def f():\n    from callbacks.events import Event\n",
        # allowed: the composition root imports callbacks; a relative import of its own
        "pipelines/pipeline/__init__.py": "from callbacks.handler import AnswerEventHandler\n",
        "pipelines/pipeline/_logs.py": "from ..core.settings import S\nfrom . import _sync\n",
        # anything below app importing app
        "callbacks/log.py": "import app.cli\n",
        # a cycle between peers: the index reads the catalog, so the catalog may not read it
        "pipelines/index/store.py": "from pipelines.catalog import Catalog\n",
        "pipelines/catalog/catalog.py": "from ..index import store\n",
        # the front door, imported from inside
        "pipelines/answering/prompts.py": "from pipelines import Settings\n",
        # a module left directly in pipelines/
        "pipelines/helpers.py": "",
        "pipelines/__init__.py": "from pipelines.core.errors import InputError\n",
        "app/cli/program.py": "from callbacks import events\nimport pipelines\n",
        # the HTTP service never reaches up into the command line
        "app/http/factory.py": "from app.cli.options import port_number\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert layer_violations(tmp_path) == [
        "app.http.factory -> app.cli.options",
        "app.http.factory -> app.cli.options.port_number",
        "callbacks.log -> app.cli",
        "pipelines.answering.prompts -> pipelines",
        "pipelines.answering.prompts -> pipelines.Settings",
        "pipelines.catalog.catalog -> pipelines.index",
        "pipelines.catalog.catalog -> pipelines.index.store",
        "pipelines.retrieval.retriever -> callbacks.events",
        "pipelines.retrieval.retriever -> callbacks.events.Event",
    ]
    assert modules_outside_subsystems(tmp_path) == ["pipelines.helpers"]


# --- typed keyword options ------------------------------------------------------------------


@pytest.mark.parametrize("method", ["stream", "invoke", "astream", "ainvoke"])
def test_a_misspelt_option_fails_at_the_call(method: str) -> None:
    pipeline = AnswerPipeline()
    call = getattr(pipeline, method)
    # Before the work starts: Python binds the arguments of coroutine and generator
    # functions at the call too.
    with pytest.raises(TypeError, match="unexpected keyword argument 'collection'"):
        call("What is ABCA1?", collection=["reactome"])


def test_the_methods_options_are_the_request_options_a_caller_may_set() -> None:
    # Decision 0040: a new option is a field of RequestOptions and a key of AskOptions, and
    # no method's signature changes.
    fields = {field.name for field in dataclasses.fields(RequestOptions)}
    assert set(AskOptions.__annotations__) == fields - {"surface", "versions"}
    with pytest.raises(TypeError, match="unexpected keyword argument 'versions'"):
        AnswerPipeline().stream("What is ABCA1?", versions={"reactome": "v1"})  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'surface'"):
        AnswerPipeline().stream("What is ABCA1?", surface="http")  # type: ignore[call-arg]


@pytest.mark.slow  # mypy without its cache, over everything the snippet imports
def test_mypy_flags_a_misspelt_option(tmp_path: Path) -> None:
    snippet = tmp_path / "snippet.py"
    snippet.write_text(
        "from pipelines.pipeline import AnswerPipeline\n"
        "AnswerPipeline().stream('q', collection=['reactome'])\n"
        "AnswerPipeline().invoke('q', collections=['reactome'], history=[('user', 'hi')])\n"
    )
    out, _, status = mypy_api.run(
        ["--strict", "--no-incremental", "--follow-imports=silent", str(snippet)]
    )
    assert status == 1
    assert 'Unexpected keyword argument "collection"' in out
    assert out.count("error:") == 1, out  # the well-spelt call passes
