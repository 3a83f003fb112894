"""``reactome-answers config``: the settings in effect, the pipeline's and the server's."""

from __future__ import annotations

import argparse
import json

from app.http.settings import load_server_settings
from pipelines.core.settings import Settings

__all__ = ["SUMMARY", "add_arguments", "run"]

SUMMARY = "print the settings in effect, after environment and options, as JSON"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # nothing but the settings options


def run(args: argparse.Namespace, settings: Settings) -> int:
    server = load_server_settings()
    print(json.dumps(settings.model_dump(mode="json") | server.model_dump(mode="json"), indent=2))
    return 0
