"""From a question to ranked sources: the refusal rules applied before any search
(``refusal_rules``), the personal-advice gate (``advice``), the query expander and router
(``expander``) and the retriever that searches, fuses and gates (``retriever``).
"""

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
from pipelines.retrieval.refusal_rules import ADVICE_REFUSAL, Refusal, rule_refusal
from pipelines.retrieval.retriever import (
    EXPANSION,
    EXPANSION_FALLBACK,
    RANKINGS,
    Ranking,
    ReactomeRetriever,
)

__all__ = [
    "ADVICE_REFUSAL",
    "EXPANSION",
    "EXPANSION_FALLBACK",
    "MARGIN",
    "RANKINGS",
    "STOPWORDS",
    "THRESHOLD",
    "WEBSITE_THRESHOLD",
    "AdviceExample",
    "AdviceGate",
    "AdviceVerdict",
    "Expansion",
    "Ranking",
    "ReactomeRetriever",
    "Refusal",
    "RuleExpanderModel",
    "expander_messages",
    "leave_one_out",
    "load_examples",
    "parse_expansion",
    "route",
    "rule_expansion",
    "rule_refusal",
]
