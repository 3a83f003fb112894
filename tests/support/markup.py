"""Alphabets for property tests of marker handling: text made of what markers, code spans and
links are built from, so that generated strings hit the interesting cases often."""

from __future__ import annotations

from hypothesis import strategies as st

__all__ = ["ANY_MARKUP", "MARKDOWN_PIECES"]

ANY_MARKUP = st.sampled_from(list("[]()`~,-\u20130123456789 \n\tab.:"))
MARKDOWN_PIECES = ["`", "``", "\\`", " ", "~", "[", "]", "1", "2", ",", "a", "\n"]
