"""What the offline embedding models share: one single-threaded onnxruntime session per
worker, each embedding every n-th text of a call (decision 0009), and unit-length pooling."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["ShareRunner", "single_threaded_sessions", "unit_vector"]

_Matrix = np.ndarray[Any, np.dtype[np.float32]]


def single_threaded_sessions(model: Path, count: int) -> list[Any]:
    """``count`` sessions of the ONNX file ``model``, each on one thread. InferenceSession.run
    may be called from several threads at once; one session per worker only so that each
    worker has a core's worth of work of its own."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return [
        onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        for _ in range(count)
    ]


def unit_vector(vector: Any) -> _Matrix:
    """``vector`` scaled to length 1, as float32."""
    result: _Matrix = (vector / max(float(np.linalg.norm(vector)), 1e-12)).astype(np.float32)
    return result


class ShareRunner:
    """Runs one call's texts over the sessions, each taking every n-th text, in threads of
    its own (started on first need; named ``name``)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def run(
        self,
        sessions: Sequence[Any],
        tokens: Sequence[Sequence[int]],
        embed_one: Callable[[Any, Sequence[int]], _Matrix],
        dimensions: int,
    ) -> _Matrix:
        """One row per text of ``tokens``: ``embed_one(session, its tokens)``."""
        vectors: _Matrix = np.empty((len(tokens), dimensions), dtype=np.float32)

        def one(session: Any, index: int) -> None:
            vectors[index] = embed_one(session, tokens[index])

        self.each(sessions, [len(row) for row in tokens], one)
        return vectors

    def each(
        self, sessions: Sequence[Any], sizes: Sequence[int], work: Callable[[Any, int], None]
    ) -> None:
        """``work(session, index)`` for every index of ``sizes`` (each item's size), the
        items shared out over the sessions."""
        if not sizes:
            return
        # Sorted by size, so every worker's share is alike.
        order = sorted(range(len(sizes)), key=lambda index: sizes[index])
        used = min(len(sessions), len(order))
        shares = [order[worker::used] for worker in range(used)]

        def run_share(session: Any, share: list[int]) -> None:
            for index in share:
                work(session, index)

        if used == 1:
            run_share(sessions[0], shares[0])
            return
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(len(sessions), self._name)
        jobs = [
            self._pool.submit(run_share, sessions[worker], share)
            for worker, share in enumerate(shares)
        ]
        for job in jobs:
            job.result()
