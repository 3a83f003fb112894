"""Which questions are refused before any search, and which must never be."""

from __future__ import annotations

import pytest

from pipelines.retrieval.refusal_rules import rule_refusal
from tests.benchmarks._common import load_questions
from tests.support.refusal_questions import MUST_ANSWER, PERSONAL_CARE


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
