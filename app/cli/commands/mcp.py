"""``reactome-answers mcp``: the pipeline's tools over the Model Context Protocol's stdio
transport, for a desktop assistant or an agent that starts it as a subprocess
(:mod:`app.http.protocols.mcp_server`, :mod:`app.cli.mcp_stdio`; docs/integrations.md shows
the configuration)."""

from __future__ import annotations

import argparse
import io
import sys

from pipelines.core.settings import Settings

__all__ = ["SUMMARY", "add_arguments", "run"]

SUMMARY = (
    "serve the tools ask_reactome and search_reactome over MCP's stdio transport, for an "
    "assistant that starts this command"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # nothing but the settings options


def run(args: argparse.Namespace, settings: Settings) -> int:
    import anyio

    from app.cli.mcp_stdio import serve_stdio
    from app.http.protocols.mcp_server import mcp_server
    from pipelines.catalog.catalog import catalog_for
    from pipelines.pipeline import AnswerPipeline

    pipeline = AnswerPipeline(settings)
    server = mcp_server(pipeline, catalog_for(settings))
    # Standard output is the protocol's: while it serves, the SDK points whatever else would
    # print there (a progress bar, a stray print) at standard error, the server's log. Text
    # still in Python's buffer would reach the client after it stops, so none is kept.
    if isinstance(sys.__stdout__, io.TextIOWrapper):
        sys.__stdout__.reconfigure(line_buffering=True)
    anyio.run(serve_stdio, server)
    return 0
