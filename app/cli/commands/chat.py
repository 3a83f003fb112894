"""The ``chat`` command: a conversation in the terminal, each question asked with the turns
before it, each answer streamed with its sources. Ctrl-D (end of input) leaves; ``/new``
starts a new conversation."""

from __future__ import annotations

import argparse
import sys

from app.cli.commands.ask import add_answer_options, print_answer
from app.cli.terminal.guard import visible
from pipelines.core.settings import Settings

__all__ = ["SUMMARY", "add_arguments", "run"]

SUMMARY = "a conversation in the terminal: each question asked with the turns before it"

_NEW = "/new"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_answer_options(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from pipelines.pipeline import AnswerPipeline

    pipeline = AnswerPipeline(settings)
    history: list[tuple[str, str]] = []
    interactive = sys.stdin.isatty()
    if interactive:
        print(f"Ask about Reactome; {_NEW} starts over, Ctrl-D leaves.", file=sys.stderr)
    while True:
        try:
            question = input("you> " if interactive else "")
        except EOFError:
            if interactive:
                print(file=sys.stderr)
            return 0
        question = question.strip()
        if not question:
            continue
        if question == _NEW:
            history.clear()
            print("(a new conversation)", file=sys.stderr)
            continue
        if not interactive:
            print(f"you> {visible(question)}")  # a transcript shows what was asked
        done = print_answer(pipeline, question, args, history)
        print()
        if done.state in ("answered", "nothing_found"):
            history += [("user", question), ("assistant", done.text)]
