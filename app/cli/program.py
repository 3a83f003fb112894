"""The ``reactome-answers`` command line.

Options that change settings (``--home``, ``--llm``, ...) are accepted before or after any
command and action (see :class:`app.cli.options.CommandParser`) and override the matching
environment variables; given twice, the later one wins.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version

from app.cli.options import CommandParser
from app.cli.registry import COMMANDS
from app.cli.terminal.guard import guard_output
from app.http.settings import load_server_settings
from pipelines.core.errors import ReactomeAnswersError
from pipelines.core.redaction import redact_secrets
from pipelines.core.settings import Settings, load_settings

__all__ = ["build_parser", "main"]

PROG = "reactome-answers"
# Failures writing our own output (a full disk, a closed terminal), told from failures of
# files we were asked to read, which carry a filename.
_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EIO, errno.EPIPE, errno.EBADF})

_DESCRIPTION = """\
Answer questions about human biology from Reactome, with every [n] citation pointing at a
real Reactome entity.

Settings come from REACTOME_ANSWERS_* environment variables (CHROMA_HOST and CHROMA_PORT for
a Chroma server); the settings options below override them for one run. They are accepted
before or after any command and its action (`reactome-answers logs list --home H` or
`reactome-answers --home H logs list`); an option given twice: the later one wins.
"""


def _package_version() -> str:
    try:
        return version(PROG)
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    # Every parser below, commands' and their actions', is a CommandParser: each accepts the
    # settings options, and one given twice (before and after a command) takes the later value.
    parser = CommandParser(
        prog=PROG,
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_package_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in COMMANDS.items():
        sub = commands.add_parser(name, help=command.SUMMARY, description=command.SUMMARY)
        command.add_arguments(sub)
        sub.set_defaults(handler=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # Whatever a request put in a question, an answer or a log is shown, never obeyed, by the
    # terminal this prints to (argparse's own messages included).
    with guard_output():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    overrides = {field: getattr(args, field, None) for field in Settings.model_fields}
    try:
        settings = load_settings(**overrides)
        # The server's settings come from the environment only. Checked for every command, so
        # that a bad one is reported at once, not first by the next serve.
        load_server_settings()
        handler: Callable[[argparse.Namespace, Settings], int] = args.handler
        return handler(args, settings)
    except ReactomeAnswersError as error:
        print(f"{PROG}: error: {redact_secrets(str(error))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`... | head`): nothing left to say, and nothing to flush.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as error:
        if error.filename is None and error.errno in _OUTPUT_ERRNOS:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            print(f"{PROG}: error: cannot write the output ({error.strerror})", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    raise SystemExit(main())
