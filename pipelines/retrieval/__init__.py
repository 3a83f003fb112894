"""From a question to ranked sources: the refusal rules applied before any search
(``refusal_rules``), the personal-advice gate (``advice``), the query expander and router
(``expander``) and the retriever that searches, fuses and gates (``retriever``): it runs the
expander as a child run (``expander_run``), searches the versions it keeps live
(``active_versions``), orders what it found with pure arithmetic (``ranking``) and records
which candidates it considered and what became of each (``retrieval_record``).
"""

from typing import TYPE_CHECKING

from pipelines.core.lazy import lazy_attributes

# Imported on first use: the retriever brings LangChain and Chroma, the gate onnxruntime, and
# a reader of logs wants only the retrieval record's model (the command line starts at once).
# Bound here, not lazily: the function shares its module's name, and once that module is
# imported (every reader of a log imports it) the module would shadow a lazy name.
from pipelines.retrieval.retrieval_record import (
    OUTCOMES,
    RECORD_BOUND,
    Candidate,
    CandidateRanks,
    RetrievalRecord,
    retrieval_record,
)

if TYPE_CHECKING:
    from pipelines.retrieval.active_versions import ActiveVersions, ReadWriteGate
    from pipelines.retrieval.advice import (
        MARGIN,
        THRESHOLD,
        WEBSITE_THRESHOLD,
        AdviceExample,
        AdviceGate,
        AdviceVerdict,
        leave_one_out,
        load_examples,
    )
    from pipelines.retrieval.expander import (
        STOPWORDS,
        Expansion,
        RuleExpanderModel,
        expander_messages,
        parse_expansion,
        route,
        rule_expansion,
    )
    from pipelines.retrieval.expander_run import (
        EXPANSION,
        EXPANSION_FALLBACK,
        aexpand,
        expand,
        expansion_data,
        fallback_data,
        stop_if_personal_advice,
    )
    from pipelines.retrieval.ranking import (
        CHUNK_OUTCOMES,
        CHUNKS_PER_SOURCE,
        RRF_K,
        ChunkOutcome,
        RankedSources,
        ScoredChunk,
        SourceEntry,
        best_first,
        entity_of,
        gate_collections,
        keyword_evidence,
        one_per_entity,
        rank_sources,
        rank_with_outcomes,
        reciprocal_rank_fusion,
    )
    from pipelines.retrieval.refusal_rules import ADVICE_REFUSAL, Refusal, rule_refusal
    from pipelines.retrieval.retriever import RANKINGS, Ranking, ReactomeRetriever

__all__ = [
    "ADVICE_REFUSAL",
    "CHUNKS_PER_SOURCE",
    "CHUNK_OUTCOMES",
    "EXPANSION",
    "EXPANSION_FALLBACK",
    "MARGIN",
    "OUTCOMES",
    "RANKINGS",
    "RECORD_BOUND",
    "RRF_K",
    "STOPWORDS",
    "THRESHOLD",
    "WEBSITE_THRESHOLD",
    "ActiveVersions",
    "AdviceExample",
    "AdviceGate",
    "AdviceVerdict",
    "Candidate",
    "CandidateRanks",
    "ChunkOutcome",
    "Expansion",
    "RankedSources",
    "Ranking",
    "ReactomeRetriever",
    "ReadWriteGate",
    "Refusal",
    "RetrievalRecord",
    "RuleExpanderModel",
    "ScoredChunk",
    "SourceEntry",
    "aexpand",
    "best_first",
    "entity_of",
    "expand",
    "expander_messages",
    "expansion_data",
    "fallback_data",
    "gate_collections",
    "keyword_evidence",
    "leave_one_out",
    "load_examples",
    "one_per_entity",
    "parse_expansion",
    "rank_sources",
    "rank_with_outcomes",
    "reciprocal_rank_fusion",
    "retrieval_record",
    "route",
    "rule_expansion",
    "rule_refusal",
    "stop_if_personal_advice",
]

__getattr__ = lazy_attributes(
    __name__,
    {
        "ADVICE_REFUSAL": "pipelines.retrieval.refusal_rules",
        "ActiveVersions": "pipelines.retrieval.active_versions",
        "AdviceExample": "pipelines.retrieval.advice",
        "AdviceGate": "pipelines.retrieval.advice",
        "AdviceVerdict": "pipelines.retrieval.advice",
        "CHUNKS_PER_SOURCE": "pipelines.retrieval.ranking",
        "CHUNK_OUTCOMES": "pipelines.retrieval.ranking",
        "ChunkOutcome": "pipelines.retrieval.ranking",
        "EXPANSION": "pipelines.retrieval.expander_run",
        "EXPANSION_FALLBACK": "pipelines.retrieval.expander_run",
        "Expansion": "pipelines.retrieval.expander",
        "MARGIN": "pipelines.retrieval.advice",
        "RANKINGS": "pipelines.retrieval.retriever",
        "RRF_K": "pipelines.retrieval.ranking",
        "RankedSources": "pipelines.retrieval.ranking",
        "Ranking": "pipelines.retrieval.retriever",
        "ReactomeRetriever": "pipelines.retrieval.retriever",
        "ReadWriteGate": "pipelines.retrieval.active_versions",
        "Refusal": "pipelines.retrieval.refusal_rules",
        "RuleExpanderModel": "pipelines.retrieval.expander",
        "STOPWORDS": "pipelines.retrieval.expander",
        "ScoredChunk": "pipelines.retrieval.ranking",
        "SourceEntry": "pipelines.retrieval.ranking",
        "THRESHOLD": "pipelines.retrieval.advice",
        "WEBSITE_THRESHOLD": "pipelines.retrieval.advice",
        "aexpand": "pipelines.retrieval.expander_run",
        "best_first": "pipelines.retrieval.ranking",
        "entity_of": "pipelines.retrieval.ranking",
        "expand": "pipelines.retrieval.expander_run",
        "expander_messages": "pipelines.retrieval.expander",
        "expansion_data": "pipelines.retrieval.expander_run",
        "fallback_data": "pipelines.retrieval.expander_run",
        "gate_collections": "pipelines.retrieval.ranking",
        "keyword_evidence": "pipelines.retrieval.ranking",
        "leave_one_out": "pipelines.retrieval.advice",
        "load_examples": "pipelines.retrieval.advice",
        "one_per_entity": "pipelines.retrieval.ranking",
        "parse_expansion": "pipelines.retrieval.expander",
        "rank_sources": "pipelines.retrieval.ranking",
        "rank_with_outcomes": "pipelines.retrieval.ranking",
        "reciprocal_rank_fusion": "pipelines.retrieval.ranking",
        "route": "pipelines.retrieval.expander",
        "rule_expansion": "pipelines.retrieval.expander",
        "rule_refusal": "pipelines.retrieval.refusal_rules",
        "stop_if_personal_advice": "pipelines.retrieval.expander_run",
    },
)
