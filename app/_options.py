"""Argument types shared by the commands."""

from __future__ import annotations

import argparse

__all__ = ["port_number"]


def port_number(value: str) -> int:
    """A TCP port to listen on, 1-65535 (the system would wrap a larger one silently)."""
    try:
        port = int(value)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port; give a number from 1 to 65535")
    return port
