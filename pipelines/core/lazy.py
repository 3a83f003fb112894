"""Re-exports imported on first use, for a package whose public names include a heavy module."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports ``modules[name]`` when ``name``
    is first read; the package lists the names in ``__all__`` and imports them under
    ``TYPE_CHECKING`` so type checkers see them."""

    def __getattr__(name: str) -> Any:  # noqa: N807 (the name the import system calls)
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
