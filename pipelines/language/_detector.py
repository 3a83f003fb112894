"""The language a question is written in, offline, with English when that is unsure.

The detector is py3langid's naive Bayes model over byte n-grams (decision 0035 compares it with
lingua, fastText's compressed model and CLD2 on tests/language_samples.yaml), restricted to
the supported languages. It is loaded on the first detection, once per process: under a second
and about 53 MiB that a process which never detects a language does not pay.
"""

from __future__ import annotations

import functools
import threading

import numpy as np
from py3langid.langid import MODEL_FILE, LanguageIdentifier

from pipelines.language._letters import MIN_LETTERS, letter_count, without_identifiers
from pipelines.language._tags import DEFAULT_LANGUAGE, SUPPORTED_LANGUAGES

__all__ = ["MIN_CONFIDENCE", "detect_language"]

# Below this confidence the detector is choosing between near-equals (one in eight is
# chance), and English, the language of the sources and of most questions, is the better
# guess. On the labeled questions every threshold from 0.23 to 0.31 gives the most right
# answers (245 of 256); 0.3, near the top, also sends terse questions of international words
# ("glucose", "TP53 mutation") to English rather than to Italian or German (decision 0035).
MIN_CONFIDENCE = 0.3
# A question's language shows in its first sentences; the rest would only cost time (the
# detector and the patterns before it are linear, but a question can be long).
_READ_CHARS = 1000

_lock = threading.Lock()
_identifier: LanguageIdentifier | None = None


def _load() -> LanguageIdentifier:
    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(list(SUPPORTED_LANGUAGES))
    # set_languages keeps the full model (all 97 languages, 27 MiB of float16) to allow a
    # later reset, which this process never makes: an identifier built from the restricted
    # tables alone keeps 2 MiB of them. Row-contiguous, as the scorer reads them by row.
    return LanguageIdentifier(
        np.ascontiguousarray(identifier.nb_ptc),
        identifier.nb_pc,
        identifier.nb_classes,
        identifier.tk_nextmove,
        identifier.tk_output,
        norm_probs=True,
        tk_row=identifier.tk_row,
    )


def _model() -> LanguageIdentifier:
    global _identifier
    # Checked again under the lock: two requests arriving together load it once.
    if _identifier is None:
        with _lock:
            if _identifier is None:
                _identifier = _load()
    return _identifier


def detect_language(text: str, unsure: str = DEFAULT_LANGUAGE) -> str:
    """The BCP 47 primary tag of the language ``text`` is written in, one of
    :data:`SUPPORTED_LANGUAGES`; "en" when unsure: fewer than :data:`MIN_LETTERS` letters
    once identifiers, gene symbols and URLs are set aside ("What does TP53 do?" has enough,
    "TP53 R-HSA-69488?" none), or a confidence below :data:`MIN_CONFIDENCE`.

    Japanese written wholly in kanji, with no kana ("遺伝子発現調節"), reads as Chinese: the
    characters are shared. Safe to call from any thread.

    ``unsure``: what to return instead of "en" when unsure (a follow-up of symbols alone,
    "¿Y TP53?", keeps the conversation's language)."""
    language = _detected(text[:_READ_CHARS])
    return unsure if language is None else language


# A request reads its question's language in several places (the gate, the routing, the
# search, the answer prompt): it is worked out once.
@functools.lru_cache(maxsize=1024)
def _detected(text: str) -> str | None:
    words = without_identifiers(text)
    if letter_count(words) < MIN_LETTERS:
        return None
    language, confidence = _model().classify(words)
    if confidence < MIN_CONFIDENCE:
        return None
    return str(language)
