"""Ships each collection's folder (its collection.toml and sample) under share/, so that
`ingest --sample` works from a wheel too; a new collection folder needs no change here."""

from pathlib import Path

from setuptools import setup

_COLLECTIONS = Path("collections")

setup(
    data_files=[
        (
            f"share/reactome-answers/{folder.as_posix()}",
            sorted(str(path) for path in folder.iterdir() if path.is_file()),
        )
        for collection in sorted(_COLLECTIONS.iterdir())
        if (collection / "collection.toml").is_file()
        # The collection's folder and every folder below it (a sample may have subfolders).
        for folder in [collection, *sorted(p for p in collection.rglob("*") if p.is_dir())]
    ]
)
