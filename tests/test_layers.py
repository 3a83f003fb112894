"""The layering rule, enforced on the source, and the pipeline's typed keyword options.

- ``app`` (delivery) may import ``pipelines`` and ``callbacks``;
- ``callbacks`` and ``pipelines`` never import ``app``;
- inside ``pipelines`` only the composition root, the ``pipelines.pipeline`` package, imports
  ``callbacks`` (the rest of ``pipelines`` knows nothing of events or logs).

Every import counts, at module level or inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from mypy import api as mypy_api

from pipelines.pipeline import AnswerPipeline

ROOT = Path(__file__).resolve().parents[1]
COMPOSITION_ROOT = "pipelines.pipeline"


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


def layer_violations(root: Path) -> list[str]:
    """``module -> imported`` for each import that breaks the rule, under ``root``."""
    violations = []
    for layer in ("pipelines", "callbacks", "app"):
        for path in sorted((root / layer).rglob("*.py")):
            module = module_name(root, path)
            for imported in sorted(imports_of(root, path)):
                delivery = layer != "app" and _within(imported, "app")
                events = (
                    layer == "pipelines"
                    and not _within(module, COMPOSITION_ROOT)
                    and _within(imported, "callbacks")
                )
                if delivery or events:
                    violations.append(f"{module} -> {imported}")
    return violations


def test_the_project_keeps_its_layers() -> None:
    assert layer_violations(ROOT) == []
    # The rule is about real imports: the composition root does import callbacks.
    root_imports = set().union(
        *(imports_of(ROOT, path) for path in (ROOT / "pipelines" / "pipeline").glob("*.py"))
    )
    assert any(_within(name, "callbacks") for name in root_imports)


def test_the_check_finds_each_kind_of_violation(tmp_path: Path) -> None:
    for folder in ("pipelines/pipeline", "callbacks", "app"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "pipelines" / "__init__.py").write_text("")
    (tmp_path / "pipelines" / "retriever.py").write_text(
        "def f():\n    from callbacks.events import Event\n"
    )
    (tmp_path / "pipelines" / "pipeline" / "__init__.py").write_text(
        "from callbacks.handler import AnswerEventHandler\n"
    )
    (tmp_path / "pipelines" / "pipeline" / "_logs.py").write_text("from ..settings import S\n")
    (tmp_path / "callbacks" / "log.py").write_text("import app.cli\n")
    (tmp_path / "pipelines" / "store.py").write_text("from app import server\n")
    (tmp_path / "app" / "cli.py").write_text("from callbacks import events\nimport pipelines\n")
    assert layer_violations(tmp_path) == [
        "pipelines.retriever -> callbacks.events",
        "pipelines.retriever -> callbacks.events.Event",
        "pipelines.store -> app",
        "pipelines.store -> app.server",
        "callbacks.log -> app.cli",
    ]


# --- typed keyword options ------------------------------------------------------------------


@pytest.mark.parametrize("method", ["stream", "invoke", "astream", "ainvoke"])
def test_a_misspelt_option_fails_at_the_call(method: str) -> None:
    pipeline = AnswerPipeline()
    call = getattr(pipeline, method)
    # Before the work starts: Python binds the arguments of coroutine and generator
    # functions at the call too.
    with pytest.raises(TypeError, match="unexpected keyword argument 'collection'"):
        call("What is ABCA1?", collection=["reactome"])


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
