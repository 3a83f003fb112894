"""Which questions are refused before any search, and which must never be."""

from __future__ import annotations

import pytest

from pipelines.retrieval.refusal_rules import rule_refusal
from tests.benchmarks._common import load_questions

PERSONAL_CARE = [
    "Should I stop taking my statins before surgery?",
    "What dose of metformin should I take?",
    "How much aspirin should I take for my headache?",
    "Can I take ibuprofen with my blood pressure medication?",
    "Is it safe for me to skip insulin tonight?",
    "Should I really stop the chemotherapy?",
    "Can I double my dose of warfarin?",
]

MUST_ANSWER = [
    "How do statins lower cholesterol?",
    "Which drugs inhibit HMG-CoA reductase?",
    "I was diagnosed with Tangier disease, what is it?",
    "Can I use the pathway browser offline?",
    "Can I take a screenshot of the diagram?",
    "Can I map drug targets onto pathways?",
    "How can I get the drug list for a pathway?",
    "Can I start the drug-target overlay in the pathway browser?",
    "Can I combine expression data with the drug target overlay?",
    "Can I switch the diagram to show drugs?",
    "Should I start with the pathway browser or the analysis tool to study insulin resistance?",
    "Can I stop the tour? It covers insulin signalling.",
    "Can I increase the font size in the therapy pathway diagrams?",
    "Could I take part in curating vaccine pathways?",
    "Which pathways does my tablet app show?",
    "My medication list: how do these drugs act on CYP3A4?",
    "How does insulin signalling reach GLUT4?",
    "How do I start the Reactome graph database from a Docker image?",
]


@pytest.mark.parametrize("question", PERSONAL_CARE)
def test_advice_on_ones_own_care_is_refused_with_a_pointer_to_a_doctor(question: str) -> None:
    refusal = refusal_text(question)
    assert refusal is not None
    assert "doctor" in refusal


@pytest.mark.parametrize("question", MUST_ANSWER)
def test_questions_about_drugs_or_the_website_are_not_refused(question: str) -> None:
    assert refusal_text(question) is None


def refusal_text(question: str) -> str | None:
    refusal = rule_refusal(question, 2000)
    return None if refusal is None else refusal.text


def test_no_labeled_evaluation_question_is_refused() -> None:
    refused = [q["question"] for q in load_questions() if refusal_text(q["question"])]
    assert refused == []


@pytest.mark.parametrize("question", ["", " \n\t", "a\x00b", "\x1b[2J clear", "x\udcff"])
def test_empty_and_non_text_questions_are_refused(question: str) -> None:
    assert refusal_text(question) is not None


def test_tabs_and_newlines_are_text() -> None:
    assert refusal_text("What is ABCA1?\n\tAnd LDLR?\r\n") is None
