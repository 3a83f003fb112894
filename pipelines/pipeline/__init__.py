"""The pipeline object: one question in, events or a JSON result out.

This package is the composition root: the one place that joins the LangChain side
(``pipelines``) to the callback handler and the event logs (``callbacks``). Its modules, one
job each: ``_answer`` (:class:`AnswerPipeline`: its parts and the four ways to ask it),
``_request`` (one request: its log, its handler, the chain under the time limit),
``_retrieval`` (our retriever or one from outside), ``_chain`` (the Runnable), ``_operator``
(what serves the operator: ``/healthz``, housekeeping), ``_logs`` (a log per request,
pruning), ``_sync`` (the event loop behind the synchronous calls), ``_result`` (the JSON
result), ``_runnable`` (the whole request as a Runnable).

    from pipelines.pipeline import AnswerPipeline

    pipeline = AnswerPipeline()                    # settings from the environment
    result = pipeline.invoke("What causes Tangier disease?")
    result["text"], result["references"]           # the done event's data, plus request_id

    for event in pipeline.stream("What does IDH1 R132H do?"):
        print(event.type, event.data)              # start, citation..., token..., done

``ainvoke`` and ``astream`` are the same for asyncio. ``pipeline.as_runnable()`` is the whole
request as a LangChain Runnable that dispatches our events as custom events (``_runnable``),
for LCEL chains and LangGraph nodes. ``pipeline.chain`` is the underlying
LangChain Runnable (``{"question", "history", "collections", "cite_urls"}`` -> answer text);
it works with LangChain's own ``astream_events``. Each call builds its own
:class:`AnswerEventHandler`, so one pipeline serves concurrent requests.
"""

from pipelines.core.options import RequestOptions
from pipelines.pipeline._answer import AnswerPipeline, History, nothing_found_text
from pipelines.pipeline._operator import PipelineOperator
from pipelines.pipeline._parts import AnswerObserver
from pipelines.pipeline._result import answer_result
from pipelines.pipeline._runnable import PipelineRunnable

__all__ = [
    "AnswerObserver",
    "AnswerPipeline",
    "History",
    "PipelineOperator",
    "PipelineRunnable",
    "RequestOptions",
    "answer_result",
    "nothing_found_text",
]
