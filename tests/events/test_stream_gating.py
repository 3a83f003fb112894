"""The pipeline's event stream with fake models and a fake retriever, to isolate the handler.

``FakeListChatModel`` streams one character per chunk, so markers arrive split across tokens.
Every stream is checked against the invariants every stream must keep (docs/contract.md).
"""

from __future__ import annotations

import asyncio
import gc
import threading
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.messages import AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.runnables import RunnableLambda

from callbacks.events import CitationEvent, DoneEvent, ErrorEvent, Event, TokenData, TokenEvent
from callbacks.handler import AnswerEventHandler
from pipelines.core.options import RequestOptions
from pipelines.core.settings import load_settings
from pipelines.core.tags import ANSWER_TAG, RETRIEVAL_TAG
from pipelines.core.tokens import count_tokens
from pipelines.pipeline import AnswerPipeline, nothing_found_text
from pipelines.pipeline._request import AnswerRun
from tests.support.fake_pipeline import ABCA1, CDK5, GUIDE, VARIANT, FakeRetriever, make_pipeline
from tests.support.invariants import check_stream


def run(
    pipeline: AnswerPipeline, question: str = "What does ABCA1 do?", **options: Any
) -> list[Event]:
    events = list(pipeline.stream(question, **options))
    check_stream(events)
    return events


def of_type(events: Sequence[Event], kind: type[Any]) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


def test_markers_split_across_tokens_are_finalized() -> None:
    answer = "ABCA1 moves cholesterol [3]. Tangier disease follows [1, 3]."
    pipeline, _, _ = make_pipeline([ABCA1, CDK5, VARIANT], answer)
    events = run(pipeline)
    tokens = of_type(events, TokenEvent)
    assert "".join(t.data.text for t in tokens) == answer
    assert len(tokens) == len(answer)  # one character each: "[", "3", "]" arrive apart
    citations = [c.data.st_id for c in of_type(events, CitationEvent)]
    assert citations == ["R-HSA-5682113", "R-HSA-8862803", "R-HSA-5682201"]
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.data.state == "answered"
    assert done.data.text == "ABCA1 moves cholesterol [1]. Tangier disease follows [1][2]."
    assert [(r.n, r.source_n, r.st_id) for r in done.data.references] == [
        (1, 3, "R-HSA-5682201"),
        (2, 1, "R-HSA-5682113"),
    ]
    assert done.data.usage.answer_tokens > 5
    assert done.data.timings.first_token_ms is not None
    assert done.data.timings.first_token_ms <= done.data.timings.total_ms


def test_expander_tokens_never_reach_the_answer_stream() -> None:
    looks_like_an_answer = "ABCA1 is the answer [1]. EXPANDER-SAID-THIS"
    expander = FakeListChatModel(responses=[looks_like_an_answer])
    pipeline, _, _ = make_pipeline(
        [ABCA1], "Cholesterol leaves cells via ABCA1 [1].", expander=expander
    )
    events = run(pipeline)
    streamed = "".join(t.data.text for t in of_type(events, TokenEvent))
    assert streamed == "Cholesterol leaves cells via ABCA1 [1]."
    assert "EXPANDER" not in streamed


def test_nested_retrievers_do_not_emit_citations() -> None:
    nested = FakeRetriever(documents=[CDK5, VARIANT])
    pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 [1].", nested=nested)
    events = run(pipeline)
    assert [c.data.st_id for c in of_type(events, CitationEvent)] == ["R-HSA-5682113"]
    assert nested.calls == 1


def test_out_of_range_markers_never_reach_done() -> None:
    pipeline, _, _ = make_pipeline([ABCA1, CDK5], "Bound [7] and cited [2].")
    done = run(pipeline)[-1]
    assert isinstance(done, DoneEvent)
    assert done.data.text == "Bound and cited [1]."
    assert [r.st_id for r in done.data.references] == ["R-HSA-8862803"]


def test_an_answer_citing_nothing_keeps_every_source() -> None:
    pipeline, _, _ = make_pipeline([ABCA1, CDK5], "An answer without any markers.")
    done = run(pipeline)[-1]
    assert isinstance(done, DoneEvent)
    assert done.data.text == "An answer without any markers."
    assert [(r.n, r.source_n) for r in done.data.references] == [(1, 1), (2, 2)]


def test_a_user_guide_answer_has_zero_citations_by_default() -> None:
    pipeline, _, _ = make_pipeline([GUIDE], "Click a pathway in the browser [1].")
    events = run(pipeline, "How do I use the pathway browser?")
    assert of_type(events, CitationEvent) == []
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.data.state == "answered"
    assert done.data.references == []
    assert done.data.text == "Click a pathway in the browser."  # no source to point at


def test_a_user_guide_answer_cites_urls_when_switched_on() -> None:
    pipeline, _, _ = make_pipeline([GUIDE], "Click a pathway in the browser [1].")
    events = run(pipeline, "How do I use the pathway browser?", cite_urls=True)
    (citation,) = of_type(events, CitationEvent)
    assert (citation.data.url, citation.data.st_id) == ("/userguide/pathway-browser", None)
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert [r.url for r in done.data.references] == ["/userguide/pathway-browser"]


def test_cite_urls_setting_is_the_default_for_requests() -> None:
    pipeline, _, _ = make_pipeline([GUIDE], "Click [1].", cite_urls=True)
    assert len(of_type(run(pipeline), CitationEvent)) == 1


def test_a_model_failing_mid_stream_ends_with_error_then_done_failed() -> None:
    model = FakeListChatModel(responses=["ABCA1 exports cholesterol [1]."], error_on_chunk_number=6)
    pipeline, _, _ = make_pipeline([ABCA1], model)
    events = run(pipeline)
    assert "".join(t.data.text for t in of_type(events, TokenEvent)) == "ABCA1 "
    (error,) = of_type(events, ErrorEvent)
    assert error.data.code == "model_failed"
    assert "FakeListChatModelError" in error.data.message
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.data.state == "failed"
    # The partial text cites nothing: a failure is not a grounded answer that cites nothing,
    # so no source is listed (issue 37: all 7 retrieved sources showed under the error).
    assert done.data.references == []


def test_a_failure_whose_finalizing_breaks_still_says_how_large_the_prompt_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # With no log, a trace reads the prompt's size from done alone (decision 0044).
    events: list[Event] = []
    handler = AnswerEventHandler(
        request_id="r", emit=events.append, raise_error=True, record=lambda *_: None,
        record_text=False, records_later=True,
    )  # fmt: skip
    handler.start("q", ["reactome"], {})
    retrieval, model = uuid.uuid4(), uuid.uuid4()
    handler.on_retriever_start({}, "q", run_id=retrieval, tags=[RETRIEVAL_TAG], name="retrieval")
    handler.on_retriever_end([ABCA1], run_id=retrieval)
    prompt = "Answer from the sources below, citing each by its number."
    handler.on_chat_model_start(
        {}, [[HumanMessage(content=prompt)]], run_id=model, tags=[ANSWER_TAG], name="answer"
    )

    def breaks(*_: Any, **__: Any) -> DoneEvent:
        raise RuntimeError("the finalizer broke")

    monkeypatch.setattr(handler, "finish", breaks)
    done = handler.fail("model_failed", "the model went away")
    assert done.data.state == "failed"
    assert done.data.text == ""
    assert done.data.usage.prompt_tokens == count_tokens(prompt)


def test_a_failure_after_a_marker_keeps_what_that_marker_cites() -> None:
    model = FakeListChatModel(
        responses=["ABCA1 exports cholesterol [2]. More to come"], error_on_chunk_number=34
    )
    pipeline, _, _ = make_pipeline([ABCA1, CDK5], model)
    done = run(pipeline)[-1]
    assert isinstance(done, DoneEvent)
    assert done.data.state == "failed"
    assert done.data.text == "ABCA1 exports cholesterol [1]. Mor"
    assert [r.st_id for r in done.data.references] == ["R-HSA-8862803"]


def test_documents_with_unusable_identifiers_become_context_not_a_hang() -> None:
    no_collection = Document(
        "ABCA1 text.", metadata={"st_id": "R-HSA-5682113", "display_name": "X"}
    )
    file_url = Document("Page.", metadata={"url": "/work/pages/guide.md", "display_name": "Guide"})
    not_reactome = Document("Gene.", metadata={"st_id": "ENSG00000165029", "display_name": "Gene"})
    pipeline, _, _ = make_pipeline([no_collection, file_url, not_reactome], "Answer [1].")
    events = run(pipeline, cite_urls=True)
    citations = of_type(events, CitationEvent)
    assert [(c.data.st_id, c.data.collection) for c in citations] == [("R-HSA-5682113", "unknown")]


def test_a_plain_runnable_works_as_the_retriever() -> None:
    pipeline = AnswerPipeline(
        load_settings(),
        answer_model=FakeListChatModel(responses=["CDK5 [1]."]),
        expander_model=FakeListChatModel(responses=["unused"]),
        retriever=RunnableLambda(lambda _question: [CDK5]),
        raise_handler_errors=True,
    )
    events = run(pipeline)
    assert [c.data.st_id for c in of_type(events, CitationEvent)] == ["R-HSA-8862803"]
    assert "".join(t.data.text for t in of_type(events, TokenEvent)) == "CDK5 [1]."


def test_a_model_that_does_not_stream_still_answers() -> None:
    model = FakeListChatModel(responses=["ABCA1 exports cholesterol [1]."], disable_streaming=True)
    pipeline, _, _ = make_pipeline([ABCA1], model)
    events = run(pipeline)
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert (done.data.state, done.data.text) == ("answered", "ABCA1 exports cholesterol [1].")
    assert of_type(events, TokenEvent) == []


class StallingModel(FakeListChatModel):
    """Streams the first ``sent`` characters of its response at once, then never another
    until cancelled: a model that hangs, on a fast machine or a busy one."""

    sent: int = 0

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for character in self.responses[0][: self.sent]:
            yield ChatGenerationChunk(message=AIMessageChunk(content=character))
        await asyncio.Event().wait()


def test_leaving_a_sync_stream_does_not_wait_for_the_model() -> None:
    # The model never sends a character: the loop must end without waiting for one.
    pipeline, _, _ = make_pipeline([ABCA1], StallingModel(responses=["abc"]))

    def leave_at_the_first_citation() -> None:
        for event in pipeline.stream("q"):
            if isinstance(event, CitationEvent):
                break

    leaving = threading.Thread(target=leave_at_the_first_citation, daemon=True)
    leaving.start()
    leaving.join(timeout=120)  # a bound for a loop that waits forever, not for a slow one
    assert not leaving.is_alive()


def test_sync_streams_share_one_loop_thread_that_ends_with_the_pipeline() -> None:
    before = set(threading.enumerate())
    pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 [1].")
    for _ in range(3):
        assert run(pipeline)[-1].type == "done"
    (loop_thread,) = [
        thread
        for thread in set(threading.enumerate()) - before
        if thread.name == "reactome-answers-stream"
    ]
    del pipeline
    gc.collect()
    loop_thread.join(timeout=60)  # a bound for a thread that never ends
    assert not loop_thread.is_alive()


@pytest.mark.parametrize("question", ["", "   \n\t", "x" * 2001])
def test_empty_or_oversized_questions_are_refused_before_any_model(question: str) -> None:
    pipeline, retriever, model = make_pipeline([ABCA1], "never said")
    events = run(pipeline, question)
    assert [e.type for e in events] == ["start", "done"]
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.data.state == "refused"
    assert done.data.text  # a message saying why
    assert retriever.calls == 0
    assert model.i == 0


def test_nothing_retrieved_is_nothing_found_without_a_model_call() -> None:
    pipeline, retriever, model = make_pipeline([], "never said")
    events = run(pipeline, "What is the capital of Peru?")
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert (done.data.state, done.data.text, done.data.references) == (
        "nothing_found",
        nothing_found_text(),
        [],
    )
    assert retriever.calls == 1
    assert model.i == 0
    assert of_type(events, TokenEvent) == []


def test_a_hanging_model_times_out() -> None:
    # Five characters at once, then nothing: what came before the limit stays, whatever the
    # machine's speed (the limit is well beyond the time five characters take).
    hanging = StallingModel(responses=["ABCA1 exports cholesterol [1]."], sent=5)
    pipeline, _, _ = make_pipeline([ABCA1], hanging, request_timeout_s=3)
    events = run(pipeline)
    (error,) = of_type(events, ErrorEvent)
    assert error.data.code == "timeout"
    assert "REACTOME_ANSWERS_REQUEST_TIMEOUT_S" in error.data.message
    assert "".join(token.data.text for token in of_type(events, TokenEvent)) == "ABCA1"


def test_invoke_and_ainvoke_return_the_done_data_with_request_id() -> None:
    pipeline, _, _ = make_pipeline([ABCA1, CDK5], "CDK5 [2].")
    result = pipeline.invoke("q", request_id="req-1")
    assert result["request_id"] == "req-1"
    assert result["state"] == "answered"
    assert result["text"] == "CDK5 [1]."
    assert result["references"] == [
        {"n": 1, "source_n": 2, "st_id": "R-HSA-8862803",
         "display_name": "Deregulated CDK5 in AD", "collection": "reactome"}
    ]  # fmt: skip
    again = asyncio.run(pipeline.ainvoke("q", request_id="req-2"))
    assert {**again, "request_id": "req-1", "timings": result["timings"]} == result


def test_concurrent_requests_keep_their_own_streams() -> None:
    async def both() -> list[list[Event]]:
        first, _, _ = make_pipeline(
            [ABCA1], FakeListChatModel(responses=["ABCA1 [1]."], sleep=0.01)
        )
        second, _, _ = make_pipeline([CDK5], FakeListChatModel(responses=["CDK5 [1]."], sleep=0.01))

        async def collect(pipeline: AnswerPipeline, request_id: str) -> list[Event]:
            return [e async for e in pipeline.astream("q", request_id=request_id)]

        return list(await asyncio.gather(collect(first, "a"), collect(second, "b")))

    first_events, second_events = asyncio.run(both())
    for events, request_id, st_id in (
        (first_events, "a", "R-HSA-5682113"),
        (second_events, "b", "R-HSA-8862803"),
    ):
        done = check_stream(events)
        assert {e.request_id for e in events} == {request_id}
        assert [r.st_id for r in done.data.references] == [st_id]


def test_a_consumer_that_leaves_cancels_the_model() -> None:
    slow = FakeListChatModel(responses=["b" * 400], sleep=0.01)
    pipeline, _, _ = make_pipeline([ABCA1], slow)

    async def leave_early() -> int:
        seen = 0
        stream = pipeline.astream("q")
        async for event in stream:
            if isinstance(event, TokenEvent):
                seen += 1
                if seen == 3:
                    break
        await stream.aclose()
        return seen

    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(leave_early()) == 3
        # Nothing is left running for nobody.
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        assert pending == []
    finally:
        loop.close()


def test_the_chain_works_with_langchains_own_astream_events() -> None:
    pipeline, _, _ = make_pipeline([ABCA1], "ABCA1 [1].")

    async def collect() -> list[Any]:
        return [e async for e in pipeline.chain.astream_events({"question": "q"}, version="v2")]

    kinds = [event["event"] for event in asyncio.run(collect())]
    assert "on_retriever_end" in kinds
    assert kinds.count("on_chat_model_stream") == len("ABCA1 [1].")


@pytest.mark.parametrize("after_tokens", [0, 3])
def test_work_that_dies_without_done_still_ends_the_stream_with_done(
    after_tokens: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug that ends the work without its done (here: the request's work raising past
    every handler) still gives the caller an error and a done, after what was sent."""

    async def dying(_self: AnswerRun, handler: Any, _options: RequestOptions) -> None:
        for number in range(after_tokens):
            handler._send(TokenEvent, TokenData(text=f"t{number} "))
        await asyncio.sleep(0)
        raise RuntimeError("the work broke")

    monkeypatch.setattr(AnswerRun, "_run", dying)
    pipeline = AnswerPipeline(
        load_settings(event_logs=False),
        answer_model=FakeListChatModel(responses=["unused"]),
        expander_model=FakeListChatModel(responses=["{}"]),
        retriever=RunnableLambda(lambda _question: []),
    )
    events = list(pipeline.stream("What does ABCA1 do?"))
    assert [e.type for e in events] == ["start", *["token"] * after_tokens, "error", "done"]
    error = events[-2]
    assert isinstance(error, ErrorEvent)
    assert error.data.code == "internal"
    assert "stopped unexpectedly (RuntimeError: the work broke)" in error.data.message
    assert check_stream(events).data.state == "failed"
