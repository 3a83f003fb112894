"""Ships each collection's folder (its collection.toml and sample) under share/, so that
`ingest --sample` works from a wheel too; a new collection folder needs no change here."""

from pathlib import Path

from setuptools import setup

_COLLECTIONS = Path("collections")

setup(
    data_files=[
        (
            f"share/reactome-answers/collections/{folder.name}",
            sorted(str(path) for path in folder.iterdir() if path.is_file()),
        )
        for folder in sorted(_COLLECTIONS.iterdir())
        if (folder / "collection.toml").is_file()
    ]
)
