"""What may be cited: a Reactome stable id, or a page address that is not a local file path.

The event model refuses anything else, and :mod:`pipelines.citations.sources` treats a
document whose identifier fails these checks as unnumbered context, so the two can never disagree.
"""

from __future__ import annotations

import re

__all__ = [
    "HTTP_URL_PATTERN",
    "SITE_PATH_PATTERN",
    "ST_ID_PATTERN",
    "st_id_problem",
    "url_problem",
]

# Reactome stable ids: R-<species>-<number>, optionally with a version suffix (R-HSA-69278.3).
ST_ID_PATTERN = r"R-[A-Z]{3,4}-[0-9]+(?:\.[0-9]+)?"
SITE_PATH_PATTERN = r"/(?!/)[^\s\\]*"
HTTP_URL_PATTERN = r"[Hh][Tt][Tt][Pp][Ss]?://[^\s/\\]+[^\s\\]*"

_ST_ID_RE = re.compile(ST_ID_PATTERN)
_URL_RE = re.compile(f"{SITE_PATH_PATTERN}|{HTTP_URL_PATTERN}")
# A url whose path ends in a source-file extension, or a site path under a filesystem root,
# is a local file path that leaked into metadata, never a page address.
_SOURCE_FILE_SUFFIXES = (".md", ".mdx", ".txt", ".tsv", ".json", ".py")
_SITE_PATH_ONLY_SUFFIXES = (".html", ".htm")
_FILESYSTEM_ROOTS = frozenset(
    {"bin", "boot", "dev", "etc", "home", "lib", "media", "mnt", "opt", "private", "proc"}
    | {"root", "run", "srv", "sys", "tmp", "usr", "var", "work", "Users", "Volumes"}
)


def st_id_problem(value: str) -> str | None:
    """Why ``value`` is not a Reactome stable id, or None when it is one."""
    if _ST_ID_RE.fullmatch(value):
        return None
    return f"st_id {value!r} is not a Reactome stable id such as R-HSA-69278"


def url_problem(value: str) -> str | None:
    """Why ``value`` is not a citable page address, or None when it is one."""
    if not _URL_RE.fullmatch(value):
        return (
            f"url {value!r} is neither a site path such as /userguide/pathway-browser "
            "nor an http(s) URL"
        )
    path = re.split(r"[?#]", value, maxsplit=1)[0].lower()
    site_path = value.startswith("/")
    suffixes = _SOURCE_FILE_SUFFIXES + (_SITE_PATH_ONLY_SUFFIXES if site_path else ())
    first_segment = value.split("/")[1] if site_path else ""
    if path.endswith(suffixes) or "/../" in path or first_segment in _FILESYSTEM_ROOTS:
        return f"url {value!r} looks like a local file path, not a page address"
    return None
