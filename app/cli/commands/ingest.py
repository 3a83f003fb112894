"""``reactome-answers ingest``: the sample corpus, a folder of release files, or a download,
into the home's store."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.core.errors import InputError, ReactomeAnswersError
from pipelines.core.settings import Settings

if TYPE_CHECKING:
    from pipelines.index.ingestion import CollectionSummary

# The catalog (through the language detector: numpy) and pipelines.index.ingestion (Chroma,
# LangChain, onnxruntime) are imported inside the functions: `--help` and the light commands
# start without them (app.cli.registry).

__all__ = ["SUMMARY", "add_arguments", "collection_list", "run"]

SUMMARY = "ingest the sample corpus, a folder of Reactome release files, or a download"

_COLUMNS = ("added", "updated", "deleted", "unchanged", "skipped", "errors", "documents", "chunks")


def collection_list(value: str) -> list[str]:
    """Comma-separated names of declared collections (the bundled ones and any under
    ``REACTOME_ANSWERS_COLLECTIONS_PATH``)."""
    from pipelines.catalog.catalog import catalog_for

    names = [name.strip() for name in value.split(",") if name.strip()]
    try:
        known = catalog_for().names
    except ReactomeAnswersError as error:  # a broken declaration: argparse's one-line usage error
        raise argparse.ArgumentTypeError(str(error)) from error
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown collection(s) {', '.join(unknown) or repr(value)}; "
            f"choose from {', '.join(known)}"
        )
    return names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--sample",
        action="store_true",
        help="ingest the small sample corpus bundled with the project",
    )
    source.add_argument(
        "--from",
        dest="from_dir",
        type=Path,
        metavar="DIR",
        help="ingest release files found in DIR or in its <collection>/ folders",
    )
    source.add_argument(
        "--download",
        action="store_true",
        help="fetch the release files from Reactome's download site, then ingest them",
    )
    parser.add_argument(
        "--release",
        metavar="N",
        help="Reactome release number: which release --download fetches, and the release "
        "recorded for --from (default: current / unknown)",
    )
    parser.add_argument(
        "--download-url",
        metavar="URL",
        help="base URL to download from instead of Reactome's site (a mirror)",
    )
    parser.add_argument(
        "--collections",
        type=collection_list,
        metavar="A,B",
        help="only these collections, comma separated (see the 'collections' command)",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument(
        "--verbose", action="store_true", help="list every skipped or unreadable row"
    )


def _table(summaries: Sequence[CollectionSummary]) -> str:
    header = ("collection", *_COLUMNS, "seconds")
    rows = [
        (s.name, *(str(getattr(s, column)) for column in _COLUMNS), f"{s.seconds:.1f}")
        for s in summaries
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        )
        for row in [header, *rows]
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from pipelines.catalog.catalog import catalog_for
    from pipelines.index.ingestion import ingest, locate_files, sample_files

    catalog = catalog_for(settings)
    wanted = args.collections or list(catalog.names)
    release = args.release or "unknown"
    if args.download_url and not args.download:
        raise InputError("--download-url only applies to --download", fix="drop --download-url")
    required = args.collections is not None
    if args.sample:
        sources = sample_files(wanted, required=required, catalog=catalog)
        label, release = "sample", args.release or "sample"
    elif args.download:
        from pipelines.catalog.download import download_release

        release = args.release or "current"
        if not required:  # all of them: those that can be downloaded
            wanted = [name for name in wanted if catalog[name].download is not None]
        directory = download_release(
            settings.home / "downloads" / release,
            wanted,
            release=args.release,
            base_url=args.download_url,
            progress=not args.json and sys.stderr.isatty(),
            catalog=catalog,
        )
        sources = locate_files(directory, wanted, required=required, catalog=catalog)
        label = "download"
    else:
        directory, label = args.from_dir.resolve(), f"from {args.from_dir.resolve()}"
        sources = locate_files(directory, wanted, required=required, catalog=catalog)
    progress = not args.json and sys.stderr.isatty()
    summaries = ingest(settings, sources, release=release, origin=label, progress=progress)

    if args.json:
        print(json.dumps({s.name: s.as_json(verbose=args.verbose) for s in summaries}, indent=2))
    else:
        print(_table(summaries))
        for summary in summaries:
            if summary.failure:
                print(f"{summary.name}: {summary.failure}", file=sys.stderr)
            if summary.problems and not args.verbose:
                print(
                    f"{summary.name}: {summary.skipped} skipped, {summary.errors} unreadable; "
                    "--verbose lists them",
                    file=sys.stderr,
                )
    if args.verbose and not args.json:
        for summary in summaries:
            for problem in summary.problems:
                print(f"{summary.name}: {problem.kind}: {problem}", file=sys.stderr)
    return 1 if any(summary.failure for summary in summaries) else 0
