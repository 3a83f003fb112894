"""Generated answers whose markers we know by construction: prose that holds no bracket,
backtick or "(", and marker groups (numbers, ranges, out-of-range and huge numbers) between
it, so that a test can read every marker back with a plain regex."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

__all__ = ["Group", "answers", "groups", "render"]

# Prose never contains brackets, backticks or "(" so that every bracket in a generated answer
# is one of our markers.
_PROSE_ALPHABET = st.sampled_from(list("abcXYZ019 \t\n.,;:!?)-é"))


@dataclass(frozen=True)
class Group:
    items: tuple[tuple[int, int], ...]
    text: str


@st.composite
def groups(draw: st.DrawFn, n_sources: int) -> Group:
    number = st.one_of(st.integers(0, n_sources + 3), st.integers(10**12, 10**30))
    items = []
    rendered = []
    for _ in range(draw(st.integers(1, 4))):
        low = draw(number)
        if draw(st.booleans()):
            high = low + draw(st.integers(0, 3))
            dash = draw(st.sampled_from(["-", "\u2013", " - "]))
            rendered.append(f"{low}{dash}{high}")
        else:
            high = low
            rendered.append(str(low))
        items.append((low, high))
    separator = draw(st.sampled_from([",", ", ", " , "]))
    return Group(tuple(items), "[" + separator.join(rendered) + "]")


@st.composite
def answers(draw: st.DrawFn) -> tuple[int, list[str | Group]]:
    """A number of sources and the answer's segments: prose and marker groups."""
    n_sources = draw(st.integers(0, 12))
    # A group followed by ":" at a line start is a link reference definition, not a marker.
    prose = st.text(_PROSE_ALPHABET, min_size=1, max_size=12).filter(lambda s: s[0] != ":")
    segments = draw(st.lists(st.one_of(prose, groups(n_sources)), max_size=25))
    return n_sources, segments


def render(segments: list[str | Group]) -> str:
    """The answer as the model would write it."""
    return "".join(s if isinstance(s, str) else s.text for s in segments)
