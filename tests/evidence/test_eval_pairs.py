"""The labeled (sentence, cited source) pairs `make eval` measures the evidence judge on are
well formed: known questions, labels and kinds, stable ids, both labels and the hand-written
paraphrases well represented. The passages are read from ../shared/data at evaluation time
only, so nothing here needs it."""

from __future__ import annotations

from collections import Counter

from tests.benchmarks.evidence_pairs import (
    LABELS,
    MIN_PARAPHRASES,
    MIN_PER_LABEL,
    load_pairs,
    pair_problems,
    question_splits,
)


def test_the_labeled_set_is_well_formed() -> None:
    pairs = load_pairs()
    splits = question_splits()
    assert pair_problems(pairs, splits) == []
    labels = Counter(pair["label"] for pair in pairs)
    assert set(labels) == set(LABELS)
    assert min(labels.values()) >= MIN_PER_LABEL
    # Both halves hold both labels: one is tuned on, the other reported.
    held = Counter((splits[pair["question"]], pair["label"]) for pair in pairs)
    assert all(held[(split, label)] > 0 for split in ("dev", "test") for label in LABELS)
    paraphrases = [p for p in pairs if p["kind"] == "paraphrase" and p["label"] == "supported"]
    assert len(paraphrases) >= MIN_PARAPHRASES


def test_each_unsupported_pair_is_a_sentence_of_another_source_cited_wrongly() -> None:
    pairs = load_pairs()
    supported = {
        (p["question"], p["sentence"], p["st_id"]) for p in pairs if p["label"] == "supported"
    }
    for pair in pairs:
        if pair["label"] == "unsupported" and pair["kind"] != "reviewed":
            # The same sentence is in the set with the source it came from.
            assert (pair["question"], pair["sentence"], pair["from"]) in supported, pair


def test_the_check_names_what_is_wrong() -> None:
    good = {"question": "q001", "sentence": "ABCA1 moves cholesterol.", "st_id": "R-HSA-1"}
    problems = pair_problems(
        [
            {**good, "label": "supported", "kind": "copied"},
            {**good, "label": "maybe", "kind": "copied"},
            {**good, "sentence": "x", "label": "unsupported", "kind": "copied"},
            {**good, "question": "q999", "label": "supported", "kind": "guessed"},
            {**good, "st_id": "ABCA1", "label": "supported", "kind": "copied"},
            {"question": "q001", "label": "supported"},
        ],
        ["q001"],
    )
    text = "\n".join(problems)
    assert "pair 2: label 'maybe'" in text
    assert "pair 3: an unsupported pair names the other source" in text
    assert "pair 4: question q999" in text
    assert "pair 4: kind 'guessed'" in text
    assert "pair 5: st_id 'ABCA1' is not a stable id" in text
    assert "pair 6: missing ['sentence', 'st_id', 'kind']" in text
    assert "only 1 unsupported pairs (at least 100)" in text
    assert "only 0 supported paraphrases" in text
