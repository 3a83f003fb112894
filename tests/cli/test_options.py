"""The settings options (``--home``, ``--llm``, ...) work before the command, between the
command and its action, and after the action, for every command and action the parser has.

The commands and actions are read from the parser itself, so a new one is covered without
editing this file; what each option must do is written out here, from the issue.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import app.cli.program
from app.cli import build_parser, main
from pipelines.core.settings import ENV_PREFIX, Settings
from tests.support.fake_pipeline import ABCA1, make_pipeline

SCRIPT = Path(sys.executable).parent / "reactome-answers"
SETTINGS_TITLE = "settings (override the environment)"
LATER_WINS = "the later one wins"


# --- the commands and actions, walked from the parser -------------------------------------


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            choices: dict[str, argparse.ArgumentParser] = action.choices
            return choices
    return {}


def walk(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every parser below ``parser`` (commands, their actions, theirs...), with its path."""
    for name, sub in subcommands(parser).items():
        yield (*path, name), sub
        yield from walk(sub, (*path, name))


ALL_PARSERS = dict(walk(build_parser()))
# What a user can run: a command without actions, or one command's action.
RUNNABLE = [path for path, parser in ALL_PARSERS.items() if not subcommands(parser)]


def required_arguments(parser: argparse.ArgumentParser) -> list[str]:
    """The least a user must type after ``parser``'s name for it to parse: a value for each
    positional, the first choice of each required one-of group, each required option."""
    typed: list[str] = []
    grouped: set[int] = set()
    for group in parser._mutually_exclusive_groups:
        grouped.update(id(action) for action in group._group_actions)
        if group.required:
            typed += _give(group._group_actions[0])
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or id(action) in grouped:
            continue
        if not action.option_strings or action.required:
            typed += _give(action)
    return typed


def _give(action: argparse.Action) -> list[str]:
    if action.nargs in ("?", "*"):
        return []
    count = action.nargs if isinstance(action.nargs, int) else 1
    return [*action.option_strings[:1], *["x"] * count]


def layout(
    path: tuple[str, ...], tail: Sequence[str], given: Callable[[int], Sequence[str]]
) -> list[str]:
    """The command line for ``path`` and its arguments ``tail``, with ``given(n)`` typed at
    the n-th place a settings option can go: before the command, after each command or action
    name, and (when there are any) after the arguments."""
    argv = [*given(0)]
    for depth, name in enumerate(path, start=1):
        argv += [name, *given(depth)]
    argv += tail
    if tail:
        argv += given(len(path) + 1)
    return argv


def place_names(path: tuple[str, ...], tail: Sequence[str]) -> list[str]:
    names = [
        "before the command",
        *("after " + " ".join(path[:d]) for d in range(1, len(path) + 1)),
    ]
    return [*names, "after the arguments"] if tail else names


def placements(
    path: tuple[str, ...], given: Sequence[str], tail: Sequence[str] | None = None
) -> dict[str, list[str]]:
    """``given`` (a settings option, with its value) alone at each place, by the place's name;
    ``tail`` defaults to the least the command or action needs."""
    tail = required_arguments(ALL_PARSERS[path]) if tail is None else tail

    def only_at(place: int) -> Callable[[int], Sequence[str]]:
        return lambda n: given if n == place else ()

    return {name: layout(path, tail, only_at(i)) for i, name in enumerate(place_names(path, tail))}


# --- the settings options, and what each must do --------------------------------------------


@dataclass(frozen=True)
class Case:
    """``argv`` given on the command line, with ``env`` set to the opposite, must make the
    setting ``field`` be ``expected``."""

    argv: tuple[str, ...]
    field: str
    expected: Any
    env: tuple[tuple[str, str], ...] = ()


def cases(home: Path) -> list[Case]:
    return [
        Case(("--home", str(home)), "home", home),
        Case(("--llm", "openai:probe-model"), "llm", "openai:probe-model"),
        Case(("--chroma-host", "chroma.invalid"), "chroma_host", "chroma.invalid"),
        Case(("--chroma-port", "8123"), "chroma_port", 8123),
        Case(("--cite-urls",), "cite_urls", True, ((f"{ENV_PREFIX}CITE_URLS", "false"),)),
        Case(("--no-cite-urls",), "cite_urls", False, ((f"{ENV_PREFIX}CITE_URLS", "true"),)),
        Case(("--log",), "event_logs", True, ((f"{ENV_PREFIX}EVENT_LOGS", "false"),)),
        Case(("--no-log",), "event_logs", False, ((f"{ENV_PREFIX}EVENT_LOGS", "true"),)),
    ]


CASE_IDS = [case.argv[0] for case in cases(Path("H"))]
SETTING_OPTIONS = {"--home", "--llm", "--chroma-host", "--chroma-port", "--cite-urls",
                   "--no-cite-urls", "--log", "--no-log"}  # fmt: skip


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A home folder that is not the one the environment names."""
    return tmp_path / "elsewhere"


@dataclass
class Dispatched:
    args: argparse.Namespace
    settings: Settings


@pytest.fixture
def dispatched(monkeypatch: pytest.MonkeyPatch) -> list[Dispatched]:
    """Runs the real ``main`` (parser, settings and all), but with every command's handler
    replaced by one that records what it was handed; so any command can be run safely."""
    calls: list[Dispatched] = []

    def record(args: argparse.Namespace, settings: Settings) -> int:
        calls.append(Dispatched(args, settings))
        return 0

    def recording_parser() -> argparse.ArgumentParser:
        parser = build_parser()
        for _, sub in walk(parser):
            if sub.get_default("handler") is not None:
                sub.set_defaults(handler=record)
        return parser

    monkeypatch.setattr(app.cli.program, "build_parser", recording_parser)
    return calls


def run_main(argv: Sequence[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def script(*args: str) -> subprocess.CompletedProcess[str]:
    assert SCRIPT.exists(), f"{SCRIPT} missing: install the project with 'make test'"
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=600, check=False
    )


def test_the_walk_finds_the_commands_and_the_logs_actions() -> None:
    # A guard on the walk itself: were it to find nothing, the tests below would pass empty.
    assert {"ask", "ingest", "serve", "collections", "replay", "schema", "config"} <= {
        path[0] for path in RUNNABLE
    }
    assert {("logs", name) for name in ("list", "show", "path", "stats", "prune")} <= set(RUNNABLE)
    assert ("logs",) not in RUNNABLE  # it needs an action


@pytest.mark.parametrize("path", list(ALL_PARSERS), ids=" ".join)
def test_every_parser_has_exactly_the_settings_options(path: tuple[str, ...]) -> None:
    groups = [g for g in ALL_PARSERS[path]._action_groups if g.title == SETTINGS_TITLE]
    assert len(groups) == 1, f"{' '.join(path)} has no settings group"
    (group,) = groups
    assert {option for a in group._group_actions for option in a.option_strings} == (
        SETTING_OPTIONS
    )


@pytest.mark.parametrize("case_index", range(len(CASE_IDS)), ids=CASE_IDS)
@pytest.mark.parametrize("path", RUNNABLE, ids=" ".join)
def test_each_option_in_each_place_reaches_the_settings(
    path: tuple[str, ...],
    case_index: int,
    elsewhere: Path,
    dispatched: list[Dispatched],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    case = cases(elsewhere)[case_index]
    for name, value in case.env:
        monkeypatch.setenv(name, value)
    for where, argv in placements(path, case.argv).items():
        dispatched.clear()
        code, _, err = run_main(argv, capsys)
        assert code == 0, f"{' '.join(argv)} ({where}): {err}"
        (call,) = dispatched
        got = getattr(call.settings, case.field)
        assert got == case.expected, f"{' '.join(argv)} ({where}): {case.field} is {got!r}"
        # ...and the command and action typed are the ones that run.
        assert call.args.command == path[0]
        if len(path) > 1:
            assert call.args.action == path[1]


@pytest.mark.parametrize("path", RUNNABLE, ids=" ".join)
def test_an_option_given_in_several_places_takes_the_last(
    path: tuple[str, ...],
    tmp_path: Path,
    dispatched: list[Dispatched],
    capsys: pytest.CaptureFixture[str],
) -> None:
    tail = required_arguments(ALL_PARSERS[path])
    places = len(place_names(path, tail))
    switches = ("--cite-urls", "--no-cite-urls")

    def given(n: int) -> list[str]:  # a different value at every place; switches alternate
        return ["--home", str(tmp_path / f"home-{n}"), "--chroma-port", str(9000 + n),
                switches[n % 2]]  # fmt: skip

    argv = layout(path, tail, given)
    code, _, err = run_main(argv, capsys)
    assert code == 0, f"{' '.join(argv)}: {err}"
    (call,) = dispatched
    last = places - 1
    assert call.settings.home == tmp_path / f"home-{last}", " ".join(argv)
    assert call.settings.chroma_port == 9000 + last, " ".join(argv)
    assert call.settings.cite_urls is (last % 2 == 0), " ".join(argv)


@pytest.mark.parametrize("path", list(ALL_PARSERS), ids=" ".join)
def test_help_of_every_command_and_action_shows_the_settings(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*path, "--help"])
    assert exit_.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())  # help wraps lines at the terminal
    assert SETTINGS_TITLE in shown
    assert LATER_WINS in shown
    for option in SETTING_OPTIONS:
        assert option in shown


def test_top_level_help_says_where_the_options_go(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "before or after any command and its action" in shown
    assert LATER_WINS in shown


# --- real commands, against real folders ----------------------------------------------------


@pytest.fixture
def logged_home(elsewhere: Path) -> Path:
    """``elsewhere`` holding the log of one real answer, request id ``in-elsewhere``."""
    pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 exports cholesterol [1].", home=elsewhere)
    events = list(pipeline.stream("What does ABCA1 do?", request_id="in-elsewhere"))
    assert events[-1].type == "done"
    assert len(list((elsewhere / "logs").glob("*.jsonl"))) == 1
    return elsewhere


def test_logs_list_json_home_after_the_action_reads_that_home(
    logged_home: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The exact command of the issue, which used to fail with "unrecognized arguments".
    code, out, err = run_main(["logs", "list", "--json", "--home", str(logged_home)], capsys)
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["request_id"] == "in-elsewhere"
    assert row["question"] == "What does ABCA1 do?"
    assert row["state"] == "answered"
    assert Path(row["file"]).parent == logged_home / "logs"
    # Without the option, the environment's home (which has no logs) is read.
    code, out, _ = run_main(["logs", "list", "--json"], capsys)
    assert (code, json.loads(out)) == (0, [])
    assert not (isolated_home / "logs").exists()


@pytest.mark.parametrize(
    "action", [["list", "--json"], ["stats", "in-elsewhere", "--json"], ["path"]], ids=" ".join
)
def test_real_logs_actions_read_the_home_given_anywhere(
    action: list[str], logged_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = []
    for where, argv in placements(
        ("logs", action[0]), ["--home", str(logged_home)], action[1:]
    ).items():
        code, out, err = run_main(argv, capsys)
        assert code == 0, f"{' '.join(argv)} ({where}): {err}"
        outputs.append(out)
    assert len(set(outputs)) == 1, "the place of --home changed the output"
    if action[0] == "path":
        assert outputs[0].strip() == str(logged_home / "logs")
    elif action[0] == "stats":
        stats = json.loads(outputs[0])
        assert (stats["request_id"], stats["state"]) == ("in-elsewhere", "answered")
    else:
        assert [row["request_id"] for row in json.loads(outputs[0])] == ["in-elsewhere"]


@pytest.mark.parametrize("case_index", range(len(CASE_IDS)), ids=CASE_IDS)
def test_config_prints_each_option_given_before_or_after_it(
    case_index: int,
    elsewhere: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    case = cases(elsewhere)[case_index]
    for name, value in case.env:
        monkeypatch.setenv(name, value)
    expected = str(case.expected) if isinstance(case.expected, Path) else case.expected
    for where, argv in placements(("config",), case.argv).items():
        code, out, err = run_main(argv, capsys)
        assert code == 0, f"{' '.join(argv)} ({where}): {err}"
        assert json.loads(out)[case.field] == expected, f"{' '.join(argv)} ({where})"


def test_collections_json_reads_the_home_given_anywhere(
    sample_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(["collections", "--json"], capsys)[1].strip() == "[]"  # nothing here
    for argv in (
        ["--home", str(sample_home), "collections", "--json"],
        ["collections", "--home", str(sample_home), "--json"],
        ["collections", "--json", "--home", str(sample_home)],
    ):
        code, out, err = run_main(argv, capsys)
        assert code == 0, f"{' '.join(argv)}: {err}"
        assert [c["name"] for c in json.loads(out)] == ["reactome", "disease_variants", "userguide"]


# --- the installed console script, as a user runs it ----------------------------------------


@pytest.mark.slow  # the installed command
@pytest.mark.parametrize(
    "where",
    [
        lambda home: ["logs", "list", "--json", "--home", home],
        lambda home: ["logs", "--home", home, "list", "--json"],
        lambda home: ["--home", home, "logs", "list", "--json"],
    ],
    ids=["after the action", "between command and action", "before the command"],
)
def test_the_installed_command_lists_the_logs_of_the_home_given(
    where: Callable[[str], list[str]], logged_home: Path
) -> None:
    result = script(*where(str(logged_home)))
    assert result.returncode == 0, result.stderr
    assert "unrecognized arguments" not in result.stderr
    assert [row["request_id"] for row in json.loads(result.stdout)] == ["in-elsewhere"]


@pytest.mark.slow  # `ingest` by the installed command
@pytest.mark.parametrize(
    "where",
    [
        lambda home, source: ["ingest", "--from", source, "--json", "--home", home],
        lambda home, source: ["ingest", "--home", home, "--from", source, "--json"],
        lambda home, source: ["--home", home, "ingest", "--from", source, "--json"],
    ],
    ids=["after the arguments", "after the command", "before the command"],
)
def test_the_installed_command_ingests_into_the_home_given(
    where: Callable[[str, str], list[str]], tmp_path: Path, elsewhere: Path, isolated_home: Path
) -> None:
    source = tmp_path / "release"
    (source / "reactome").mkdir(parents=True)
    (source / "reactome" / "pathway2summation.txt").write_text(
        "R-HSA-5682113\tDefective ABCA1 causes TGD\tABCA1 exports cholesterol.\n",
        encoding="utf-8",
    )
    result = script(*where(str(elsewhere), str(source)))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["reactome"]["added"] == 1
    assert (elsewhere / "chroma").is_dir()
    assert not (isolated_home / "chroma").exists()
    listed = script("collections", "--json", "--home", str(elsewhere))
    assert [c["name"] for c in json.loads(listed.stdout)] == ["reactome"]
