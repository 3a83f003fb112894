"""The ``reactome-answers`` command line.

Options that change settings (``--home``, ``--llm``, ...) are accepted before or after any
command and action (see :class:`app.cli.options.CommandParser`) and override the matching
environment variables; given twice, the later one wins.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version

from app.cli.commands.ask import add_ask_arguments, cmd_ask
from app.cli.commands.chat import add_chat_arguments, cmd_chat
from app.cli.commands.ingest import add_ingest_arguments, cmd_collections, cmd_ingest
from app.cli.commands.logs import add_logs_arguments, add_replay_arguments, cmd_logs, cmd_replay
from app.cli.commands.mcp import cmd_mcp
from app.cli.options import SETTING_FIELDS, CommandParser, port_number, worker_count
from app.cli.terminal.guard import guard_output
from app.http.settings import load_server_settings
from callbacks.events import event_json_schema
from pipelines.core.errors import ReactomeAnswersError
from pipelines.core.redaction import redact_secrets
from pipelines.core.settings import Settings, env_var_for, load_settings

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


def _cmd_schema(args: argparse.Namespace, settings: Settings) -> int:
    print(json.dumps(event_json_schema(), indent=2))
    return 0


def _cmd_config(args: argparse.Namespace, settings: Settings) -> int:
    server = load_server_settings()
    print(json.dumps(settings.model_dump(mode="json") | server.model_dump(mode="json"), indent=2))
    return 0


def _add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument(
        "--port", type=port_number, default=8000, help="port to listen on (1-65535)"
    )
    parser.add_argument(
        "--workers",
        type=worker_count,
        default=1,
        help="worker processes sharing the port, each with its own models (default 1); "
        "limits such as REACTOME_ANSWERS_MAX_CONCURRENT_ANSWERS apply per worker unless "
        "REACTOME_ANSWERS_REDIS_URL shares them",
    )


def _cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    from app.http.factory import create_app
    from app.http.middleware.transport import run

    workers = f" with {args.workers} workers" if args.workers > 1 else ""
    print(
        f"{PROG}: serving on http://{args.host}:{args.port}/{workers} (API docs at /docs)",
        file=sys.stderr,
    )
    server = load_server_settings()
    if args.workers == 1:
        run(create_app(settings, server=server), server, host=args.host, port=args.port)
        return 0
    # Each worker builds its settings from the environment: the options given here go there.
    for field in SETTING_FIELDS:
        value = getattr(settings, field)
        if value is not None:
            os.environ[env_var_for(field)] = str(value)
    # The workers' metrics meet in a folder of this run's (prometheus-client's multiprocess
    # mode): a scrape of any worker adds up all of them.
    with tempfile.TemporaryDirectory(prefix="reactome-answers-metrics-") as metrics:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics
        run(
            "app.http.factory:worker_app",
            server,
            host=args.host,
            port=args.port,
            workers=args.workers,
        )
    return 0


def _add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")


_Handler = Callable[[argparse.Namespace, Settings], int]
_Arguments = Callable[[argparse.ArgumentParser], None]

# name -> (one-line help, handler, adds the command's own arguments)
_COMMANDS: dict[str, tuple[str, _Handler, _Arguments | None]] = {
    "ask": (
        "answer a question from the ingested collections, streaming, with its sources",
        cmd_ask,
        add_ask_arguments,
    ),
    "chat": (
        "a conversation in the terminal: each question asked with the turns before it",
        cmd_chat,
        add_chat_arguments,
    ),
    "ingest": (
        "ingest the sample corpus, a folder of Reactome release files, or a download",
        cmd_ingest,
        add_ingest_arguments,
    ),
    "serve": (
        "serve the HTTP API: POST /v1/answer (JSON) and /v1/answer/stream (SSE), the OpenAI "
        "and AI SDK protocols, MCP tools at /mcp, the web client at /, /healthz, /metrics",
        _cmd_serve,
        _add_serve_arguments,
    ),
    "collections": (
        "list what is ingested: documents, chunks, release, files, model",
        cmd_collections,
        _add_json_flag,
    ),
    "logs": (
        "list, show, view, measure, re-ask and prune the recorded event logs",
        cmd_logs,
        add_logs_arguments,
    ),
    "replay": (
        "re-emit a recorded answer; or check it against a fresh handler (--check), show its "
        "candidates or the model's input, or ask it again on this release (--rerun)",
        cmd_replay,
        add_replay_arguments,
    ),
    "mcp": (
        "serve the tools ask_reactome and search_reactome over MCP's stdio transport, for an "
        "assistant that starts this command",
        cmd_mcp,
        None,
    ),
    "schema": ("print the JSON Schema of one event of the answer stream", _cmd_schema, None),
    "config": (
        "print the settings in effect, after environment and options, as JSON",
        _cmd_config,
        None,
    ),
}


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
    for name, (summary, handler, add_arguments) in _COMMANDS.items():
        sub = commands.add_parser(name, help=summary, description=summary)
        if add_arguments is not None:
            add_arguments(sub)
        sub.set_defaults(handler=handler)
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
