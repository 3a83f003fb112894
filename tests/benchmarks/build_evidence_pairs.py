"""Rebuild the copied pairs of evidence_pairs.yaml from the evaluation questions.

    .venv/bin/python -m tests.benchmarks.build_evidence_pairs [--data DIR] [--home DIR]

For every evaluation question answered from stable-id sources (the user-guide questions cite
urls, and only when asked to), the question is retrieved as a request retrieves it and
answered by the extractive model, whose sentences are copied from the sources:

- each answer sentence with the source it was copied from is a *supported* pair;
- the same sentence with each of the first two other sources retrieved for the question (the
  hard case: same topic, another entity) is an *unsupported* pair, unless that source holds
  a sentence with half or more of the sentence's content words: such a source may well say
  the same thing (Reactome repeats a parent pathway's sentences in its children), so it is
  listed for a person to read instead, and the ones read are kept as ``reviewed`` pairs.

A sentence is kept once in the whole set (the first question that yields it), so the two
splits share no sentence. ``paraphrase`` and ``reviewed`` entries are written by hand and
kept as they are; everything else is rewritten.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from pipelines.answering.extractive import ExtractiveChatModel
from pipelines.answering.prompts import answer_messages
from pipelines.citations.sources import number_sources
from pipelines.core.options import RequestOptions
from pipelines.evidence.claims import claims_of
from pipelines.index.embeddings import MiniLMEmbeddings
from pipelines.index.sentences import clean_sentence, sentence_spans
from pipelines.index.store import open_client
from pipelines.pipeline import AnswerPipeline
from pipelines.retrieval.expander import STOPWORDS
from pipelines.retrieval.retriever import ReactomeRetriever
from tests.benchmarks._common import DEFAULT_DATA, cache_home, load_questions, prepared_home
from tests.benchmarks.evidence_pairs import BUILT_KIND, PAIRS, load_pairs, source_texts

# Other sources per sentence, in retrieval order.
OTHERS = 2
# A source with a sentence holding this share of the sentence's content words is read by hand.
NEAR = 0.4
# Pairs read by hand and left out: the other source says part of it, or about the same in
# other words, or the sentence is about a module rather than a fact (question, other source,
# the sentence's start).
UNCLEAR = {
    ("q017", "R-HSA-2980736", "The generation of insulin-containing"),
    ("q023", "R-HSA-9657688", "The module also describes"),
    ("q023", "R-HSA-9657689", "The module also describes"),
    ("q023", "R-HSA-9657688", "This Reactome module describes"),
    ("q023", "R-HSA-9657689", "This Reactome module describes"),
    ("q024", "R-HSA-196854", "Metabolic pathways by which"),
    ("q037", "R-HSA-9669936", "Sorafenib is a type II tyrosine kinase inhibitor that is approved"),
    ("q057", "R-HSA-5632987", "Defects in MSH2, MSH6, MLH1, and PMS2"),
    ("q072", "R-HSA-5655332", "A number of skeletal and developmental"),
    ("q072", "R-HSA-8853338", "A number of skeletal and developmental"),
    ("q073", "R-HSA-1226099", "This residue falls"),
}
HEADER = """\
# Labeled (sentence, cited source) pairs for the evidence judge: see evidence_pairs.py for the
# fields and build_evidence_pairs.py for how the copied pairs are made (rebuild with
# `.venv/bin/python -m tests.benchmarks.build_evidence_pairs`; paraphrase and reviewed
# entries are written by hand and kept). The passages are read from the ingested collections.
# Data: ../shared/data (Reactome release 75 summations; CC BY 4.0, credit Reactome).
"""

_WORD_RE = re.compile(r"[a-z0-9]+")


def content_words(text: str) -> set[str]:
    return {w for w in _WORD_RE.findall(text.lower()) if w not in STOPWORDS and len(w) > 1}


def best_overlap(sentence: str, text: str) -> float:
    """The largest share of ``sentence``'s content words that one sentence of ``text`` holds."""
    wanted = content_words(sentence)
    if not wanted:
        return 0.0
    return max(
        (
            len(wanted & content_words(clean_sentence(text[start:end]))) / len(wanted)
            for start, end in sentence_spans(text)
        ),
        default=0.0,
    )


def answers(
    settings: Any, embeddings: Any, questions: Iterable[dict[str, Any]]
) -> list[tuple[dict[str, Any], list[tuple[str, str]], list[str]]]:
    """Per question: (sentence, st_id it was copied from) of the extractive answer, and the
    stable ids retrieved, in order."""
    pipeline = AnswerPipeline(settings, embeddings=embeddings)
    retriever = ReactomeRetriever(
        settings=settings,
        client=open_client(settings),
        embeddings=embeddings,
        expander=pipeline.models[1],
    )
    model = ExtractiveChatModel(embeddings=embeddings)
    found = []
    for question in questions:
        documents = retriever.invoke(question["question"], options=RequestOptions())
        sources, context = number_sources(documents, cite_urls=False)
        reply = model.reply(answer_messages(question["question"], sources, context))
        st_ids = {source.n: str(source.st_id) for source in sources}
        claims = [(claim.sentence, st_ids[claim.source_n]) for claim in claims_of(reply, sources)]
        found.append((question, claims, list(dict.fromkeys(st_ids.values()))))
    return found


def build(
    answered: list[tuple[dict[str, Any], list[tuple[str, str]], list[str]]],
    texts: dict[str, str],
    kept: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[str]]:
    """The copied pairs, and the near pairs a person should read."""
    taken = {(pair["sentence"], pair["st_id"]) for pair in kept}
    sentences: set[str] = set()
    pairs: list[dict[str, Any]] = []
    to_read: list[str] = []
    for question, claims, retrieved in answered:
        for sentence, own in claims:
            if sentence in sentences or own not in texts:
                continue
            if best_overlap(sentence, texts[own]) < 1.0:
                print(f"  {question['id']}: not found whole in {own}: {sentence}", file=sys.stderr)
                continue
            sentences.add(sentence)
            base = {"question": question["id"], "sentence": sentence}
            pairs.append({**base, "st_id": own, "label": "supported", "kind": BUILT_KIND})
            others = 0
            for other in retrieved:
                if others == OTHERS:
                    break
                if other == own or other not in texts:
                    continue
                others += 1
                overlap = best_overlap(sentence, texts[other])
                if overlap >= NEAR:
                    unclear = any(
                        (question["id"], other) == (q, st_id) and sentence.startswith(start)
                        for q, st_id, start in UNCLEAR
                    )
                    if (sentence, other) not in taken and not unclear:
                        to_read.append(f"{question['id']} {other} ({overlap:.2f}): {sentence}")
                    continue
                pairs.append(
                    {**base, "st_id": other, "label": "unsupported", "kind": BUILT_KIND}
                    | {"from": own}
                )
    return pairs, to_read


def write(path: Path, pairs: list[dict[str, Any]]) -> None:
    body = yaml.safe_dump(pairs, sort_keys=False, allow_unicode=True, width=100)
    path.write_text(HEADER + "\n" + body, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="../shared/data")
    parser.add_argument(
        "--home", type=Path, default=cache_home("eval-home"), help="where the corpus is ingested"
    )
    parser.add_argument("--pairs", type=Path, default=PAIRS)
    args = parser.parse_args(argv)

    embeddings = MiniLMEmbeddings(model_cache=cache_home("models"))
    settings = prepared_home(args.data, args.home, embeddings)
    questions = [q for q in load_questions() if q["collections"] != ["userguide"]]
    answered = answers(settings, embeddings, questions)
    texts = source_texts(settings, {st_id for _, _, st_ids in answered for st_id in st_ids})
    kept = (
        [p for p in load_pairs(args.pairs) if p["kind"] != BUILT_KIND]
        if args.pairs.exists()
        else []
    )
    built, to_read = build(answered, texts, kept)
    write(args.pairs, sorted([*built, *kept], key=lambda pair: pair["question"]))
    print(f"wrote {len(built)} copied pairs and kept {len(kept)} to {args.pairs}")
    if to_read:
        print(f"\n{len(to_read)} pairs to read by hand (kept as `reviewed` once labeled):")
        print("\n".join(to_read))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
