"""The README and docs/ are what users read; what they state must hold for the code.

- The finalizer tables and the Python examples in docs/contract.md and the README run.
- The settings table in docs/operations.md lists every setting, with its real default.
- Every command, option and make target the documents show exists.
- Every relative link in README.md and docs/ points at a file (and heading) that exists.
- The README stays short, and the decision records keep one format.
"""

from __future__ import annotations

import contextlib
import doctest
import io
import itertools
import re
import shlex
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token
from pydantic.fields import FieldInfo

from pipelines.citations.finalize import finalize_citations, strip_out_of_range_markers

ROOT = Path(__file__).parents[2]
README_PATH = ROOT / "README.md"
DOCS = ROOT / "docs"
OPERATIONS = DOCS / "operations.md"
CONTRACT = DOCS / "contract.md"
DECISIONS = DOCS / "decisions"
README_MAX_LINES = 250

_ROW = re.compile(r"^\| (`.+?`) \| (`.+?`) \|(?: (`\[.*?\]`)[^|]*\|)?$", re.MULTILINE)
_MARKDOWN = MarkdownIt("commonmark").enable("table")


def documents() -> list[Path]:
    """README.md and every Markdown file under docs/."""
    return [README_PATH, *sorted(DOCS.rglob("*.md"))]


def text_of(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def tokens(path: Path) -> list[Token]:
    """The document's block tokens, followed by every inline token's children."""
    blocks = _MARKDOWN.parse(text_of(path))
    return blocks + [child for block in blocks for child in block.children or []]


def code(cell: str) -> str:
    """The text of a Markdown code cell: `x` or ``x`` with backticks inside."""
    match = re.fullmatch(r"(`+) ?(.*?) ?\1", cell)
    assert match, cell
    return match.group(2)


def section(text: str, heading: str) -> str:
    """From ``heading`` to the blank line that ends the first table after it."""
    start = text.index(heading)
    rest = text[start:]
    return rest[: rest.index("\n\n", rest.index("|---"))]


def table_after(text: str, heading: str) -> list[tuple[str, ...]]:
    found = _ROW.findall(section(text, heading))
    return [tuple(cell for cell in row if cell) for row in found]


# --- the citation contract (docs/contract.md) ------------------------------------------------


def test_strip_table() -> None:
    rows = table_after(text_of(CONTRACT), "| with 4 sources | becomes |")
    assert len(rows) == 4
    for before, after in rows:
        assert strip_out_of_range_markers(code(before), 4) == code(after)


def test_finalize_table() -> None:
    rows = table_after(text_of(CONTRACT), "| text, with sources `[A, B, C, D]` |")
    assert len(rows) == 7
    for before, after, cited in rows:
        names = re.findall(r"[A-D]", code(cited))
        assert finalize_citations(code(before), ["A", "B", "C", "D"]) == (code(after), names)


def pycon_blocks() -> Iterator[tuple[Path, int, str]]:
    for path in documents():
        for token in tokens(path):
            if token.type == "fence" and token.info.strip() == "pycon":
                line = token.map[0] + 1 if token.map else 0
                yield path, line, token.content


@pytest.mark.parametrize(
    ("path", "line", "block"),
    [pytest.param(*block, id=f"{block[0].name}:{block[1]}") for block in pycon_blocks()],
)
def test_python_examples_run_as_shown(path: Path, line: int, block: str) -> None:
    example = doctest.DocTestParser().get_doctest(block, {}, path.name, str(path), line)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report = io.StringIO()
    runner.run(example, out=report.write)
    assert runner.failures == 0, report.getvalue()


def test_both_documents_show_the_finalizer_running() -> None:
    where = {path.name for path, _, block in pycon_blocks() if "finalize_citations" in block}
    assert {"README.md", "contract.md"} <= where


# --- settings (docs/operations.md) -----------------------------------------------------------


def settings_rows() -> list[list[str]]:
    """The settings table's rows as stripped cells."""
    lines = section(text_of(OPERATIONS), "## Settings").splitlines()
    return [
        [cell.strip() for cell in line.split("|")[1:-1]] for line in lines if line.startswith("| `")
    ]


def every_setting() -> dict[str, FieldInfo]:
    """Each setting's field by its environment variable: the pipeline's and the server's."""
    from app.http.settings import ServerSettings
    from pipelines.core.settings import Settings, env_var_for

    return {
        env_var_for(field, kind): info
        for kind in (Settings, ServerSettings)
        for field, info in kind.model_fields.items()
    }


def test_every_setting_is_in_the_settings_table() -> None:
    listed = {name for row in settings_rows() for name in re.findall(r"`([A-Z_]+)`", row[0])}
    missing = set(every_setting()) - listed
    assert not missing, f"the settings table in docs/operations.md lacks {sorted(missing)}"
    unknown = listed - set(every_setting())
    assert not unknown, f"the settings table lists {sorted(unknown)}, which are no settings"


def test_the_settings_table_gives_the_real_defaults() -> None:
    settings = every_setting()
    checked = 0
    for variables, _option, default_cell, _meaning in settings_rows():
        names = re.findall(r"`([A-Z_]+)`", variables)
        cells = [cell.strip() for cell in default_cell.split(",")]
        if len(cells) != len(names):
            cells = [default_cell] * len(names)
        for name, cell in zip(names, cells, strict=True):
            info = settings[name]
            if info.default_factory is not None:
                continue  # computed (the home folder): described, not a literal
            default = info.default
            if isinstance(default, bool):
                assert cell == ("on" if default else "off"), name
            elif isinstance(default, int | float):
                assert float(cell) == default, name
            elif isinstance(default, str) and default:
                assert cell == f"`{default}`", name
            elif default in (None, ""):
                assert cell in ("unset", "empty") or cell.startswith("`<"), name
            else:
                continue
            checked += 1
    assert checked >= 15


def test_every_variable_the_documents_name_exists() -> None:
    from app.http.settings import ServerSettings
    from pipelines.core.settings import ENV_PREFIX, Settings

    known = set(every_setting())
    known |= {
        f"{ENV_PREFIX}{field.upper()}"
        for kind in (Settings, ServerSettings)
        for field in kind.model_fields
    }
    for path in documents():
        named = set(re.findall(rf"\b{ENV_PREFIX}[A-Z_]*[A-Z]\b", text_of(path)))
        assert named <= known, f"{path.name} names unknown variables {sorted(named - known)}"


# --- commands and make targets ---------------------------------------------------------------


def shell_lines() -> Iterator[tuple[Path, str]]:
    for path in documents():
        for token in tokens(path):
            if token.type == "fence" and token.info.strip() in ("sh", "shell", "bash"):
                for line in token.content.splitlines():
                    yield path, line.strip()


def command_lines() -> list[tuple[Path, str]]:
    return [
        (path, line.removeprefix(".venv/bin/"))
        for path, line in shell_lines()
        if line.removeprefix(".venv/bin/").startswith("reactome-answers ")
    ]


def parse(argv: list[str]) -> tuple[int, str]:
    """Exit status (0 for a parse that succeeds) and what the parser printed."""
    from app.cli import build_parser

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        try:
            build_parser().parse_args(argv)
        except SystemExit as stop:
            return int(stop.code or 0), printed.getvalue()
    return 0, printed.getvalue()


@pytest.mark.parametrize(
    ("path", "line"),
    [pytest.param(path, line, id=f"{path.name}: {line[:60]}") for path, line in command_lines()],
)
def test_every_command_shown_parses(path: Path, line: str) -> None:
    # [--a | --b] shows optional alternatives: the line must parse without them, and every
    # option they name must be one the command has.
    optional = re.findall(r"\[([^\]]*)\]", line)
    argv = shlex.split(re.sub(r"\[[^\]]*\]", "", line), comments=True)[1:]
    status, printed = parse(argv)
    assert status == 0, f"{path.name}: {line}\n{printed}"
    if optional:
        status, help_text = parse([*argv, "--help"])
        assert status == 0, help_text
        for option in re.findall(r"--[a-z][\w-]*", " ".join(optional)):
            assert re.search(rf"{option}\b", help_text), f"{path.name}: {line}: no {option}"


def test_every_command_is_shown() -> None:
    import argparse

    from app.cli import build_parser

    (subcommands,) = (
        action
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    shown = {word for _, line in command_lines() for word in shlex.split(line, comments=True)}
    missing = set(subcommands.choices) - shown
    assert not missing, f"no document shows the command(s) {sorted(missing)}"


def make_targets() -> set[str]:
    makefile = text_of(ROOT / "Makefile")
    return set(re.findall(r"^([A-Za-z][\w-]*):", makefile, re.MULTILINE))


def test_every_make_target_named_exists() -> None:
    targets = make_targets()
    for path in documents():
        snippets = [
            token.content
            for token in tokens(path)
            if token.type in ("fence", "code_block", "code_inline")
        ]
        named = set(re.findall(r"(?<![\w./-])make ([a-z][\w-]*)", "\n".join(snippets)))
        assert named <= targets, f"{path.name} names make targets {sorted(named - targets)}"


def test_the_readme_starts_with_make_demo_and_make_test() -> None:
    first_block = next(t for t in tokens(README_PATH) if t.type == "fence")
    assert re.findall(r"^make (\w+)", first_block.content, re.MULTILINE) == ["demo", "test"]
    assert {"demo", "test"} <= make_targets()


# --- links and length ------------------------------------------------------------------------


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    kept = "".join(c for c in heading.lower() if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    blocks = _MARKDOWN.parse(text_of(path))
    found: set[str] = set()
    for opening, inline in itertools.pairwise(blocks):
        if opening.type == "heading_open":
            found.add(_slug("".join(child.content for child in inline.children or [])))
    return found


def relative_links(path: Path) -> list[str]:
    links = []
    for token in tokens(path):
        for attribute in ("href", "src"):
            target = token.attrs.get(attribute)
            if isinstance(target, str) and not urlsplit(target).scheme:
                links.append(target)
    return links


def broken_links(path: Path) -> list[str]:
    broken = []
    for link in relative_links(path):
        target, _, fragment = link.partition("#")
        resolved = (path.parent / unquote(target)).resolve() if target else path
        if not resolved.exists() or (
            fragment and resolved.suffix == ".md" and fragment not in anchors(resolved)
        ):
            broken.append(link)
    return broken


def test_every_relative_link_points_at_a_file_that_exists() -> None:
    broken = {path.name: broken_links(path) for path in documents()}
    assert not {name: links for name, links in broken.items() if links}
    assert sum(len(relative_links(path)) for path in documents()) >= 20


def test_the_link_check_sees_a_broken_link(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A heading\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md) [ok](there.md#a-heading) [web](https://example.org/x.md)\n"
        "[gone](missing.md) [gone](there.md#no-heading) ![gone](img/none.png)\n"
        "`[not a link](nowhere.md)`\n",
        encoding="utf-8",
    )
    assert broken_links(page) == ["missing.md", "there.md#no-heading", "img/none.png"]


# A path like tests/logs/test_rerun.py, named in prose or a comment; `<provider>` and other
# placeholders are not paths.
_TEST_PATH = re.compile(r"\btests/[\w/]+\.py\b")


def named_test_paths(text: str) -> set[str]:
    return set(_TEST_PATH.findall(text))


def test_every_test_file_the_docs_and_code_name_exists() -> None:
    sources = [
        *documents(),
        *(
            path
            for folder in ("app", "pipelines", "callbacks", "collections")
            for path in (ROOT / folder).rglob("*")
            if path.suffix in {".py", ".yaml", ".js", ".toml"}
        ),
        ROOT / "pyproject.toml",
        ROOT / "Makefile",
    ]
    named = {
        (path.relative_to(ROOT), name)
        for path in sources
        for name in named_test_paths(text_of(path))
    }
    assert len(named) >= 30  # the docs and comments point at tests in many places
    assert not sorted((str(path), name) for path, name in named if not (ROOT / name).is_file())


def test_the_test_path_check_sees_a_moved_file() -> None:
    text = "see tests/logs/test_rerun.py and tests/test_rerun.py, not tests/<area>/"
    assert named_test_paths(text) == {"tests/logs/test_rerun.py", "tests/test_rerun.py"}
    assert not (ROOT / "tests/test_rerun.py").exists()


def test_the_readme_links_to_the_other_documents() -> None:
    links = {link.partition("#")[0] for link in relative_links(README_PATH)}
    assert {"docs/operations.md", "docs/performance.md", "docs/decisions/"} <= links


def test_the_readme_is_at_most_250_lines() -> None:
    lines = len(text_of(README_PATH).splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail to docs/"


# --- decision records ------------------------------------------------------------------------


def test_decision_records_are_numbered_and_share_one_format() -> None:
    records = decision_records(DECISIONS)
    numbers = []
    for record in records:
        match = re.fullmatch(r"(\d{4})-[a-z0-9-]+\.md", record.name)
        assert match, f"{record.name}: name it NNNN-words.md"
        numbers.append(int(match.group(1)))
        text = text_of(record)
        assert text.startswith(f"# {match.group(1)}: "), f"{record.name}: title '# NNNN: ...'"
        sections = re.findall(r"^## (.+)$", text, re.MULTILINE)
        assert sections == ["Context", "Decision", "Consequences"], record.name
    assert numbers == list(range(1, len(records) + 1)), "decision numbers run 0001, 0002, ..."
    assert len(records) >= 9


def decision_records(folder: Path) -> list[Path]:
    """The records in ``folder``: every Markdown file but its index, README.md."""
    return sorted(path for path in folder.glob("*.md") if path.name != "README.md")


_INDEX_ROW = re.compile(r"^\| \[(\d{4})\]\(([^)]+)\) \| (.+) \|$")


def index_problems(folder: Path) -> list[str]:
    """What the index (``folder``/README.md) gets wrong: each record is a row of its table,
    ``| [NNNN](file) | title |``, and each row a record."""
    have = []
    for record in decision_records(folder):
        title = text_of(record).splitlines()[0]
        have.append((record.name[:4], record.name, title.partition(": ")[2]))
    listed = [match.groups() for line in text_of(folder / "README.md").splitlines()
              if (match := _INDEX_ROW.match(line))]  # fmt: skip
    problems = [f"{name}: not in the index (add: | [{number}]({name}) | {title} |)"
                for number, name, title in have if (number, name, title) not in listed]  # fmt: skip
    problems += [f"the index lists {row[1]} as {row[2]!r}, which no record is"
                 for row in listed if row not in have]  # fmt: skip
    return problems


def test_the_decisions_index_lists_every_record() -> None:
    assert index_problems(DECISIONS) == []


def test_the_index_check_finds_a_missing_row_and_a_stale_title(tmp_path: Path) -> None:
    (tmp_path / "0001-first.md").write_text("# 0001: The first\n")
    (tmp_path / "0002-second.md").write_text("# 0002: The second, renamed\n")
    (tmp_path / "README.md").write_text(
        "| Record | Decision |\n| --- | --- |\n| [0002](0002-second.md) | The second |\n"
    )
    assert index_problems(tmp_path) == [
        "0001-first.md: not in the index (add: | [0001](0001-first.md) | The first |)",
        "0002-second.md: not in the index (add: | [0002](0002-second.md) | The second, renamed |)",
        "the index lists 0002-second.md as 'The second', which no record is",
    ]
