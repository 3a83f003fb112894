"""Which evidence item backs each marker of an answer, read the server's way, for the web
client's tests: the item with the marker's number and the sentence that owns its cluster."""

from __future__ import annotations

import json
import re
from typing import Any

from callbacks.events import DoneData
from pipelines.citations.finalize import _clusters, _number
from pipelines.evidence.claims import cited_sentences


def owned_evidence(done: DoneData) -> list[tuple[str, dict[str, Any] | None]]:
    """Each marker number of ``done.text`` in reading order (its digits, as the page shows
    them), with done's evidence item for it as JSON, or None (a number no sentence owns, one
    beyond the references, or a pair nothing judged)."""
    text, count = done.text, len(done.references)
    owner = {
        k: sentence.span for sentence in cited_sentences(text, count) for k in sentence.clusters
    }
    items = {
        (item.n, tuple(item.sentence)): json.loads(item.model_dump_json()) for item in done.evidence
    }
    found: list[tuple[str, dict[str, Any] | None]] = []
    for k, cluster in enumerate(_clusters(text)):
        for group in cluster.groups:
            for digits in re.findall(r"[0-9]+", text[group.start : group.end]):
                n = _number(digits)
                owned = k in owner and 1 <= n <= count
                found.append((digits, items.get((n, owner[k])) if owned else None))
    return found
