"""The README's finalizer tables are the contract users read; they must match the code."""

from __future__ import annotations

import re
from pathlib import Path

from pipelines.citations import finalize_citations, strip_out_of_range_markers

README = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
_ROW = re.compile(r"^\| (`.+?`) \| (`.+?`) \|(?: (`\[.*?\]`)[^|]*\|)?$", re.MULTILINE)


def code(cell: str) -> str:
    """The text of a Markdown code cell: `x` or ``x`` with backticks inside."""
    match = re.fullmatch(r"(`+) ?(.*?) ?\1", cell)
    assert match, cell
    return match.group(2)


def table_after(heading: str) -> list[tuple[str, ...]]:
    section = README[README.index(heading) :]
    section = section[: section.index("\n\n", section.index("|---"))]
    return [tuple(cell for cell in row if cell) for row in _ROW.findall(section)]


def test_strip_table() -> None:
    rows = table_after("| with 4 sources | becomes |")
    assert len(rows) == 4
    for before, after in rows:
        assert strip_out_of_range_markers(code(before), 4) == code(after)


def test_finalize_table() -> None:
    rows = table_after("| text, with sources `[A, B, C, D]` |")
    assert len(rows) == 7
    for before, after, cited in rows:
        names = re.findall(r"[A-D]", code(cited))
        assert finalize_citations(code(before), ["A", "B", "C", "D"]) == (code(after), names)


def test_every_setting_is_in_the_settings_table() -> None:
    from pipelines.settings import Settings, env_var_for

    section = README[README.index("## Settings") :]
    section = section[: section.index("\n\n", section.index("|---"))]
    first_cells = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    listed = {name for cell in first_cells for name in re.findall(r"`([A-Z_]+)`", cell)}
    missing = {env_var_for(field) for field in Settings.model_fields} - listed
    assert not missing, f"README's settings table lacks {sorted(missing)}"
