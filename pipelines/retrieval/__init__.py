"""From a question to ranked sources: the refusal rules applied before any search
(``refusal_rules``), the personal-advice gate (``advice``), the query expander and router
(``expander``) and the retriever that searches, fuses and gates (``retriever``): it runs the
expander as a child run (``expander_run``), searches the versions it keeps live
(``active_versions``), orders what it found with pure arithmetic (``ranking``) and records
which candidates it considered and what became of each (``retrieval_record``).
"""

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
from pipelines.retrieval.retrieval_record import OUTCOMES, RECORD_BOUND, retrieval_record
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
    "ChunkOutcome",
    "Expansion",
    "RankedSources",
    "Ranking",
    "ReactomeRetriever",
    "ReadWriteGate",
    "Refusal",
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
