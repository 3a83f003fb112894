"""A pipeline with a fake retriever and fake models, to isolate the handler and the stream,
and the documents it retrieves (real stable ids and names; our own sentences)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel, FakeListChatModel
from langchain_core.retrievers import BaseRetriever
from pydantic import Field

from pipelines.core.settings import load_settings
from pipelines.pipeline import AnswerPipeline

__all__ = ["ABCA1", "CDK5", "GUIDE", "VARIANT", "FakeRetriever", "make_pipeline"]

ABCA1 = Document(
    "ABCA1 exports cholesterol to apolipoprotein A-I. Without it no HDL forms.",
    metadata={"st_id": "R-HSA-5682113", "display_name": "Defective ABCA1 causes TGD",
              "collection": "reactome"},
)  # fmt: skip
CDK5 = Document(
    "p25 keeps CDK5 active in Alzheimer's disease models.",
    metadata={"st_id": "R-HSA-8862803", "display_name": "Deregulated CDK5 in AD",
              "collection": "reactome"},
)  # fmt: skip
VARIANT = Document(
    "ABCA1 W590S cannot move cholesterol.",
    metadata={"st_id": "R-HSA-5682201", "display_name": "ABCA1 W590S [plasma membrane]",
              "collection": "disease_variants"},
)  # fmt: skip
GUIDE = Document(
    "Open the Pathway Browser from the home page and click a pathway.",
    metadata={"url": "/userguide/pathway-browser", "display_name": "Using the Pathway Browser",
              "title": "Using the Pathway Browser", "collection": "userguide"},
)  # fmt: skip


class FakeRetriever(BaseRetriever):
    """Returns fixed documents; may run an expander model and a nested retriever first."""

    documents: list[Document]
    expander: BaseChatModel | None = None
    nested: BaseRetriever | None = None
    calls: int = 0
    queries: list[str] = Field(default_factory=list)  # what each call searched for

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        self.calls += 1
        self.queries.append(query)
        child = run_manager.get_child()
        if self.expander is not None:
            # Streamed, so its tokens really reach the handler (which must ignore them).
            "".join(str(c.content) for c in self.expander.stream(query, {"callbacks": child}))
        if self.nested is not None:
            self.nested.invoke(query, {"callbacks": child})
        return list(self.documents)


def make_pipeline(
    documents: Sequence[Document],
    answer: str | FakeListChatModel,
    *,
    expander: BaseChatModel | None = None,
    nested: BaseRetriever | None = None,
    **settings: Any,
) -> tuple[AnswerPipeline, FakeRetriever, FakeListChatModel]:
    model = (
        answer if isinstance(answer, FakeListChatModel) else FakeListChatModel(responses=[answer])
    )
    retriever = FakeRetriever(documents=list(documents), expander=expander, nested=nested)
    pipeline = AnswerPipeline(
        load_settings(**settings),
        answer_model=model,
        expander_model=FakeListChatModel(responses=["unused"]),
        retriever=retriever,
        raise_handler_errors=True,
    )
    return pipeline, retriever, model
