"""The labeled (sentence, cited source) pairs the evidence judge is measured on.

    .venv/bin/python -m tests.benchmarks.evidence_pairs [--pairs FILE]   # check the file

``evidence_pairs.yaml`` holds one entry per pair: ``question`` (an id of
eval_questions.yaml, whose ``split`` the pair takes), ``sentence``, ``st_id`` (the source the
sentence is cited with), ``label`` (``supported`` or ``unsupported``), ``kind`` (``copied``: an
answer sentence of the extractive model, written by build_evidence_pairs.py; ``paraphrase``
and ``reviewed``: kept by hand, see that script) and, for an unsupported pair, ``from`` (the
source the sentence came from). The passage is not in the file: it is read from the ingested
collections at evaluation time (:func:`source_texts`), so the data stays in ../shared/data.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from pipelines.catalog.catalog import COLLECTION_NAMES
from pipelines.core.identifiers import st_id_problem
from pipelines.core.settings import Settings
from pipelines.index.store import active_version, open_client

__all__ = ["KINDS", "LABELS", "PAIRS", "load_pairs", "pair_problems", "source_texts"]

PAIRS = Path(__file__).with_name("evidence_pairs.yaml")
QUESTIONS = Path(__file__).with_name("eval_questions.yaml")
LABELS = ("supported", "unsupported")
KINDS = ("copied", "paraphrase", "reviewed")
# Written by the build script; the others are kept by hand across rebuilds.
BUILT_KIND = "copied"
REQUIRED = ("question", "sentence", "st_id", "label", "kind")
OPTIONAL = ("from", "note")
# Enough of each label, and of hand-written paraphrases, for a rate to mean something.
MIN_PER_LABEL = 100
MIN_PARAPHRASES = 30


def load_pairs(path: Path = PAIRS) -> list[dict[str, Any]]:
    pairs: list[dict[str, Any]] = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    return pairs


def pair_problems(pairs: Sequence[Any], question_ids: Iterable[str]) -> list[str]:
    """What is wrong with the set: shape, labels, ids, duplicates, and too few of a kind."""
    known = set(question_ids)
    problems = []
    seen: set[tuple[str, str, str]] = set()
    for index, pair in enumerate(pairs):
        where = f"pair {index + 1}"
        if not isinstance(pair, dict):
            problems.append(f"{where}: not a mapping")
            continue
        missing = [key for key in REQUIRED if not pair.get(key)]
        unknown = sorted(set(pair) - set(REQUIRED) - set(OPTIONAL))
        if missing or unknown:
            problems.append(f"{where}: missing {missing}, unknown {unknown}")
            continue
        if not all(isinstance(pair[key], str) for key in (*REQUIRED, *OPTIONAL) if key in pair):
            problems.append(f"{where}: every field is a string")
            continue
        if pair["question"] not in known:
            problems.append(f"{where}: question {pair['question']} is not in eval_questions.yaml")
        if pair["label"] not in LABELS:
            problems.append(f"{where}: label {pair['label']!r} is not one of {LABELS}")
        if pair["kind"] not in KINDS:
            problems.append(f"{where}: kind {pair['kind']!r} is not one of {KINDS}")
        for key in ("st_id", "from"):
            if key in pair and st_id_problem(pair[key]) is not None:
                problems.append(f"{where}: {key} {pair[key]!r} is not a stable id")
        if pair["label"] == "unsupported" and pair.get("from") in (None, pair["st_id"]):
            problems.append(f"{where}: an unsupported pair names the other source it came from")
        if pair["label"] == "supported" and "from" in pair:
            problems.append(f"{where}: a supported pair came from the source it cites")
        ruled = (pair["question"], pair["sentence"], pair["st_id"])
        if ruled in seen:
            problems.append(f"{where}: the same sentence and source twice for {ruled[0]}")
        seen.add(ruled)
    dicts = [pair for pair in pairs if isinstance(pair, dict)]
    labels = Counter(pair.get("label") for pair in dicts)
    for label in LABELS:
        if labels[label] < MIN_PER_LABEL:
            problems.append(f"only {labels[label]} {label} pairs (at least {MIN_PER_LABEL})")
    paraphrases = sum(
        pair.get("kind") == "paraphrase" and pair.get("label") == "supported" for pair in dicts
    )
    if paraphrases < MIN_PARAPHRASES:
        problems.append(f"only {paraphrases} supported paraphrases (at least {MIN_PARAPHRASES})")
    return problems


def source_texts(settings: Settings, st_ids: Iterable[str]) -> dict[str, str]:
    """Each stable id's text as the ingested collections hold it: every chunk cited by it,
    collection by collection (a disease pathway's summary, then its variants), document by
    document, in order, joined as the retriever joins a source's chunks. An answer is given
    some of these chunks; the whole is what any answer could quote."""
    wanted = sorted(set(st_ids))
    client = open_client(settings)
    pieces: dict[str, list[tuple[int, str, int, str]]] = {st_id: [] for st_id in wanted}
    for rank, name in enumerate(COLLECTION_NAMES):
        version = active_version(client, name)
        if version is None or not wanted:
            continue
        where: Any = {"st_id": {"$in": wanted}}
        found = version.collection.get(where=where, include=["documents", "metadatas"])
        for text, metadata in zip(found["documents"] or [], found["metadatas"] or [], strict=True):
            key = (rank, str(metadata.get("doc_key")), int(str(metadata.get("chunk", 0))), text)
            pieces[str(metadata["st_id"])].append(key)
    return {
        st_id: "\n\n".join(text for *_, text in sorted(found))
        for st_id, found in pieces.items()
        if found
    }


def question_splits(path: Path = QUESTIONS) -> Mapping[str, str]:
    questions = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {str(q["id"]): str(q["split"]) for q in questions}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=Path, default=PAIRS)
    args = parser.parse_args(argv)
    pairs = load_pairs(args.pairs)
    problems = pair_problems(pairs, question_splits())
    for problem in problems:
        print(problem, file=sys.stderr)
    counts = Counter((pair.get("kind"), pair.get("label")) for pair in pairs)
    print(", ".join(f"{kind} {label}: {n}" for (kind, label), n in sorted(counts.items())))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
