"""The offline evidence judge on small passages written for the test, with the real embedding
model: a sentence is backed by the passage it came from and not by a neighbour on the same
topic about another gene. Every score asserted is far from the threshold (0.58): the judge's
figures on real data are tests/benchmarks/eval_evidence.py's."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from pipelines.core.settings import Settings
from pipelines.evidence.claims import Claim, Verdict
from pipelines.evidence.judges import OfflineJudge, judge_key
from pipelines.index.passages import SentenceBank

# Two passages on the same topic (bilirubin glucuronidation), each about its own gene.
UGT1A1 = (
    "UGT1A1 is the liver enzyme that conjugates bilirubin with glucuronic acid, making it "
    "soluble in bile. Defects in UGT1A1 cause Crigler-Najjar syndrome type 1, in which "
    "unconjugated bilirubin builds up in the blood from birth (Bosma et al. 1994). Milder "
    "UGT1A1 variants underlie Gilbert syndrome."
)
UGT1A4 = (
    "UGT1A4 glucuronidates amines and steroid hormones such as androsterone in the liver. "
    "Defects in UGT1A4 alter the clearance of drugs such as lamotrigine and tamoxifen. Its "
    "activity is induced by phenobarbital."
)
# The first passage with the other gene's symbol: the same words about another entity.
UGT1A4_COPY = UGT1A1.replace("UGT1A1", "UGT1A4")
COPIED = (
    "Defects in UGT1A1 cause Crigler-Najjar syndrome type 1, in which unconjugated bilirubin "
    "builds up in the blood from birth."
)


def _judge(minilm: Embeddings, claims: Sequence[tuple[str, str]]) -> list[Verdict]:
    """Verdicts for (sentence, passage) pairs judged together, as one answer's claims."""
    numbers = {passage: n for n, passage in enumerate(dict.fromkeys(p for _, p in claims), 1)}
    found = [Claim(sentence, numbers[passage], passage) for sentence, passage in claims]
    verdicts = OfflineJudge(SentenceBank(minilm)).verdicts(found)
    return [verdicts[(claim.sentence, claim.source_n)] for claim in found]


def test_the_default_threshold_is_the_settings_default() -> None:
    assert OfflineJudge(SentenceBank(None)).threshold == Settings().evidence_threshold


def test_a_copied_sentence_is_backed_by_its_passage_and_not_by_another_genes(
    minilm: Embeddings,
) -> None:
    own, other = _judge(minilm, [(COPIED, UGT1A1), (COPIED, UGT1A4)])
    assert own.supported
    assert own.score >= 0.9
    # The quote is the sentence it was copied from, as the passage writes it.
    start, end = own.quote_span
    assert UGT1A1[start:end].startswith(COPIED.removesuffix("."))
    assert not other.supported
    assert other.score <= 0.3


def test_the_same_words_about_another_gene_do_not_back_the_sentence(minilm: Embeddings) -> None:
    # Everything but the symbol matches, so similarity alone would pass it: a sentence naming
    # a symbol its passage never names scores at most half.
    (verdict,) = _judge(minilm, [(COPIED, UGT1A4_COPY)])
    assert not verdict.supported
    assert verdict.score <= 0.5


def test_a_paraphrase_is_backed_by_its_passage_and_not_by_the_other(minilm: Embeddings) -> None:
    reordered = (
        "From birth, unconjugated bilirubin accumulates in the blood of patients with "
        "Crigler-Najjar syndrome type 1, caused by UGT1A1 defects."
    )
    shortened = "Gilbert syndrome is caused by milder variants of UGT1A1."
    verdicts = _judge(
        minilm,
        [(reordered, UGT1A1), (shortened, UGT1A1), (reordered, UGT1A4), (shortened, UGT1A4)],
    )
    assert [v.supported for v in verdicts] == [True, True, False, False]
    assert all(v.score >= 0.75 for v in verdicts[:2])
    assert all(v.score <= 0.3 for v in verdicts[2:])
    start, end = verdicts[1].quote_span
    assert UGT1A1[start:end] == "Milder UGT1A1 variants underlie Gilbert syndrome."


def test_a_literature_citation_in_the_sentence_is_read_as_the_passage_reads_it(
    minilm: Embeddings,
) -> None:
    # The passage's sentences are scored without their citations; so is the claim.
    cited = COPIED.removesuffix(".") + " (Bosma et al. 1994)."
    (verdict,) = _judge(minilm, [(cited, UGT1A1)])
    assert verdict.supported
    assert verdict.score >= 0.9


class _Counting(Embeddings):
    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.texts: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)

    def embed_array(self, texts: Sequence[str]) -> Any:
        self.texts += list(texts)
        return np.asarray(self.inner.embed_documents(list(texts)), dtype=np.float32)


def test_a_sentence_copied_from_a_passage_is_not_embedded_again(minilm: Embeddings) -> None:
    # An extractive answer's sentences are the passages' own: their vectors are at hand, so
    # judging them runs no model (what keeps the judge within its time per answer).
    counting = _Counting(minilm)
    bank = SentenceBank(counting)
    bank.many([UGT1A1, UGT1A4])
    counting.texts.clear()
    judge = OfflineJudge(bank)
    copied = judge.verdicts([Claim(COPIED, 1, UGT1A1), Claim(COPIED, 2, UGT1A4)])
    assert counting.texts == []
    assert [v.supported for v in copied.values()] == [True, False]
    written = "Bilirubin is made soluble in bile by UGT1A1."
    assert judge.verdicts([Claim(written, 1, UGT1A1)])[(written, 1)].supported
    assert counting.texts == [written]


def test_a_passage_without_sentences_backs_nothing(minilm: Embeddings) -> None:
    (verdict,) = _judge(minilm, [(COPIED, "   ")])
    assert not verdict.supported
    assert verdict.score == 0.0


@pytest.mark.parametrize("sentence", ["", "[1]."])
def test_a_sentence_without_words_is_not_backed(minilm: Embeddings, sentence: str) -> None:
    (verdict,) = _judge(minilm, [(sentence, UGT1A1)])
    assert not verdict.supported


# The copied sentence in Spanish and Chinese, as a generative model answering in the asker's
# language writes it; and one that names no symbol at all.
SPANISH = (
    "Los defectos en UGT1A1 causan el síndrome de Crigler-Najjar de tipo 1, en el que la "
    "bilirrubina no conjugada se acumula en la sangre desde el nacimiento."
)
CHINESE = (
    "UGT1A1缺陷会导致1型Crigler-Najjar综合征\N{FULLWIDTH COMMA}未结合胆红素从出生起就在血液中蓄积。"
)
NAMELESS = "Esta enfermedad hereditaria se manifiesta desde el nacimiento con ictericia."


def test_a_sentence_in_another_language_is_judged_on_its_symbols(minilm: Embeddings) -> None:
    spanish_own, spanish_other, chinese_own, chinese_other = _judge(
        minilm, [(SPANISH, UGT1A1), (SPANISH, UGT1A4), (CHINESE, UGT1A1), (CHINESE, UGT1A4)]
    )
    assert spanish_own.supported
    assert chinese_own.supported
    # Cited for the other gene's passage, which never names UGT1A1: a mis-citation.
    assert not spanish_other.supported
    assert not chinese_other.supported
    # The quote is the passage sentence naming the symbol.
    start, end = spanish_own.quote_span
    assert "UGT1A1" in UGT1A1[start:end]


def test_a_sentence_in_another_language_naming_no_symbol_is_not_flagged(
    minilm: Embeddings,
) -> None:
    # Its words cannot be compared with the English passage's: no verdict against it.
    (verdict,) = _judge(minilm, [(NAMELESS, UGT1A4)])
    assert verdict.supported


def test_a_translated_acronym_is_no_symbol_the_passage_lacks(minilm: Embeddings) -> None:
    # "ARNm" is mRNA, "VIH" HIV: letters alone are translated; UGT1A1 is written alike.
    (verdict,) = _judge(
        minilm, [("El ARNm de UGT1A1 se traduce en el hígado, según el VIH-1.", UGT1A1)]
    )
    assert verdict.supported


# Through the multilingual model (decision 0037): sentences naming no symbol with digits are
# compared with the passage's sentences too. Each score here is at least 0.04 from the
# threshold (0.86).
GERMAN_CRIGLER_NAJJAR = (
    "Bei der Crigler-Najjar-Krankheit sammelt sich von Geburt an unkonjugiertes Bilirubin im "
    "Blut an."
)
GERMAN_PHENOBARBITAL = "Die Aktivität dieses Enzyms wird durch Phenobarbital gesteigert."


@pytest.fixture(scope="module")
def multilingual(minilm: Embeddings, model_cache: Path) -> Embeddings:
    from pipelines.core.settings import load_settings
    from pipelines.index.embeddings import make_multilingual_embeddings

    e5 = make_multilingual_embeddings(load_settings(model_cache=model_cache), minilm)
    assert e5 is not None
    return e5


def test_a_sentence_in_another_language_is_compared_with_its_passage_through_the_multilingual_model(
    minilm: Embeddings, multilingual: Embeddings
) -> None:
    judge = OfflineJudge(SentenceBank(minilm), multilingual=lambda: multilingual)
    claims = [
        Claim(GERMAN_CRIGLER_NAJJAR, 1, UGT1A1),
        Claim(GERMAN_CRIGLER_NAJJAR, 2, UGT1A4),
        Claim(GERMAN_PHENOBARBITAL, 2, UGT1A4),
        Claim(SPANISH, 1, UGT1A1),
        Claim(SPANISH, 2, UGT1A4),
    ]
    verdicts = judge.verdicts(claims)
    supported = {(c.sentence[:12], c.source_n): verdicts[judge_key(c)].supported for c in claims}
    assert supported == {
        (GERMAN_CRIGLER_NAJJAR[:12], 1): True,
        # No symbol to tell them apart, yet about the other passage: caught now.
        (GERMAN_CRIGLER_NAJJAR[:12], 2): False,
        (GERMAN_PHENOBARBITAL[:12], 2): True,
        (SPANISH[:12], 1): True,
        (SPANISH[:12], 2): False,  # UGT1A1 is not in UGT1A4's passage
    }
    # The quote is the passage sentence the translation says.
    start, end = verdicts[judge_key(claims[2])].quote_span
    assert "phenobarbital" in UGT1A4[start:end]
    # Without the model, the sentence naming no symbol is not flagged, as before.
    english_only = OfflineJudge(SentenceBank(minilm))
    assert english_only.verdicts([claims[1]])[judge_key(claims[1])].supported
