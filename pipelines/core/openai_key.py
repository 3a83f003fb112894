"""The key an OpenAI-compatible server is called with, for the answer model and embeddings."""

from __future__ import annotations

import os

from pipelines.core.errors import ConfigurationError

__all__ = ["KEYLESS", "openai_api_key"]


def openai_api_key(what: str, fix_otherwise: str) -> str | None:
    """The key for an OpenAI-compatible server: ``OPENAI_API_KEY``, or None for a server of
    one's own at ``OPENAI_BASE_URL`` (Ollama and llama.cpp's server take none; the client
    then sends a placeholder). OpenAI's own API needs one."""
    key = os.environ.get("OPENAI_API_KEY")
    if key or os.environ.get("OPENAI_BASE_URL"):
        return key or None
    raise ConfigurationError(
        f"{what} needs OPENAI_API_KEY for OpenAI's API",
        fix="set OPENAI_API_KEY, or OPENAI_BASE_URL for a server of your own (vLLM, Ollama, "
        f"a llama.cpp server: no key needed), or {fix_otherwise}",
    )


# What the client sends as its key to a server that takes none: the openai client will not
# start without one, and such servers ignore the header.
KEYLESS = "no-key-needed"
