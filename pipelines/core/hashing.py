"""Short content hashes over several strings."""

from __future__ import annotations

import hashlib

__all__ = ["joined_digest"]


def joined_digest(*parts: str, algorithm: str, chars: int) -> str:
    """The first ``chars`` hex digits of ``algorithm`` over ``parts`` joined by the unit
    separator (so ``("ab", "c")`` and ``("a", "bc")`` differ)."""
    return hashlib.new(algorithm, "\x1f".join(parts).encode()).hexdigest()[:chars]
