"""The collections as data: each ``collection.toml`` read into the :class:`Catalog`
(``catalog``), the loaders that read release files and user-guide pages into
:class:`LoadedDocument` records (``loaders/``), and the release downloads (``download``).
"""

from typing import TYPE_CHECKING

from pipelines.catalog.catalog import (
    Catalog,
    CollectionDefinition,
    FileSpec,
    Routing,
    bundled_dir,
    catalog_for,
    catalog_from_path,
    load_catalog,
    load_definitions,
)
from pipelines.catalog.loaders import (
    LoadedDocument,
    LoadResult,
    Problem,
    load_reactome,
    load_userguide,
    load_variants,
)
from pipelines.core.lazy import lazy_attributes

if TYPE_CHECKING:
    from pipelines.catalog.download import (
        REACTOME_DOWNLOAD_URL,
        USERGUIDE_PAGES,
        download_release,
        download_userguide,
    )

__all__ = [
    "REACTOME_DOWNLOAD_URL",
    "USERGUIDE_PAGES",
    "Catalog",
    "CollectionDefinition",
    "FileSpec",
    "LoadResult",
    "LoadedDocument",
    "Problem",
    "Routing",
    "bundled_dir",
    "catalog_for",
    "catalog_from_path",
    "download_release",
    "download_userguide",
    "load_catalog",
    "load_definitions",
    "load_reactome",
    "load_userguide",
    "load_variants",
]

# Downloading imports httpx (about 0.1 s), which only the download command needs.
__getattr__ = lazy_attributes(
    __name__,
    dict.fromkeys(
        ("REACTOME_DOWNLOAD_URL", "USERGUIDE_PAGES", "download_release", "download_userguide"),
        "pipelines.catalog.download",
    ),
)
