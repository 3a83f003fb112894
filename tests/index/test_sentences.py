"""Sentences that can be quoted alone: segmentation, literature citations, the two checks."""

from __future__ import annotations

import pytest

from pipelines.index.sentences import (
    is_fragment,
    points_back,
    split_paragraphs,
    split_sentences,
    strip_literature,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("RRM2B (Kuo et al. 2010) repairs.", "RRM2B repairs."),
        ("XPC (Adimoolam and Ford 2002) binds.", "XPC binds."),
        ("Both act (reviewed in Corless et al, 2011; Li 2016).", "Both act."),
        ("It ends here. (Kerner 2000). Next.", "It ends here. Next."),
        ("Kinases (ATM and ATR) act first.", "Kinases (ATM and ATR) act first."),
        ("Residues 1-20 (exon 2) are lost.", "Residues 1-20 (exon 2) are lost."),
        ("About (3 (Smith 1999) more) of them.", "About (3 more) of them."),
    ],
)
def test_literature_parentheticals_go_whole_and_nothing_else(text: str, expected: str) -> None:
    assert strip_literature(text) == expected


def test_splits_at_sentence_ends_not_at_abbreviations() -> None:
    text = (
        "DNA damage activates ATR (Lakin et al. 1999). ATR phosphorylates p53, e.g. at S15, "
        "i.e. near its N-terminus. In E. coli the SOS response differs by ca. 1.5 fold.\n\n"
        "- A list item without a full stop\n- Another item that ends."
    )
    assert split_sentences(text) == [
        "DNA damage activates ATR.",
        "ATR phosphorylates p53, e.g. at S15, i.e. near its N-terminus.",
        "In E. coli the SOS response differs by ca. 1.5 fold.",
        "A list item without a full stop",
        "Another item that ends.",
    ]


@pytest.mark.parametrize(
    "piece",
    [
        "Other targets are RRM2B (Kuo et al.",
        "IRS and Shc) by the insulin receptor tyrosine kinase.",
        "by calpain, which leaves the membrane.",
        ") and then it binds.",
        "It binds [1, 2 of them.",
    ],
)
def test_fragments_are_recognised(piece: str) -> None:
    assert is_fragment(piece)


@pytest.mark.parametrize(
    "sentence",
    [
        "p53 is stabilised after DNA damage.",
        "mTORC1 senses amino acids.",
        "cAMP activates PKA (protein kinase A).",
        "ABCA1 moves cholesterol [see below].",
    ],
)
def test_sentences_starting_with_a_gene_name_are_whole(sentence: str) -> None:
    assert not is_fragment(sentence)


@pytest.mark.parametrize(
    ("sentence", "leans"),
    [
        ("There, CDK5:p25 phosphorylates tau.", True),
        ("This cleavage frees p25.", True),
        ("However, most variants are rare.", True),
        ("In addition, ABCA1 moves phospholipids.", True),
        ("They form a pore.", True),
        ("Theophylline inhibits phosphodiesterases.", False),
        ("Thiamine is vitamin B1.", False),
        ("ABCA1 moves cholesterol.", False),
    ],
)
def test_sentences_that_lean_on_the_one_before(sentence: str, leans: bool) -> None:
    assert points_back(sentence) is leans


def test_a_full_stop_left_alone_where_a_chunk_was_cut_is_no_sentence() -> None:
    text = "Celecoxib inhibits PTGS2 with fewer side effects\n\n. Celecoxib inhibits PTGS2."
    assert split_sentences(text) == [
        "Celecoxib inhibits PTGS2 with fewer side effects",
        "Celecoxib inhibits PTGS2.",
    ]
    assert split_paragraphs(text) == [
        ["Celecoxib inhibits PTGS2 with fewer side effects"],
        ["Celecoxib inhibits PTGS2."],
    ]
