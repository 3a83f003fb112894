"""The expander: routing rules, the rule-based expansion, and how model replies are checked."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import FakeListChatModel

from pipelines.core.settings import load_settings
from pipelines.index.store import open_client
from pipelines.retrieval.expander import (
    RuleExpanderModel,
    expander_messages,
    parse_expansion,
    route,
    rule_expansion,
)
from pipelines.retrieval.retriever import ReactomeRetriever


@pytest.mark.parametrize(
    ("question", "collections"),
    [
        ("How do I use the pathway browser?", ["userguide"]),
        ("How can I analyse my gene list?", ["userguide"]),
        ("Where do I download the release files?", ["userguide"]),
        ("What does IDH1 R132H do?", ["disease_variants", "reactome"]),
        ("Which mutations in ABCA1 cause disease?", ["disease_variants", "reactome"]),
        ("What does BRAF p.V600E change?", ["disease_variants", "reactome"]),
        ("What is glycolysis?", ["reactome", "disease_variants"]),
        ("What causes Tangier disease?", ["reactome", "disease_variants"]),
    ],
)
def test_routing_rules(question: str, collections: list[str]) -> None:
    assert route(question) == collections


def test_rule_expansion_keeps_symbols_and_variant_notations() -> None:
    expansion = rule_expansion("What does the IDH1 R132H mutation do in gliomas?")
    assert expansion.question == "What does the IDH1 R132H mutation do in gliomas?"
    assert "IDH1 R132H" in expansion.queries
    assert any("gliomas" in q and "What" not in q for q in expansion.queries)
    assert len(expansion.queries) <= 4
    assert len({q.lower() for q in expansion.queries}) == len(expansion.queries)


def test_follow_up_questions_become_standalone() -> None:
    history = [("user", "What does ABCA1 do in Tangier disease?"), ("assistant", "It exports...")]
    expansion = rule_expansion("How does it affect HDL?", history)
    assert expansion.question == "How does ABCA1 affect HDL? (about: Tangier disease)"
    assert rule_expansion("What are its variants?", history).question == (
        "What are ABCA1's variants? (about: Tangier disease)"
    )
    alone = [("user", "What does ABCA1 do?")]
    assert rule_expansion("What disease does a defect in it cause?", alone).question == (
        "What disease does a defect in ABCA1 cause?"
    )
    assert rule_expansion("What is glycolysis?", history).question == "What is glycolysis?"
    # No gene or protein named before: what the last question was about is appended.
    about = [("user", "How does glycolysis start?")]
    assert rule_expansion("What regulates it?", about).question == (
        "What regulates it? (about: glycolysis start)"
    )


def test_rule_expander_speaks_through_the_chat_model_interface() -> None:
    history = [("user", "Tell me about CDK5")]
    reply = RuleExpanderModel().invoke(expander_messages("What activates it?", history)).content
    parsed = parse_expansion(str(reply), "What activates it?")
    assert parsed.fallback is None
    assert "CDK5" in parsed.question


@pytest.mark.parametrize(
    ("reply", "fallback"),
    [
        ("I think you should search for ABCA1.", "expander reply was not JSON"),
        ('{"queries": ["x"], "collections": ["pathways"]}', "expander chose no known collection"),
        ('```json\n{"question": "q"}\n```', "expander chose no known collection"),
    ],
)
def test_unusable_model_replies_fall_back_to_rules(reply: str, fallback: str) -> None:
    expansion = parse_expansion(reply, "What does IDH1 R132H do?")
    assert expansion.fallback == fallback
    assert expansion.queries[0] in ("What does IDH1 R132H do?", "q")
    assert expansion.collections == route(expansion.queries[0])


def test_model_reply_is_trusted_only_for_what_can_be_checked() -> None:
    reply = (
        '{"question": "Q", "queries": ["a", "", 7, "a", "b"], "collections": ["userguide", "x"]}'
    )
    expansion = parse_expansion(reply, "original", max_queries=3)
    assert expansion.queries == ["Q", "a", "b"]
    assert expansion.collections == ["userguide"]


def test_a_failing_expander_falls_back_to_the_question(
    sample_home: Path, minilm: Embeddings
) -> None:
    broken = FakeListChatModel(responses=["x"], error_on_chunk_number=0)
    settings = load_settings(home=sample_home)
    retriever = ReactomeRetriever(
        settings=settings, client=open_client(settings), embeddings=minilm, expander=broken
    )
    documents = retriever.invoke("What causes Tangier disease?")
    assert "R-HSA-5682113" in [d.metadata.get("st_id") for d in documents]
    # Routing survives the failure: a website question still goes to the user guide only.
    guide = retriever.invoke("How do I use the pathway browser?")
    assert guide
    assert {d.metadata["collection"] for d in guide} == {"userguide"}
