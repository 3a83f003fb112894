"""How a serving process's garbage collector is set while an app of ours serves (issue 41,
decision 0043).

Once the models, libraries and indexes are loaded they live as long as the process, yet each
full collection walked them all: 120 to 220 ms, about once a second at 200 streams, during
which every stream on the worker stalled. Frozen (:func:`gc.freeze`), they are out of the
collector's sight; a full collection walks what requests made since. A larger youngest
generation lets a token's short-lived objects die before a collection, rather than be
promoted by one.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["YOUNG_THRESHOLD", "refreeze", "serving_heap"]

# Allocations between collections of the youngest generation (Python's default is 700).
YOUNG_THRESHOLD = 10_000

# Apps serving in this process (a test session, or an app that mounts ours, may run several):
# the first to start sets the collector, the last to stop puts it back.
_lock = threading.Lock()
_serving = 0
_before: tuple[int, int, int] | None = None
_frozen_by_us = False


@contextlib.contextmanager
def serving_heap(young: int = YOUNG_THRESHOLD) -> Iterator[None]:
    """While inside: what the process holds on entry frozen (after a collection, so that no
    garbage is frozen with it), and the youngest generation's threshold at least ``young``.
    When the last app inside leaves, both are undone: the thresholds as they were, and the
    freeze lifted unless the process had frozen objects of its own before (a host that
    freezes before forking its workers keeps its freeze)."""
    global _serving, _before, _frozen_by_us
    with _lock:
        _serving += 1
        if _serving == 1:
            _before = gc.get_threshold()
            _frozen_by_us = gc.get_freeze_count() == 0
            gc.collect()
            gc.freeze()
            gc.set_threshold(max(_before[0], young), *_before[1:])
    try:
        yield
    finally:
        with _lock:
            _serving -= 1
            if _serving == 0 and _before is not None:
                gc.set_threshold(*_before)
                if _frozen_by_us:
                    gc.unfreeze()
                _before = None


def refreeze() -> None:
    """Let the collector see what was frozen again, collect, and freeze what is left: after
    an ingest made other collection versions live, the indexes of the replaced ones may be
    held in reference cycles that only a collection frees. One full collection (a pause of a
    few hundred milliseconds at most) per change of versions. Nothing while no app serves."""
    with _lock:
        if _serving and _frozen_by_us:
            gc.unfreeze()
            gc.collect()
            gc.freeze()
