"""The delivery side of reactome-answers: the command line (HTTP and web client to come)."""

from app.cli import build_parser, main

__all__ = ["build_parser", "main"]
