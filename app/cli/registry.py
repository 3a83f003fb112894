"""The commands of ``reactome-answers``, in the order ``--help`` lists them.

Each command is a module of :mod:`app.cli.commands` with a one-line :data:`SUMMARY`, an
``add_arguments(parser)`` that declares its arguments and a ``run(args, settings)`` that does
the work and returns the exit status. Importing a command module costs little: what a command
needs beyond argparse and the settings (the pipeline, Chroma, the HTTP service, the MCP SDK)
is imported inside its ``run``, so parsing the arguments of any command, and ``--help``,
loads none of it (tests/cli/test_startup.py).
"""

from __future__ import annotations

import argparse
from typing import Protocol

from app.cli.commands import (
    ask,
    chat,
    collections,
    config,
    ingest,
    logs,
    mcp,
    replay,
    schema,
    serve,
)
from pipelines.core.settings import Settings

__all__ = ["COMMANDS", "CommandModule"]


class CommandModule(Protocol):
    """What the registry needs of a command's module."""

    SUMMARY: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace, settings: Settings) -> int: ...


COMMANDS: dict[str, CommandModule] = {
    "ask": ask,
    "chat": chat,
    "ingest": ingest,
    "serve": serve,
    "collections": collections,
    "logs": logs,
    "replay": replay,
    "mcp": mcp,
    "schema": schema,
    "config": config,
}
