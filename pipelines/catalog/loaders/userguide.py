"""The ``userguide`` collection from user-guide pages (``.mdx``, ``.md``, ``.html``).

Pages are cleaned (front matter, MDX imports and JSX components, image links and HTML tags go;
link text stays) and split at headings. Each section is cited, when url citations are on, by
its page's site path, found in the page's front matter, else in a ``SOURCES.tsv`` beside the
pages, else from the file name.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from pipelines.catalog.loaders._common import LoadedDocument, LoadResult, read_lines

__all__ = ["PAGE_SUFFIXES", "SOURCES_FILE", "clean_markdown", "is_page", "load_userguide"]

PAGE_SUFFIXES = (".mdx", ".md", ".html", ".htm")
SOURCES_FILE = "SOURCES.tsv"

_SITE_PATH_RE = re.compile(r"/[A-Za-z0-9._~%/-]*")
_FENCE_RE = re.compile(r"^ {0,3}(```|~~~)")
_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_MDX_ESM_RE = re.compile(r"^(?:import|export)\s.*$", re.MULTILINE)
_COMMENT_RE = re.compile(r"\{/\*.*?\*/\}|<!--.*?-->", re.DOTALL)
_IMAGE_RE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK_RE = re.compile(r"\[([^\]]*)\]\(<?[^)>]*>?\)")
_JSX_TAG_RE = re.compile(r"</?[A-Z][A-Za-z0-9.]*(?:\s[^<>]*)?/?>")
_HTML_TAG_RE = re.compile(
    r"</?(?:a|b|br|div|em|i|iframe|img|li|ol|p|small|span|strong|sub|sup|table|tbody|td|th|"
    r"thead|tr|u|ul|video|source|figure|figcaption|center|hr)(?:\s[^<>]*)?/?>",
    re.IGNORECASE,
)
_EMPHASIS_RE = re.compile(r"\*\*|__")
_LEFTOVER_LINE_RE = re.compile(r"^[\s_*]+$", re.MULTILINE)
_BLANK_LINES_RE = re.compile(r"\n{3,}")


def clean_markdown(text: str) -> str:
    """Markdown/MDX body to plain prose: link text kept, everything else decorative removed."""
    text = _COMMENT_RE.sub("", text)
    text = _MDX_ESM_RE.sub("", text)
    text = _IMAGE_RE.sub("", text)
    text = _LINK_RE.sub(lambda match: match.group(1).strip(), text)
    text = _JSX_TAG_RE.sub("", text)
    text = _HTML_TAG_RE.sub("", text)
    text = _EMPHASIS_RE.sub("", text)
    text = _LEFTOVER_LINE_RE.sub("", text)
    return _BLANK_LINES_RE.sub("\n\n", text).strip()


def _split_front_matter(text: str) -> tuple[str, str]:
    if not text.startswith("---\n"):
        return "", text
    end = text.find("\n---", 3)
    if end < 0:
        return "", text
    after = text.find("\n", end + 4)
    return text[4:end], text[after + 1 :] if after >= 0 else ""


def _sections(body: str) -> list[tuple[str, str]]:
    """``(heading, text)`` pairs; text before the first heading has an empty heading."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    in_code = False
    for line in body.splitlines():
        if _FENCE_RE.match(line):
            in_code = not in_code
        heading = None if in_code else _HEADING_RE.match(line)
        if heading:
            sections.append((clean_markdown(heading.group(2)), []))
        else:
            sections[-1][1].append(line)
    return [(title, clean_markdown("\n".join(lines))) for title, lines in sections]


class _HTMLSections(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.title = ""
        self.sections: list[tuple[str, list[str]]] = [("", [])]
        self._skip = 0
        self._capture: str | None = None
        self._buffer: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "nav", "footer"):
            self._skip += 1
        elif tag == "title" or re.fullmatch(r"h[1-6]", tag):
            self._capture, self._buffer = tag, []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "nav", "footer"):
            self._skip = max(0, self._skip - 1)
        elif tag == self._capture:
            text = " ".join("".join(self._buffer).split())
            if tag == "title":
                self.title = text
            else:
                self.sections.append((text, []))
            self._capture = None
        elif tag in ("p", "li", "div", "br", "tr"):
            self.sections[-1][1].append("\n")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._capture:
            self._buffer.append(data)
        else:
            self.sections[-1][1].append(data)


def _url_index(folder: Path, result: LoadResult) -> dict[str, str]:
    """File name -> site path, from ``SOURCES.tsv`` (columns ``url_path`` and ``file`` or
    ``repo_path``) when the folder has one."""
    path = folder / SOURCES_FILE
    if not path.is_file():
        return {}
    index: dict[str, str] = {}
    header: list[str] = []
    for number, line in read_lines(path, result):
        cells = line.split("\t")
        if not header:
            header = cells
            if "url_path" not in header:
                result.error(f"{path.name}:{number}", "header lacks the url_path column")
                return {}
            continue
        if len(cells) != len(header):
            result.error(f"{path.name}:{number}", f"expected {len(header)} columns")
            continue
        row = dict(zip(header, cells, strict=True))
        url = row["url_path"].strip()
        if not _SITE_PATH_RE.fullmatch(url):
            result.skip(f"{path.name}:{number}", f"{url!r} is not a site path like /userguide/x")
            continue
        # The shipped pages are named after their site path with "/" turned into "_".
        index.setdefault(url.strip("/").replace("/", "_"), url)
        if row.get("file"):
            index[Path(row["file"].strip()).stem] = url
    return index


def _page_url(path: Path, front: dict[str, object], index: dict[str, str]) -> str | None:
    for key in ("url", "path", "permalink"):
        value = front.get(key)
        if isinstance(value, str) and value.strip():
            url = value.strip()
            return url if _SITE_PATH_RE.fullmatch(url) or url.startswith("https://") else None
    if path.stem in index:
        return index[path.stem]
    if path.stem in ("index", "userguide"):
        return "/userguide"
    # A name with "_" is a flattened site path, as the downloader saves pages.
    return "/" + path.stem.replace("_", "/") if "_" in path.stem else f"/userguide/{path.stem}"


def is_page(path: Path) -> bool:
    """A user-guide page by its suffix; a folder's README is about the files, not a page."""
    return path.suffix.lower() in PAGE_SUFFIXES and path.name.lower() != "readme.md"


def load_userguide(pages: Path) -> LoadResult:
    """One document per section of each page in the folder ``pages``."""
    folder = pages
    result = LoadResult()
    index = _url_index(folder, result)
    for page in sorted(p for p in folder.iterdir() if is_page(p)):
        lines = list(read_lines(page, result))
        if any(problem.origin.startswith(f"{page.name}:") for problem in result.problems):
            continue  # a page with unreadable bytes is reported, not half-ingested
        text = "\n".join(line for _, line in lines)
        front: dict[str, object] = {}
        if page.suffix.lower() in (".html", ".htm"):
            parser = _HTMLSections()
            parser.feed(text)
            title = parser.title
            sections = [(h, " ".join("".join(parts).split())) for h, parts in parser.sections]
        else:
            # Imported here: the catalog package loads this module, and the command line
            # should not pay for a YAML parser it may never use.
            import yaml

            raw_front, body = _split_front_matter(text)
            try:
                loaded = yaml.safe_load(raw_front) if raw_front else {}
            except yaml.YAMLError as error:
                result.error(f"{page.name}:1", f"front matter is not valid YAML ({error})")
                continue
            front = loaded if isinstance(loaded, dict) else {}
            title = str(front.get("title") or "").strip()
            sections = _sections(body)

        url = _page_url(page, front, index)
        if url is None:
            result.skip(f"{page.name}:1", "front matter url is neither a site path nor https URL")
            continue
        title = title or next((h for h, _ in sections if h), "") or page.stem
        used: dict[str, int] = {}
        for heading, body_text in sections:
            if not body_text.strip():
                continue
            section = heading or title
            used[section] = used.get(section, 0) + 1
            suffix = "" if used[section] == 1 else f"~{used[section]}"
            result.documents.append(
                LoadedDocument(
                    key=f"{url}#{section}{suffix}",
                    title=title,
                    text=body_text,
                    origin=f"{page.name}:1",
                    citation={"url": url, "display_name": title},
                    metadata={"url": url, "page_title": title, "section": section},
                    entity=url,
                )
            )
        if not any(doc.metadata.get("url") == url for doc in result.documents):
            result.skip(f"{page.name}:1", "page has no text after cleaning")
    return result
