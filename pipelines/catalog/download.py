"""Fetch release files and user-guide pages for ``ingest --download``.

Each collection's ``collection.toml`` says how it is downloaded. ``download = "release"``: its
files come from ``https://reactome.org/download/<release or current>/``, or from a mirror given
with ``--download-url``; a mirror may keep them flat or in per-collection folders
(``<collection>/``), and both are tried. ``download = "module:function"``: that function
fetches them (:func:`download_userguide`: pages from the mirror when it lists them in a
``SOURCES.tsv``, otherwise as HTML from the site itself).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
from tqdm import tqdm

from pipelines.catalog.catalog import Catalog, catalog_for
from pipelines.catalog.loaders.userguide import SOURCES_FILE
from pipelines.core.errors import DownloadError

__all__ = ["REACTOME_DOWNLOAD_URL", "USERGUIDE_PAGES", "download_release", "download_userguide"]

REACTOME_DOWNLOAD_URL = "https://reactome.org/download/"
# The pages the user guide's own index links to.
USERGUIDE_PAGES = (
    "/userguide",
    "/userguide/pathway-browser",
    "/userguide/details-panel",
    "/userguide/searching",
    "/userguide/analysis",
    "/userguide/analysis/gsa",
    "/userguide/cytomics",
    "/userguide/diseases",
    "/userguide/review-status",
    "/userguide/reactome-fiviz",
)
_TIMEOUT = httpx.Timeout(60.0, connect=15.0)


def _fetch(
    client: httpx.Client, urls: Sequence[str], target: Path, *, progress: bool
) -> str | None:
    """Save the first of ``urls`` that exists into ``target``; ``None`` if none does."""
    for url in urls:
        try:
            with client.stream("GET", url) as response:
                if response.status_code == 404:
                    continue
                response.raise_for_status()
                size = int(response.headers.get("content-length") or 0) or None
                partial = target.with_name(target.name + ".part")
                with (
                    partial.open("wb") as out,
                    tqdm(
                        total=size,
                        unit="B",
                        unit_scale=True,
                        desc=target.name[:30],
                        disable=not progress,
                        file=sys.stderr,
                        leave=False,
                    ) as bar,
                ):
                    for block in response.iter_bytes():
                        out.write(block)
                        bar.update(len(block))
                # Renamed only once complete, so an interrupted download is never ingested.
                partial.replace(target)
                return url
        except httpx.HTTPError as error:
            raise DownloadError(
                f"cannot download {url} ({error})",
                fix="check the network, or pass --download-url for a mirror",
            ) from error
    return None


def _mirror_sources(client: httpx.Client, base: str) -> tuple[str, list[str]] | None:
    """Where a mirror's ``SOURCES.tsv`` lives, and the site paths it lists."""
    for folder in (urljoin(base, "userguide/"), base):
        response = client.get(urljoin(folder, SOURCES_FILE))
        if response.status_code == 200:
            rows = [line.split("\t") for line in response.text.splitlines() if line.strip()]
            if rows and "url_path" in rows[0]:
                column = rows[0].index("url_path")
                return folder, [row[column] for row in rows[1:] if len(row) > column]
    return None


def download_userguide(client: httpx.Client, base: str, target: Path, *, progress: bool) -> None:
    """The user guide's pages into ``target``, with a ``SOURCES.tsv`` naming their site paths."""
    target.mkdir(parents=True, exist_ok=True)
    listed = _mirror_sources(client, base)
    saved: list[tuple[str, str]] = []
    if listed is not None:
        folder, paths = listed
        for site_path in paths:
            stem = site_path.strip("/").replace("/", "_")
            for suffix in (".mdx", ".md", ".html"):
                if _fetch(
                    client,
                    [urljoin(folder, stem + suffix)],
                    target / (stem + suffix),
                    progress=progress,
                ):
                    saved.append((site_path, stem + suffix))
                    break
    else:
        parts = urlsplit(base)
        site = f"{parts.scheme}://{parts.netloc}"
        for site_path in USERGUIDE_PAGES:
            name = site_path.strip("/").replace("/", "_") + ".html"
            if _fetch(client, [site + site_path], target / name, progress=progress):
                saved.append((site_path, name))
    if not saved:
        raise DownloadError(
            f"no user-guide pages could be fetched from {base}",
            fix="leave userguide out with --collections, or use --from with saved pages",
        )
    lines = ["url_path\tfile", *(f"{path}\t{name}" for path, name in saved)]
    (target / SOURCES_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")


def download_release(
    target: Path,
    collections: Sequence[str],
    *,
    release: str | None = None,
    base_url: str | None = None,
    progress: bool = False,
    catalog: Catalog | None = None,
) -> Path:
    """Download what ``collections`` need into ``target``/<collection>/ and return ``target``."""
    catalog = catalog or catalog_for()
    base = base_url or urljoin(REACTOME_DOWNLOAD_URL, f"{release or 'current'}/")
    base = base if base.endswith("/") else base + "/"
    with httpx.Client(timeout=_TIMEOUT, follow_redirects=True) as client:
        for name in catalog.check(collections):
            definition = catalog[name]
            folder = target / name
            if definition.download is None:
                raise DownloadError(
                    f"collection {name!r} declares no download ({definition.path})",
                    fix="ingest it with --from DIR, or leave it out with --collections",
                )
            downloader = definition.download_function()
            if downloader is not None:
                downloader(client, base, folder, progress=progress)
                continue
            folder.mkdir(parents=True, exist_ok=True)
            for spec in definition.files:
                if spec.name is None:
                    raise DownloadError(
                        f"collection {name!r}: files.{spec.role} is a folder of pages, which a "
                        "release folder does not list",
                        fix="give the collection a download function, or ingest it with --from",
                    )
                urls = [urljoin(base, spec.name), urljoin(base, f"{name}/{spec.name}")]
                fetched = _fetch(client, urls, folder / spec.name, progress=progress)
                if not fetched and spec.required:
                    raise DownloadError(
                        f"{spec.name} is not at {urls[0]}",
                        fix="check --release, or pass --download-url for a mirror",
                    )
    return target
