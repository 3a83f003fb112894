"""The run tags that tie the chain's wiring to the callback handler.

The composition root tags the retrieval run and the answer model, the retriever tags its
expander call, and :class:`callbacks.handler.AnswerEventHandler` tells runs apart by them (tags
reach every callback; metadata reaches only the start ones). One module, so both sides always
agree.
"""

__all__ = [
    "ADVICE_RECORD",
    "ANSWER_TAG",
    "EVIDENCE_FAILED",
    "EVIDENCE_STARTED",
    "EXPANDER_TAG",
    "EXPANSION_RECORD",
    "REFUSAL_EVENT",
    "RETRIEVAL_RECORD",
    "RETRIEVAL_TAG",
]

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
# The custom callback event with the advice gate's ruling and when it was made (``refused``,
# ``score``, ``threshold``, ``ms`` it took and ``ago_ms``, how long before the event it ended):
# for the event log and a trace's advice-gate span; a replay emits nothing for it.
ADVICE_RECORD = "reactome-answers:advice"
# The evidence judge failed (a model judge's server, say): the answer went on without
# evidence, and this custom event tells the log why.
EVIDENCE_FAILED = "reactome-answers:evidence-failed"
# The evidence judge was handed the answer's claims (``{"judge", "claims"}``): when the
# evidence step began, for a trace's evidence span; the log keeps it, a replay emits nothing.
EVIDENCE_STARTED = "reactome-answers:evidence-started"
# The custom callback event that records what was searched for: the standalone question (made
# from the history) first, then the alternative queries, and the collections. The event log
# keeps it, so a conversation's follow-up shows what it was taken to mean.
EXPANSION_RECORD = "reactome-answers:expansion"
# The custom callback event with the candidates the retriever considered and what became of
# each (kept with its number, or why it was dropped): kept in the event log only, like the
# refusal; the same string as the retrieval run's tag, in another namespace (event names).
RETRIEVAL_RECORD = "reactome-answers:retrieval"
