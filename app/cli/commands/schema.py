"""``reactome-answers schema``: the JSON Schema of one event of the answer stream."""

from __future__ import annotations

import argparse
import json

from pipelines.core.settings import Settings

__all__ = ["SUMMARY", "add_arguments", "run"]

SUMMARY = "print the JSON Schema of one event of the answer stream"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # nothing but the settings options


def run(args: argparse.Namespace, settings: Settings) -> int:
    from callbacks.events import event_json_schema

    print(json.dumps(event_json_schema(), indent=2))
    return 0
