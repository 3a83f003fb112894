"""``logs stats --plot FILE.png``: first-token time against the number of references.

The note this project grew from found that answers citing nothing (user-guide answers) are
the fastest; the plot shows it, or that it stopped being true, at a glance: one dot per
answer, jittered sideways so equal counts do not hide each other, and each count's median.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pipelines.core.errors import ConfigurationError, InputError

__all__ = ["plot_first_token_by_references"]

_STATE_COLOURS = {"answered": "tab:blue", "failed": "tab:red"}


def plot_first_token_by_references(rows: Sequence[Mapping[str, Any]], path: Path) -> int:
    """Draw the rows (:func:`callbacks.log_summary.log_stats`) that have a first token to
    ``path`` (PNG); returns how many were drawn."""
    if path.suffix.lower() != ".png":
        raise InputError(f"{path} is not a .png file name", fix="give a path ending in .png")
    try:
        import matplotlib
    except ImportError:
        raise ConfigurationError(
            "--plot needs matplotlib, which is not installed",
            fix="pip install matplotlib (or install reactome-answers with its bench extra)",
        ) from None
    matplotlib.use("Agg")  # no display: the file is the output
    from matplotlib import pyplot

    drawn = [
        row
        for row in rows
        if row.get("first_token_ms") is not None and row.get("citations_final") is not None
    ]
    jitter = random.Random(0)  # the same picture for the same logs
    figure, axes = pyplot.subplots(figsize=(7, 4.5))
    for state, colour in _STATE_COLOURS.items():
        points = [row for row in drawn if row.get("state") == state]
        if points:
            axes.scatter(
                [int(row["citations_final"]) + jitter.uniform(-0.15, 0.15) for row in points],
                [float(row["first_token_ms"]) for row in points],
                s=12,
                alpha=0.6,
                color=colour,
                label=f"{state} ({len(points)})",
            )
    by_count: dict[int, list[float]] = {}
    for row in drawn:
        by_count.setdefault(int(row["citations_final"]), []).append(float(row["first_token_ms"]))
    counts = sorted(by_count)
    if counts:
        medians = [sorted(by_count[n])[(len(by_count[n]) - 1) // 2] for n in counts]
        axes.plot(counts, medians, "k_", markersize=24, mew=2, label="median")
        axes.set_xticks(counts)
    axes.set_xlabel("references in the answer")
    axes.set_ylabel("first token (ms)")
    axes.set_title(f"First-token time by number of references, {len(drawn)} answers")
    if drawn:
        axes.legend(loc="best", fontsize="small")
    figure.tight_layout()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, dpi=120)
    except OSError as error:
        raise InputError(
            f"cannot write {path} ({error.strerror or error})",
            fix="give a path in a folder you can write to",
        ) from None
    finally:
        pyplot.close(figure)
    return len(drawn)
