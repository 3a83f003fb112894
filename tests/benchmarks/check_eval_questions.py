"""Check the labeled retrieval-evaluation questions against the real data.

    .venv/bin/python tests/benchmarks/check_eval_questions.py [--data ../shared/data]
        [--questions tests/benchmarks/eval_questions.yaml]

The sources are read with the project's own loaders, so a label is valid exactly when the
ingested collection can cite it: a pathway stable id from ``pathway2summation.txt`` (human
only), a variant's own stable id or its disease pathway's from
``disease_variant_ewas_mapping.tsv``, a user-guide url as ``pipelines.catalog.loaders.userguide``
derives it. Checked: the YAML shape, unique ids, non-empty questions, that every relevant id
exists, that ``collections`` agrees with where the relevant ids live, the counts the issue
asks for, and that no question or note shares a run of 6 words with the text of its relevant
sources (lowercased, punctuation stripped). Prints a summary table; exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from pipelines.catalog.loaders import load_reactome, load_userguide, load_variants
from pipelines.catalog.loaders.reactome import PATHWAYS_FILE, SUMMATION_FILE
from pipelines.catalog.loaders.variants import VARIANTS_FILE

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data"
DEFAULT_QUESTIONS = Path(__file__).with_name("eval_questions.yaml")

COLLECTIONS = ("reactome", "disease_variants", "userguide")
ORDER = {name: index for index, name in enumerate(COLLECTIONS)}
SPECIFIC_FIRST = ("userguide", "disease_variants", "reactome")
HUMAN = "Homo sapiens"
RUN = 6  # words in a row that may not be shared with a relevant source
MIN_QUESTIONS = 80
MIN_PARAPHRASED_SHARE = 1 / 3
MIN_ROUTING = 15
# The target spread, by the collections a question needs (reported, not enforced).
TARGET_SPREAD = {"reactome": (55, 60), "disease_variants": (15, 20), "userguide": (10, 15)}

REQUIRED_KEYS = ("id", "question", "relevant", "collections", "paraphrased", "routing", "split")
SPLITS = ("dev", "test")
# The held-out half: big enough to report on, with its share of hard (paraphrased) questions.
MIN_TEST = 40
OPTIONAL_KEYS = ("note",)
ID_RE = re.compile(r"q[0-9]{3,}")
WORD_RE = re.compile(r"[a-z0-9]+")


@dataclass
class Sources:
    """Every citable id or url, the collections that hold it, and the text behind it."""

    homes: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    texts: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    not_human: set[str] = field(default_factory=set)
    unlisted: set[str] = field(default_factory=set)  # no species row in ReactomePathways.txt

    def add(self, key: str, collection: str, *texts: str) -> None:
        self.homes[key].add(collection)
        self.texts[key].extend(text for text in texts if text)


def load_sources(data: Path) -> Sources:
    """The three collections as the loaders see them; any loader error stops the check."""
    sources = Sources()
    reactome_dir = data / "reactome"
    needed = [
        reactome_dir / SUMMATION_FILE,
        data / "disease_variants" / VARIANTS_FILE,
        data / "userguide",
    ]
    missing = [str(path) for path in needed if not path.exists()]
    if missing:
        raise SystemExit(f"no data at {data} (use --data DIR); missing: {', '.join(missing)}")

    problems: list[str] = []
    pathways = reactome_dir / PATHWAYS_FILE
    reactome = load_reactome(
        reactome_dir / SUMMATION_FILE, pathways if pathways.is_file() else None
    )
    for doc in reactome.documents:
        st_id = doc.citation["st_id"]
        species = doc.metadata.get("species")
        if species is None:
            sources.unlisted.add(st_id)
        elif species != HUMAN:
            sources.not_human.add(st_id)
            continue
        sources.add(st_id, "reactome", doc.title, doc.text)

    variants = load_variants(data / "disease_variants" / VARIANTS_FILE)
    for doc in variants.documents:
        keys = {doc.citation.get("st_id", ""), str(doc.metadata.get("variant_st_id", ""))}
        keys.update(str(doc.metadata.get("pathway_st_ids", "")).split("|"))
        for key in sorted(k for k in keys if k):
            sources.add(key, "disease_variants", doc.title, doc.text)

    userguide = load_userguide(data / "userguide")
    for doc in userguide.documents:
        url = str(doc.metadata["url"])
        sources.add(url, "userguide", doc.title, str(doc.metadata.get("section", "")), doc.text)

    for name, result in (("reactome", reactome), ("variants", variants), ("userguide", userguide)):
        problems += [f"{name} loader: {p}" for p in result.problems if p.kind == "error"]
    if problems:
        raise SystemExit("cannot read the data:\n  " + "\n  ".join(problems))
    return sources


def words(text: str) -> list[str]:
    return WORD_RE.findall(text.lower())


def runs(tokens: list[str], n: int = RUN) -> set[tuple[str, ...]]:
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def shared_runs(text: str, source_texts: Iterable[str]) -> list[str]:
    """The ``RUN``-word runs of ``text`` that occur in any of ``source_texts``."""
    mine = runs(words(text))
    if not mine:
        return []
    found: set[tuple[str, ...]] = set()
    for source in source_texts:
        found |= mine & runs(words(source))
    return sorted(" ".join(run) for run in found)


@dataclass
class Report:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def error(self, where: str, message: str) -> None:
        self.errors.append(f"{where}: {message}")

    def warn(self, where: str, message: str) -> None:
        self.warnings.append(f"{where}: {message}")


def _string_list(value: object) -> list[str] | None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return [str(v) for v in value]


def check_entry(entry: object, index: int, sources: Sources, report: Report) -> dict[str, object]:
    """Checks one question; returns it (possibly partial) for the counts."""
    where = f"entry {index}"
    if not isinstance(entry, dict):
        report.error(where, "is not a mapping")
        return {}
    qid = entry.get("id")
    if isinstance(qid, str) and qid:
        where = qid
        if not ID_RE.fullmatch(qid):
            report.error(where, "id should look like q001")
    else:
        report.error(where, "id is missing or not a string")
    for key in REQUIRED_KEYS:
        if key not in entry:
            report.error(where, f"missing key {key!r}")
    unknown = sorted(str(k) for k in entry if k not in REQUIRED_KEYS + OPTIONAL_KEYS)
    if unknown:
        report.error(where, f"unknown key(s) {', '.join(unknown)}")

    question = entry.get("question")
    if not isinstance(question, str) or not question.strip():
        report.error(where, "question is empty or not a string")
        question = ""
    elif len(words(question)) < 3:
        report.error(where, f"question {question!r} is too short to be a real question")
    note = entry.get("note", "")
    if not isinstance(note, str):
        report.error(where, "note is not a string")
        note = ""
    for flag in ("paraphrased", "routing"):
        if flag in entry and not isinstance(entry[flag], bool):
            report.error(where, f"{flag} must be true or false, not {entry[flag]!r}")
    if "split" in entry and entry["split"] not in SPLITS:
        report.error(where, f"split must be dev or test, not {entry['split']!r}")

    relevant = _string_list(entry.get("relevant"))
    if not relevant:
        report.error(where, "relevant must be a non-empty list of ids or urls")
        relevant = []
    elif len(set(relevant)) != len(relevant):
        report.error(where, "relevant lists an id twice")
    collections = _string_list(entry.get("collections"))
    if not collections:
        report.error(where, "collections must be a non-empty list")
        collections = []
    elif len(set(collections)) != len(collections):
        report.error(where, "collections lists a collection twice")
    for name in collections:
        if name not in COLLECTIONS:
            report.error(where, f"unknown collection {name!r} (known: {', '.join(COLLECTIONS)})")

    known = [key for key in relevant if key in sources.homes]
    for key in relevant:
        if key in sources.not_human:
            report.error(where, f"{key} is not a {HUMAN} pathway in {PATHWAYS_FILE}")
        elif key not in sources.homes:
            report.error(where, f"{key} is not a stable id or url in any collection")
        elif key in sources.unlisted:
            report.warn(where, f"{key} has a summation but no species row in {PATHWAYS_FILE}")
    for key in known:
        if not sources.homes[key] & set(collections):
            homes = ", ".join(sorted(sources.homes[key]))
            report.error(where, f"{key} lives in {homes}, none of which is in collections")
    for name in collections:
        if name in COLLECTIONS and known and not any(name in sources.homes[k] for k in known):
            report.error(where, f"collections lists {name} but no relevant id lives there")

    texts = [text for key in known for text in sources.texts[key]]
    for label, text in (("question", question), ("note", note)):
        copied = shared_runs(text, texts)
        if copied:
            report.error(where, f"{label} copies its source: " + "; ".join(repr(c) for c in copied))
    return entry


def summarize(entries: list[dict[str, object]]) -> tuple[list[str], dict[str, int]]:
    """The table lines and the numbers the thresholds are checked against."""
    total = len(entries)
    paraphrased = sum(1 for e in entries if e.get("paraphrased") is True)
    routing = sum(1 for e in entries if e.get("routing") is True)
    needs: Counter[str] = Counter()
    combos: Counter[str] = Counter()
    para_by: Counter[str] = Counter()
    routing_by: Counter[str] = Counter()
    relevant_sizes: Counter[int] = Counter()
    for entry in entries:
        names = _string_list(entry.get("collections")) or []
        combo = " + ".join(sorted(names, key=lambda n: (ORDER.get(n, len(ORDER)), n)))
        combos[combo] += 1
        para_by[combo] += entry.get("paraphrased") is True
        routing_by[combo] += entry.get("routing") is True
        relevant_sizes[len(_string_list(entry.get("relevant")) or [])] += 1
        for name in names:
            needs[name] += 1
    # A question counts towards the spread by the most specific collection it needs.
    spread: Counter[str] = Counter()
    for entry in entries:
        needed = set(_string_list(entry.get("collections")) or [])
        primary = next((c for c in SPECIFIC_FIRST if c in needed), "")
        spread[primary] += 1

    share = paraphrased / total if total else 0.0
    lines = [
        f"{'collections':<32}{'questions':>10}{'paraphrased':>13}{'routing':>9}",
        "-" * 64,
    ]
    for combo, count in sorted(combos.items(), key=lambda item: (-item[1], item[0])):
        lines.append(f"{combo:<32}{count:>10}{para_by[combo]:>13}{routing_by[combo]:>9}")
    lines += [
        "-" * 64,
        f"{'total':<32}{total:>10}{paraphrased:>13}{routing:>9}",
        "",
        "questions needing each collection: "
        + ", ".join(f"{name} {needs[name]}" for name in COLLECTIONS),
        "spread (by most specific collection, target range): "
        + ", ".join(
            f"{name} {spread[name]} ({low}-{high})" for name, (low, high) in TARGET_SPREAD.items()
        ),
        f"paraphrased share: {share:.1%} (at least {MIN_PARAPHRASED_SHARE:.1%})",
        f"routing-labelled: {routing} (at least {MIN_ROUTING})",
        "relevant ids per question: "
        + ", ".join(f"{size}: {count}" for size, count in sorted(relevant_sizes.items())),
    ]
    numbers = {
        "total": total,
        "paraphrased": paraphrased,
        "routing": routing,
        "multi_routing": sum(
            1
            for e in entries
            if e.get("routing") is True and len(_string_list(e.get("collections")) or []) > 1
        ),
        "userguide_routing": sum(
            1
            for e in entries
            if e.get("routing") is True and _string_list(e.get("collections")) == ["userguide"]
        ),
    }
    return lines, numbers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data folder")
    parser.add_argument("--questions", type=Path, default=DEFAULT_QUESTIONS, help="the YAML file")
    args = parser.parse_args(argv)

    try:
        loaded = yaml.safe_load(args.questions.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        print(f"cannot read {args.questions}: {error}", file=sys.stderr)
        return 1
    if not isinstance(loaded, list):
        print(f"{args.questions}: expected a YAML list of questions", file=sys.stderr)
        return 1
    sources = load_sources(args.data)

    report = Report()
    entries = [check_entry(entry, n, sources, report) for n, entry in enumerate(loaded, start=1)]
    ids = Counter(str(e.get("id")) for e in entries if isinstance(e.get("id"), str))
    for qid, count in sorted(ids.items()):
        if count > 1:
            report.error(qid, f"id is used {count} times")
    questions = Counter(
        " ".join(words(str(e.get("question", "")))) for e in entries if e.get("question")
    )
    for text, count in questions.items():
        if count > 1:
            report.error("questions", f"{count} entries ask the same question: {text!r}")

    lines, numbers = summarize(entries)
    total = numbers["total"]
    if total < MIN_QUESTIONS:
        report.error("counts", f"{total} questions; at least {MIN_QUESTIONS} are needed")
    if total and numbers["paraphrased"] / total < MIN_PARAPHRASED_SHARE:
        report.error(
            "counts",
            f"{numbers['paraphrased']} of {total} paraphrased; at least a third are needed",
        )
    test = [e for e in entries if e.get("split") == "test"]
    test_paraphrased = sum(1 for e in test if e.get("paraphrased") is True)
    split_line = f"test split: {len(test)} questions, {test_paraphrased} paraphrased"
    if len(test) < MIN_TEST:
        report.error("counts", f"{split_line}; at least {MIN_TEST} are needed")
    elif test_paraphrased / len(test) < MIN_PARAPHRASED_SHARE:
        report.error("counts", f"{split_line}; at least a third must be paraphrased")
    lines.append(split_line + f" (at least {MIN_TEST}, a third paraphrased)")
    if numbers["routing"] < MIN_ROUTING:
        report.error(
            "counts", f"{numbers['routing']} routing-labelled; at least {MIN_ROUTING} needed"
        )
    if not numbers["multi_routing"]:
        report.error("counts", "no routing-labelled question needs two collections")
    if not numbers["userguide_routing"]:
        report.error("counts", "no routing-labelled question needs the user guide alone")

    print(f"{args.questions} against {args.data}\n")
    print("\n".join(lines))
    if report.warnings:
        print(f"\n{len(report.warnings)} warning(s):")
        print("\n".join(f"  {w}" for w in report.warnings))
    if report.errors:
        print(f"\nFAILED: {len(report.errors)} problem(s):", file=sys.stderr)
        print("\n".join(f"  {e}" for e in report.errors), file=sys.stderr)
        return 1
    print("\nOK: every label checks out.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
