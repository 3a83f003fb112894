"""How a serving process's garbage collector is set while the app serves (issue 41,
decision 0043).

Once the models, libraries and indexes are loaded they live as long as the process, yet each
full collection walked them all: 120 to 220 ms, about once a second at 200 streams, during
which every stream on the worker stalled, and a quarter of the CPU per token event. Frozen
(:func:`gc.freeze`), they are out of the collector's sight; a full collection walks what
requests made since. A larger youngest generation lets a token's short-lived objects die
before a collection, rather than be promoted by one.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["YOUNG_THRESHOLD", "serving_heap"]

# Allocations between collections of the youngest generation (Python's default is 700).
YOUNG_THRESHOLD = 10_000


@contextlib.contextmanager
def serving_heap(young: int = YOUNG_THRESHOLD) -> Iterator[None]:
    """While inside: what the process holds on entry frozen (after a collection, so that no
    garbage is frozen with it), and the youngest generation's threshold at least ``young``.
    On exit both are undone, so that a process that goes on (a test session, an app that
    mounts ours) collects as before."""
    gc.collect()
    gc.freeze()
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], young), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()
