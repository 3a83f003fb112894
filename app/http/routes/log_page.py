"""The log page: one answer's log in a browser, three ways.

- ``serve``: ``GET /logs/{request_id}`` is the page (``app/web/static/log.html``, the same
  file for every id, holding no data, so anyone may load it); its script fetches the view
  from ``GET /v1/logs/{request_id}``, which is behind the API keys like every ``/v1`` path,
  sending the key the web client keeps for the tab (or asking for one). A server without
  keys answers 404 for an unknown id on both; one with keys says so only on the data, to a
  caller with a key, so that the page tells a caller without one nothing and costs it no
  look into the logs folder.
- ``replay LOG --serve PORT``: the same two routes for the replayed log only.
- ``logs view ID``: one self-contained HTML file, its script and style inlined (with a
  Content-Security-Policy that allows only them) and the view embedded as JSON.

The view is :func:`callbacks.log_view.log_view`'s; the page only draws it.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import stat
from pathlib import Path
from typing import Any

from fastapi import APIRouter
from fastapi.responses import FileResponse, JSONResponse, Response

from app.http.deps import SettingsDep
from app.http.errors import answer_not_logged, error_response
from app.http.routes.web import PAGE_HEADERS, WEB_DIR
from callbacks.events import StartEvent
from callbacks.feedback import read_feedback
from callbacks.log import LogContents, find_request_logs, read_log
from callbacks.log_view import log_view as view_of_log
from callbacks.log_view import read_log_view
from pipelines.core.errors import EventLogError, InputError

__all__ = [
    "LOG_PAGE",
    "LogsFolderUnreadableError",
    "bundle_modules",
    "log_page_router",
    "logs_folder_unreadable",
    "newest_answer_log",
    "replay_log_router",
    "standalone_page",
    "write_log_page",
]

STATIC_DIR = WEB_DIR / "static"
LOG_PAGE = STATIC_DIR / "log.html"
# A view holds what users asked: it is nobody's to keep.
_PRIVATE = {"Cache-Control": "no-store"}
# No request id is this long (ours are 32 characters): not worth a look into the folder.
_MAX_ID_CHARS = 200


def _not_found(request_id: str) -> JSONResponse:
    return answer_not_logged(request_id, "see 'reactome-answers logs list'")


def _page(status_code: int = 200) -> FileResponse:
    return FileResponse(LOG_PAGE, status_code=status_code, headers=PAGE_HEADERS)


class LogsFolderUnreadableError(Exception):
    """The logs folder cannot be listed; the server's own log has the path and why."""


def logs_folder_unreadable() -> JSONResponse:
    """The 500 for a logs folder that cannot be listed, naming no path: the caller is a
    client, and the folder's place is the server's business."""
    return error_response(
        500,
        "event_log",
        "this server cannot read its logs folder now; its operator can see why with "
        "'reactome-answers logs list'",
    )


def newest_answer_log(
    folder: Path, request_id: str, *, callbacks: bool = True
) -> tuple[Path, LogContents] | None:
    """The newest log of ``request_id`` in ``folder`` that is an answer's log (an id logged
    twice gives its latest answer), read (``callbacks``: as :func:`callbacks.log.read_log`);
    None when there is none. A server serves and rates only these: a regular file in the
    folder itself (not a link out of it, a FIFO, a device or a folder) whose header and
    ``start`` event are this request's. Whatever else holds a log's name is passed over
    without a word to the client (its errors name the server's folder). Off the event loop,
    since it lists and reads files; :class:`LogsFolderUnreadableError` when the folder
    cannot be listed."""
    if len(request_id) > _MAX_ID_CHARS:
        return None
    try:
        logs = find_request_logs(folder, request_id)
    except EventLogError as error:
        raise LogsFolderUnreadableError(str(error)) from None
    for path in reversed(logs):
        try:
            if not stat.S_ISREG(path.lstat().st_mode):
                continue
            contents = read_log(path, callbacks=callbacks)
        except (OSError, EventLogError):
            continue
        if contents.header.request_id == request_id and any(
            isinstance(event, StartEvent) and event.request_id == request_id
            for event in contents.events
        ):
            return path, contents
    return None


def _newest_view(
    folder: Path, request_id: str, trace_url: str | None = None
) -> dict[str, Any] | None:
    """The view of :func:`newest_answer_log`, with its feedback, or None."""
    found = newest_answer_log(folder, request_id)
    if found is None:
        return None
    path, contents = found
    return view_of_log(contents, feedback=read_feedback(path), trace_url=trace_url)


def _is_logged(folder: Path, request_id: str) -> bool:
    return newest_answer_log(folder, request_id, callbacks=False) is not None


def log_page_router(*, keyed: bool) -> APIRouter:
    """``serve``'s page and data routes; ``keyed``: the server takes API keys."""
    router = APIRouter(tags=["logs"])

    @router.get("/logs/{request_id}", include_in_schema=False)
    async def log_page(request_id: str, settings: SettingsDep) -> Response:
        if not keyed:
            try:
                logged = await asyncio.to_thread(_is_logged, settings.logs_dir, request_id)
            except LogsFolderUnreadableError:
                return logs_folder_unreadable()
            if not logged:
                # Still the page, for a reader who followed a link: it asks /v1/logs/{id}
                # and says, in words, that the answer is not in the logs. The status is 404.
                return _page(status_code=404)
        return _page()

    @router.get(
        "/v1/logs/{request_id}",
        summary="One answer's log as the log page shows it (callbacks/log_view.py)",
        responses={404: {"description": "no answer with this request id is logged"}},
    )
    async def log_view(request_id: str, settings: SettingsDep) -> JSONResponse:
        try:
            view = await asyncio.to_thread(
                _newest_view, settings.logs_dir, request_id, settings.trace_url
            )
        except LogsFolderUnreadableError:
            return logs_folder_unreadable()
        if view is None:
            return _not_found(request_id)
        return JSONResponse(view, headers=_PRIVATE)

    return router


def replay_log_router(view: dict[str, Any]) -> APIRouter:
    """The page and data routes of ``replay --serve``, for the one log it replays."""
    router = APIRouter(tags=["logs"])
    logged = str(view.get("request_id"))

    @router.get("/logs/{request_id}", include_in_schema=False)
    async def log_page(request_id: str) -> Response:
        return _page() if request_id == logged else _not_found(request_id)

    @router.get("/v1/logs/{request_id}", summary="The replayed answer's log, as the page shows it")
    async def log_view(request_id: str) -> JSONResponse:
        if request_id != logged:
            return _not_found(request_id)
        return JSONResponse(view, headers=_PRIVATE)

    return router


# --- The self-contained file --------------------------------------------------------------------

# The only module syntax our static scripts use, which is all bundle_modules understands.
_IMPORT = re.compile(r'import \{(?P<names>[^}]*)\} from "\./(?P<module>[\w.-]+\.js)";')
_EXPORT = re.compile(r"export (?=(?:async )?(?:function\*?|class|const|let) (?P<name>\w+))")


def bundle_modules(folder: Path, entry: str) -> str:
    """``entry`` and the modules it imports from ``folder`` as one script without imports,
    for a page opened from a file (a browser loads no module from ``file://``): each module
    becomes a function scope returning its exports, dependencies first. Only the forms our
    scripts use are read (``import { a, b } from "./m.js";`` on one line, ``export`` before a
    declaration); any other import or export is a ValueError, so a script written otherwise
    fails the tests rather than a user's page."""
    order: list[str] = []
    bodies: dict[str, str] = {}

    def visit(module: str, path: tuple[str, ...]) -> None:
        if module in bodies:
            return
        if module in path:
            raise ValueError(f"{module} imports itself through {' -> '.join(path)}")
        lines: list[str] = []
        exports: list[str] = []
        for line in (folder / module).read_text(encoding="utf-8").splitlines():
            imported = _IMPORT.fullmatch(line.strip())
            if imported:
                visit(imported["module"], (*path, module))
                lines.append(f"const {{{imported['names']}}} = {_scope(imported['module'])};")
                continue
            exported = _EXPORT.match(line)
            if exported:
                exports.append(exported["name"])
                line = line[exported.end() :]
            elif re.match(r"\s*(import|export)\b", line):
                raise ValueError(f"{module}: cannot inline {line.strip()!r}")
            lines.append(line)
        bodies[module] = "\n".join(lines) + f"\nreturn {{ {', '.join(exports)} }};"
        order.append(module)

    visit(entry, ())
    return "\n".join(
        f"const {_scope(module)} = (() => {{\n{bodies[module]}\n}})();" for module in order
    )


def _scope(module: str) -> str:
    return "module_" + re.sub(r"\W", "_", module)


def _json_in_html(value: Any) -> str:
    """``value`` as JSON that ends no element it is put in: every ``<`` (so ``</script>``
    and ``<!--`` too), ``>`` and ``&`` as a ``\\u`` escape, which JSON reads back the same."""
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _digest(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode()


def standalone_page(view: dict[str, Any]) -> str:
    """The log page for ``view`` as one HTML file that needs no server."""
    html = LOG_PAGE.read_text(encoding="utf-8")
    script = "\n" + bundle_modules(STATIC_DIR, "log.js") + "\n"
    style = "\n" + (STATIC_DIR / "log.css").read_text(encoding="utf-8")
    if re.search(r"</(script|style)", script + style, re.IGNORECASE):
        raise ValueError("the page's script or style holds a closing tag: it cannot be inlined")
    # Only the page's own script and style may run, as the served page's headers say.
    policy = (
        f"default-src 'none'; script-src '{_digest(script)}'; style-src '{_digest(style)}'; "
        "base-uri 'none'; form-action 'none'"
    )
    replacements = {
        # A file has no server to fetch an icon from.
        '<link rel="icon" href="../static/favicon.svg" type="image/svg+xml">\n  ': "",
        '<link rel="stylesheet" href="../static/log.css">': (
            f'<meta http-equiv="Content-Security-Policy" content="{policy}">\n'
            f"  <style>{style}</style>"
        ),
        '<script type="module" src="../static/log.js"></script>': (
            f'<script type="application/json" id="log-view">{_json_in_html(view)}</script>\n'
            f'  <script type="module">{script}</script>'
        ),
    }
    for tag, inlined in replacements.items():
        if tag not in html:
            raise ValueError(f"{LOG_PAGE.name} no longer holds {tag}")
        html = html.replace(tag, inlined)
    return html


def write_log_page(log_path: Path, output: Path | None, trace_url: str | None = None) -> Path:
    """Write the page of the log at ``log_path`` to ``output`` (default: ``log-<request
    id>.html`` in the current folder); returns where. ``trace_url``: the settings' template
    of a trace's page, linked from the page."""
    view = read_log_view(log_path, trace_url)
    if output is None:
        output = Path(f"log-{re.sub(r'[^A-Za-z0-9_.-]', '_', view['request_id'])[:80]}.html")
    try:
        output.write_text(standalone_page(view), encoding="utf-8")
    except OSError as error:
        raise InputError(
            f"cannot write {output} ({error.strerror or error})",
            fix="give --output a file in a folder you can write",
        ) from None
    return output.resolve()
