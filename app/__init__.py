"""The delivery side of reactome-answers: the command line (``app.cli``), the FastAPI backend
with JSON and Server-Sent Events (``app.server``), the replay server (``app.replay_server``)
and the reference web client (``app/web/``)."""

from app.cli import build_parser, main

__all__ = ["build_parser", "main"]
