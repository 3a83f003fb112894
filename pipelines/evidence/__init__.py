"""Evidence for each citation: which sentence of the answer cites which source, and whether the
source backs it.

- ``claims``: an answer's (sentence, citation) claims (:func:`claims_of`), the
  :class:`Verdict` on each, the evidence items a ``done`` event carries and the markers of
  unsupported citations removed when the settings say so;
- ``judges``: who rules on a claim: the offline judge over the cited passage's stored
  sentences (:class:`OfflineJudge`), or a model over its quotes (:class:`ModelJudge`), as
  ``evidence_judge`` names (:func:`make_judge`).

It sits between the answer (``pipelines.answering``, whose model the judge may share the
settings of) and the events (``callbacks``, which carry the verdicts); decisions 0028 and 0038.
"""

from typing import TYPE_CHECKING

from pipelines.core.lazy import lazy_attributes

# Imported on first use: the judges bring the models, while a reader of logs wants only the
# claims' model (the command line starts at once).
if TYPE_CHECKING:
    from pipelines.evidence.claims import Claim, Verdict, claims_of
    from pipelines.evidence.judges import (
        EvidenceJudge,
        ModelJudge,
        OfflineJudge,
        judge_key,
        make_judge,
    )

__all__ = [
    "Claim",
    "EvidenceJudge",
    "ModelJudge",
    "OfflineJudge",
    "Verdict",
    "claims_of",
    "judge_key",
    "make_judge",
]

__getattr__ = lazy_attributes(
    __name__,
    {
        "Claim": "pipelines.evidence.claims",
        "EvidenceJudge": "pipelines.evidence.judges",
        "ModelJudge": "pipelines.evidence.judges",
        "OfflineJudge": "pipelines.evidence.judges",
        "Verdict": "pipelines.evidence.claims",
        "claims_of": "pipelines.evidence.claims",
        "judge_key": "pipelines.evidence.judges",
        "make_judge": "pipelines.evidence.judges",
    },
)
