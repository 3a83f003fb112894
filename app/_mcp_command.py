"""``reactome-answers mcp``: the pipeline's tools over the Model Context Protocol's stdio
transport, for a desktop assistant or an agent that starts it as a subprocess
(:mod:`app._mcp_server`; docs/integrations.md shows the configuration)."""

from __future__ import annotations

import argparse
import io
import sys

from app._mcp_server import mcp_server
from pipelines.catalog.catalog import catalog_for
from pipelines.core.settings import Settings
from pipelines.pipeline import AnswerPipeline

__all__ = ["cmd_mcp"]


def cmd_mcp(args: argparse.Namespace, settings: Settings) -> int:
    del args  # the settings options are all it takes
    pipeline = AnswerPipeline(settings)
    server = mcp_server(pipeline, catalog_for(settings))
    # Standard output is the protocol's: while it serves, the SDK points whatever else would
    # print there (a progress bar, a stray print) at standard error, the server's log. Text
    # still in Python's buffer would reach the client after it stops, so none is kept.
    if isinstance(sys.__stdout__, io.TextIOWrapper):
        sys.__stdout__.reconfigure(line_buffering=True)
    server.run("stdio")
    return 0
