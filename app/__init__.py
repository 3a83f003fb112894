"""The delivery side of reactome-answers: the command line (``app.cli``), the HTTP service
(``app.http``: the FastAPI backend with JSON and Server-Sent Events, the chat protocols, MCP
and the replay server) and the reference web client (``app/web/``)."""

from app.cli import build_parser, main

__all__ = ["build_parser", "main"]
