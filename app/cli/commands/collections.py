"""``reactome-answers collections``: what is ingested in the home's store."""

from __future__ import annotations

import argparse
import json
import shlex

from pipelines.core.settings import Settings

__all__ = ["SUMMARY", "add_arguments", "run"]

SUMMARY = "list what is ingested: documents, chunks, release, files, model"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace, settings: Settings) -> int:
    from pipelines.catalog.catalog import catalog_for
    from pipelines.index import store

    catalog = catalog_for(settings)
    infos = store.collection_infos(store.open_client(settings), catalog.names)
    if args.json:
        print(json.dumps([info.as_json() for info in infos], indent=2))
        return 0
    if not infos:
        home = shlex.quote(str(settings.home))
        print(f"nothing ingested in {settings.home}; run: reactome-answers --home {home} "
              "ingest --sample")  # fmt: skip
        return 0
    for info in infos:
        print(
            f"{info.name}: {info.documents} documents, {info.chunks} chunks, "
            f"release {info.release}, {info.embedding_model}, ingested {info.created_at}"
        )
        print(f"    {catalog[info.name].description}")
        for file_name, digest in sorted(info.files.items()):
            print(f"    {file_name}  sha256:{digest[:16]}")
    return 0
