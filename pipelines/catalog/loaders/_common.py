"""What every loader shares: the document record, row problems, and tolerant line reading."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pipelines.core.hashing import joined_digest

__all__ = [
    "ST_ID_RE",
    "LoadResult",
    "LoadedDocument",
    "Problem",
    "read_lines",
    "sha256_of",
    "short_hash",
]

# Stable ids as the release files write them (no version suffix).
ST_ID_RE = re.compile(r"R-[A-Z]{3}-[0-9]+")

MetadataValue = str | int | float | bool


@dataclass(frozen=True)
class LoadedDocument:
    """One entity (pathway, variant, user-guide section) before chunking.

    ``key`` is unique within its collection and stable across runs: the stable id, the url
    with its section, or for a variant its own key. ``citation`` holds exactly what the
    entity may be cited as (``st_id`` or ``url``, plus ``display_name``), empty when it is
    context only.
    """

    key: str
    title: str
    text: str
    origin: str  # "file:line" for messages
    citation: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, MetadataValue] = field(default_factory=dict)
    # What the collection counts as one entity; user-guide sections of a page share its url.
    entity: str = ""

    @property
    def entity_key(self) -> str:
        return self.entity or self.key


@dataclass(frozen=True)
class Problem:
    """A row or file that was not ingested, and why; ``error`` means it could not be read."""

    origin: str
    message: str
    kind: Literal["skipped", "error"]

    def __str__(self) -> str:
        return f"{self.origin}: {self.message}"


@dataclass
class LoadResult:
    documents: list[LoadedDocument] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # file name -> sha256

    def skip(self, origin: str, message: str) -> None:
        self.problems.append(Problem(origin, message, "skipped"))

    def error(self, origin: str, message: str) -> None:
        self.problems.append(Problem(origin, message, "error"))

    def extend(self, other: LoadResult) -> None:
        self.documents.extend(other.documents)
        self.problems.extend(other.problems)
        self.files.update(other.files)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def short_hash(*parts: str) -> str:
    # Part of stored ids: the algorithm and length are fixed for good.
    return joined_digest(*parts, algorithm="sha1", chars=12)


def read_lines(path: Path, result: LoadResult) -> Iterator[tuple[int, str]]:
    """Yield ``(line number, text)`` for each line; a line that is not UTF-8 is an error.

    Decoding line by line means one bad byte costs one row, not the whole file.
    """
    result.files[path.name] = sha256_of(path)
    with path.open("rb") as stream:
        for number, raw in enumerate(stream, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                bad = raw[error.start : error.start + 1].hex()
                result.error(
                    f"{path.name}:{number}",
                    f"not UTF-8 (byte 0x{bad} at column {error.start + 1}); "
                    "re-save the file as UTF-8",
                )
                continue
            if number == 1:
                line = line.removeprefix("\ufeff")
            yield number, line.rstrip("\r\n")
