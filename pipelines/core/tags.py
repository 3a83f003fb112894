"""The run tags that tie the chain's wiring to the callback handler.

The composition root tags the retrieval run and the answer model, the retriever tags its
expander call, and :class:`callbacks.handler.AnswerEventHandler` tells runs apart by them (tags
reach every callback; metadata reaches only the start ones). One module, so both sides always
agree.
"""

__all__ = ["ANSWER_TAG", "EXPANDER_TAG", "REFUSAL_EVENT", "RETRIEVAL_TAG"]

# The top-level retrieval run: its end is the gate (citations, then tokens).
RETRIEVAL_TAG = "reactome-answers:retrieval"
# The answer model: the only run whose tokens reach the answer stream.
ANSWER_TAG = "reactome-answers:answer"
# The query expander's model call: its tokens never reach the answer stream.
EXPANDER_TAG = "reactome-answers:expander"
# The custom callback event that records why a question was refused: the event log keeps it
# as a callback record (``logs stats`` counts refusals by its rule), and ``replay --check``
# passes it through without an event.
REFUSAL_EVENT = "reactome-answers:refusal"
