"""The ``reactome-answers`` command line: :func:`main` is the installed command."""

from app.cli.program import build_parser, main

__all__ = ["build_parser", "main"]
