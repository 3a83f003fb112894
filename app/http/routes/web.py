"""The reference web client mounted on an application: the page (``app/web/index.html``) at
``/`` and its assets (``app/web/static/``) under ``/static``."""

from __future__ import annotations

import mimetypes
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["WEB_DIR", "add_web_client"]

WEB_DIR = Path(__file__).parents[2] / "web"
# The page runs only its own script and talks only to this server; a source that smuggles
# markup into an answer has nothing to load or run even if the client ever slipped.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}


def add_web_client(app: FastAPI) -> None:
    @app.get("/", include_in_schema=False)
    async def web_client() -> FileResponse:
        return FileResponse(WEB_DIR / "index.html", headers=PAGE_HEADERS)

    # The page's scripts are ES modules, which a browser runs only when they are served with a
    # JavaScript type; StaticFiles takes the type from the operating system's table, which
    # may say otherwise (text/plain in some Windows registries). Python 3.12 maps .js so too.
    mimetypes.add_type("text/javascript", ".js")
    # Only the assets folder is mounted, so the page itself is reachable only at / with its
    # policy headers.
    app.mount("/static", StaticFiles(directory=WEB_DIR / "static"), name="static")
