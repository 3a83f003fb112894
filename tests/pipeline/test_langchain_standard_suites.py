"""LangChain's own standard test suites, run against our retriever and chat models."""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.retrievers import BaseRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests
from langchain_tests.unit_tests import ChatModelUnitTests

from pipelines.answering.extractive import ExtractiveChatModel
from pipelines.catalog import bundled_dir
from pipelines.catalog.catalog import COLLECTION_NAMES
from pipelines.core.settings import load_settings
from pipelines.index.embeddings import MiniLMEmbeddings
from pipelines.index.ingestion import ingest, locate_files
from pipelines.index.store import open_client
from pipelines.retrieval.expander import RuleExpanderModel
from pipelines.retrieval.retriever import ReactomeRetriever


@cache
def _sample_store() -> dict[str, Any]:
    """The sample corpus in a real Chroma folder, built once for the suite's many retrievers."""
    home = Path(tempfile.mkdtemp(prefix="reactome-answers-suite-"))
    settings = load_settings(home=home)
    embeddings = MiniLMEmbeddings(model_cache=settings.model_cache_path)
    sources = locate_files(bundled_dir(), COLLECTION_NAMES, required=True)
    ingest(settings, sources, embeddings=embeddings)
    return {
        "settings": settings,
        "client": open_client(settings),
        "embeddings": embeddings,
        "expander": RuleExpanderModel(),
    }


class TestReactomeRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return ReactomeRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {**_sample_store(), "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return "What causes Tangier disease and what does ABCA1 do?"


class TestExtractiveChatModelStandard(ChatModelUnitTests):
    @property
    def chat_model_class(self) -> type[BaseChatModel]:
        return ExtractiveChatModel

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {}


class TestRuleExpanderModelStandard(ChatModelUnitTests):
    @property
    def chat_model_class(self) -> type[BaseChatModel]:
        return RuleExpanderModel

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {}
