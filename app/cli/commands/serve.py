"""``reactome-answers serve``: the HTTP service (:mod:`app.http`) on one port, in one worker
process or several."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from app.cli.options import SETTING_FIELDS, port_number, worker_count
from pipelines.core.settings import Settings, env_var_for

__all__ = ["SUMMARY", "add_arguments", "run"]

SUMMARY = (
    "serve the HTTP API: POST /v1/answer (JSON) and /v1/answer/stream (SSE), the OpenAI "
    "and AI SDK protocols, MCP tools at /mcp, the web client at /, /healthz, /metrics"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
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


def run(args: argparse.Namespace, settings: Settings) -> int:
    from app.http.factory import create_app
    from app.http.middleware.transport import run_server
    from app.http.settings import load_server_settings

    workers = f" with {args.workers} workers" if args.workers > 1 else ""
    print(
        f"reactome-answers: serving on http://{args.host}:{args.port}/{workers} "
        "(API docs at /docs)",
        file=sys.stderr,
    )
    server = load_server_settings()
    if args.workers == 1:
        run_server(create_app(settings, server=server), server, host=args.host, port=args.port)
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
        run_server(
            "app.http.factory:worker_app",
            server,
            host=args.host,
            port=args.port,
            workers=args.workers,
        )
    return 0
