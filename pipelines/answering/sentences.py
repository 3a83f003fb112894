"""The sentence splitter, under the name the answering layer has always used.

It lives in :mod:`pipelines.index.sentences` since ingestion stores each chunk's sentences
with the chunk table (issue 27): edit it there. Every name is the same object.
"""

from __future__ import annotations

from pipelines.index.sentences import (
    MAX_UNIT,
    Segmented,
    answerlike,
    clean_sentence,
    has_words,
    is_fragment,
    points_back,
    quotable_units,
    segment,
    sentence_spans,
    split_paragraphs,
    split_sentences,
    strip_literature,
    without_surrogates,
)

__all__ = [
    "MAX_UNIT",
    "Segmented",
    "answerlike",
    "clean_sentence",
    "has_words",
    "is_fragment",
    "points_back",
    "quotable_units",
    "segment",
    "sentence_spans",
    "split_paragraphs",
    "split_sentences",
    "strip_literature",
    "without_surrogates",
]
