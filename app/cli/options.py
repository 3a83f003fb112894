"""Argument types shared by the commands, and the parser every command and action is built on.

The settings options (``--home``, ``--llm``, ...) are defined once, here, and
:class:`CommandParser` adds them to every parser it makes: the top-level one, each command's
and each command's actions' (``add_subparsers`` makes its parsers of the class of the parser
it is called on). So they work before or after any command and action, a new command or
action gets them without asking, and one given twice takes the later value.
"""

from __future__ import annotations

import argparse
from typing import Any

from pipelines.core.settings import env_var_for

__all__ = ["SETTINGS_GROUP", "SETTING_FIELDS", "CommandParser", "port_number", "worker_count"]

SETTINGS_GROUP = "settings (override the environment)"
_SETTINGS_PLACES = (
    "accepted before or after any command and its action; an option given twice: the later one wins"
)

# (settings field, option help) for every option that overrides a setting with a value.
_VALUE_OPTIONS: tuple[tuple[str, str], ...] = (
    ("home", "folder for the store and logs"),
    ("llm", "answer model: extractive, llamacpp[:PATH], openai:MODEL"),
    ("chroma_host", "use the Chroma server on this host instead of the home folder"),
    ("chroma_port", "port of that Chroma server"),
)

# (option, settings field, help) for on/off settings; each also gets its --no- form.
_SWITCH_OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("--cite-urls", "cite_urls", "cite user-guide pages by their url"),
    ("--log", "event_logs", "write an event log per request under HOME/logs"),
)

# The settings fields the options above override (the namespace attributes they set).
SETTING_FIELDS: tuple[str, ...] = (
    *(field for field, _ in _VALUE_OPTIONS),
    *(field for _, field, _ in _SWITCH_OPTIONS),
)


def _int_between(value: str, low: int, high: int) -> int | None:
    """``value`` as an int in ``low..high``, or None."""
    try:
        number = int(value)
    except ValueError:
        return None
    return number if low <= number <= high else None


def port_number(value: str) -> int:
    """A TCP port to listen on, 1-65535 (the system would wrap a larger one silently)."""
    port = _int_between(value, 1, 65535)
    if port is None:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port; give a number from 1 to 65535")
    return port


def worker_count(value: str) -> int:
    """How many worker processes ``serve`` runs: 1 to 64."""
    count = _int_between(value, 1, 64)
    if count is None:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a worker count; give a number from 1 to 64 (about one per core)"
        )
    return count


def _add_setting_options(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS: an option not given sets nothing, so a parser further down (a command, an
    # action) never erases what was given before it, and the last one given wins.
    group = parser.add_argument_group(SETTINGS_GROUP, _SETTINGS_PLACES)
    for field, help_text in _VALUE_OPTIONS:
        group.add_argument(
            f"--{field.replace('_', '-')}",
            dest=field,
            type=int if field == "chroma_port" else str,
            default=argparse.SUPPRESS,
            metavar=field.split("_")[-1].upper(),
            help=f"{help_text} [{env_var_for(field)}]",
        )
    for option, field, help_text in _SWITCH_OPTIONS:
        group.add_argument(
            option,
            dest=field,
            action=argparse.BooleanOptionalAction,
            default=argparse.SUPPRESS,
            help=f"{help_text} [{env_var_for(field)}]",
        )


class CommandParser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` that accepts the settings options; the parsers
    its ``add_subparsers`` makes are ``CommandParser``\\ s too, so they accept them as well."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _add_setting_options(self)
