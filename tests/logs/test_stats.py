"""`logs stats` over many logs: the summary's arithmetic, and the command over real logs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.cli import main as cli_main
from callbacks.log_summary import percentiles, summarize
from tests.support.fake_pipeline import ABCA1, CDK5, make_pipeline


def row(state: str = "answered", **values: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "state": state,
        "first_token_ms": None,
        "citations_final": 0,
        "last_citation_seq": None,
        "first_token_seq": None,
        "refusal_rule": None,
        "live_citations": False,
        "held_back_chars": None,
        "held_back_ms": None,
    }
    return base | values


def test_percentiles_are_values_that_occurred() -> None:
    assert percentiles(range(1, 101)) == {"p50": 50, "p90": 90, "p99": 99}
    assert percentiles([7.0]) == {"p50": 7.0, "p90": 7.0, "p99": 7.0}
    assert percentiles([]) == {"p50": None, "p90": None, "p99": None}


def test_the_gate_counts_answers_with_both_and_names_their_seqs() -> None:
    rows = [
        row(citations_final=2, last_citation_seq=3, first_token_seq=4, first_token_ms=40),
        row(citations_final=1, last_citation_seq=2, first_token_seq=3, first_token_ms=30),
        # A broken stream: a citation after the first token is counted, not hidden.
        row(citations_final=1, last_citation_seq=9, first_token_seq=5, first_token_ms=35),
        # No citation (a user-guide answer): not an answer with both.
        row(first_token_seq=2, first_token_ms=5),
    ]
    gate = summarize(rows)["gate"]
    assert (gate["held"], gate["of"]) == (2, 3)
    assert gate["last_citation_seq"] == {"2": 1, "3": 1, "9": 1}


def test_first_token_times_by_state_and_by_citations() -> None:
    rows = [
        row(first_token_ms=5, first_token_seq=2),
        row(first_token_ms=7, first_token_seq=2),
        row(citations_final=2, first_token_ms=60, last_citation_seq=3, first_token_seq=4),
        row("refused", refusal_rule="too_long"),
        row("refused", refusal_rule="personal_care"),
        row("refused", refusal_rule="personal_care"),
        {"file": "broken.jsonl", "error": "not a log"},
    ]
    summary = summarize(rows)
    assert summary["logs"] == 7
    assert summary["unreadable"] == 1
    assert summary["states"] == {"answered": 3, "refused": 3}
    assert summary["by_citations"]["0"]["answers"] == 5
    assert summary["by_citations"]["0"]["first_token_ms"]["p50"] == 5
    assert summary["by_citations"]["2"]["first_token_ms"]["p50"] == 60
    assert summary["first_token_ms_by_state"]["refused"]["p50"] is None
    assert summary["refusals"] == {"personal_care": 2, "too_long": 1}
    assert summary["references_per_answer"] == {"0": 2, "2": 1}


@pytest.fixture
def recorded(isolated_home: Path) -> Path:
    """Four real logs: two answers with citations, a nothing-found and a rule refusal."""
    answered, _, _ = make_pipeline([ABCA1, CDK5], "CDK5 [2] first, ABCA1 [1].")
    list(answered.stream("What does CDK5 do?", request_id="req-1"))
    list(answered.stream("And ABCA1?", request_id="req-2"))
    empty, _, _ = make_pipeline([], "unused")
    list(empty.stream("What is XYZ?", request_id="req-3"))
    list(answered.stream("x" * 3000, request_id="req-4"))
    return isolated_home


def stats(home: Path, capsys: pytest.CaptureFixture[str], *options: str) -> dict[str, Any]:
    assert cli_main(["--home", str(home), "logs", "stats", "--json", *options]) == 0
    summary: dict[str, Any] = json.loads(capsys.readouterr().out)
    return summary


def test_logs_stats_without_a_log_summarizes_every_log(
    recorded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = stats(recorded, capsys)
    assert summary["logs"] == 4
    assert summary["states"] == {"answered": 2, "nothing_found": 1, "refused": 1}
    assert summary["gate"]["held"] == summary["gate"]["of"] == 2
    assert summary["refusals"] == {"too_long": 1}
    assert summary["references_per_answer"] == {"2": 2}
    assert summary["first_token_ms"]["p50"] is not None


def test_logs_stats_selects_by_count_state_and_date(
    recorded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert stats(recorded, capsys, "--last", "1")["states"] == {"refused": 1}
    assert stats(recorded, capsys, "--state", "answered")["logs"] == 2
    assert stats(recorded, capsys, "--since", "2000-01-01")["logs"] == 4
    assert stats(recorded, capsys, "--since", "2999-01-01T00:00")["logs"] == 0


def test_logs_stats_reads_as_text_too(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["--home", str(recorded), "logs", "stats"]) == 0
    out = capsys.readouterr().out
    assert "4 logs (0 unreadable)" in out
    assert "citations before the first token: 2 of 2 answers with both" in out


@pytest.mark.parametrize(
    ("options", "named"),
    [(["--last", "0"], "--last"), (["--since", "yesterday"], "--since")],
)
def test_a_bad_selection_is_a_usage_error_naming_the_option(
    isolated_home: Path, capsys: pytest.CaptureFixture[str], options: list[str], named: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli_main(["--home", str(isolated_home), "logs", "stats", *options])
    assert stopped.value.code == 2
    assert named in capsys.readouterr().err


def test_selection_options_with_one_log_are_refused(
    recorded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["--home", str(recorded), "logs", "stats", "req-1", "--last", "2"]) == 1
    assert "are for many logs" in capsys.readouterr().err


def test_logs_stats_plots_first_token_time_by_references(
    recorded: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from matplotlib.image import imread

    picture = tmp_path / "plots" / "first-token.png"
    assert cli_main(["--home", str(recorded), "logs", "stats", "--plot", str(picture)]) == 0
    # The two answers have a first token; the nothing-found and the refusal have none.
    assert "plotted 2 answers" in capsys.readouterr().err
    pixels = imread(picture)
    assert pixels.shape[0] > 100
    assert pixels.shape[1] > 100
    # Something was drawn: not a blank canvas.
    assert pixels.min() < pixels.max()


def test_a_plot_needs_a_png_name_and_many_logs(
    recorded: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert cli_main(["--home", str(recorded), "logs", "stats", "--plot", "x.txt"]) == 1
    assert "x.txt is not a .png file name" in capsys.readouterr().err
    assert not (tmp_path / "x.txt").exists()
    plot = str(tmp_path / "one.png")
    assert cli_main(["--home", str(recorded), "logs", "stats", "req-1", "--plot", plot]) == 1
    assert "are for many logs" in capsys.readouterr().err


def test_evidence_counts_the_unsupported_citations_and_their_answers() -> None:
    rows = [
        row(evidence_items=3, evidence_unsupported=1),
        row(evidence_items=2, evidence_unsupported=0),
        row(evidence_items=4, evidence_unsupported=2),
        row("refused"),
    ]
    assert summarize(rows)["evidence"] == {
        "items": 9,
        "unsupported": 3,
        "answers_with_unsupported": 2,
    }


def test_logs_stats_counts_the_recorded_evidence(
    recorded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "CDK5 [2] first, ABCA1 [1]." is one sentence citing two sources: two items an answer.
    evidence = stats(recorded, capsys)["evidence"]
    assert evidence["items"] == 4
    assert cli_main(["--home", str(recorded), "logs", "stats"]) == 0
    out = capsys.readouterr().out
    assert f"citations judged unsupported: {evidence['unsupported']} of 4" in out
