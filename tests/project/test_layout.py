"""Where the tests are: in folders by subsystem and surface, each folder a package (test
modules in different folders share names) whose docstring says what it covers."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_tests_live_in_folders_by_area_each_saying_what_it_covers() -> None:
    tests = ROOT / "tests"
    assert not sorted(path.name for path in tests.glob("test_*.py"))
    areas = {path.parent for path in tests.rglob("test_*.py")}
    assert len(areas) >= 10
    for area in areas:
        init = area / "__init__.py"
        assert init.is_file(), f"{area} needs an __init__.py (its tests share module names)"
        assert init.read_text(encoding="utf-8").startswith('"""'), (
            f"{init} should say what the folder tests"
        )


def test_the_support_package_names_every_module_it_holds() -> None:
    support = ROOT / "tests" / "support"
    listed = (support / "__init__.py").read_text(encoding="utf-8")
    modules = sorted(path.stem for path in support.glob("*.py") if path.stem != "__init__")
    assert [name for name in modules if f"``{name}``" not in listed] == []
