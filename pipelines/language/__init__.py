"""The language a question is asked in, and the fixed texts a user reads in it.

- :func:`detect_language`: the language of a question, offline, as a BCP 47 primary tag in
  :data:`SUPPORTED_LANGUAGES`, "en" when unsure (``_detector``, ``_letters``).
- :func:`normalize_language`: a request's ``language`` value ("es-MX", "pt-BR", "zh-Hans") as
  a supported primary tag, or None for the caller to refuse, naming the supported ones
  (``_tags``).
- :func:`english_gloss`: a Chinese or Japanese question's words in English, from a
  dictionary, for the keyword search (``_glossary``, decision 0037).
- :func:`english_translation`: a Spanish, French, Italian or Portuguese question in English,
  by Apertium where its Debian pairs are installed (``_apertium``, decision 0037).
- :func:`fixed_text`: a refusal, "nothing found" or heading in a language, from
  ``texts/<tag>.yaml``, English standing in for what is not translated (``_texts``).

Decision 0035 records the detectors measured and why this one.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from pipelines.language._letters import MIN_LETTERS
from pipelines.language._tags import DEFAULT_LANGUAGE, SUPPORTED_LANGUAGES, normalize_language

if TYPE_CHECKING:
    from pipelines.language._apertium import (
        APERTIUM_CHAINS,
        ApertiumTranslator,
        english_translation,
    )
    from pipelines.language._detector import MIN_CONFIDENCE, detect_language
    from pipelines.language._glossary import english_gloss
    from pipelines.language._texts import fixed_text

__all__ = [
    "APERTIUM_CHAINS",
    "DEFAULT_LANGUAGE",
    "MIN_CONFIDENCE",
    "MIN_LETTERS",
    "SUPPORTED_LANGUAGES",
    "ApertiumTranslator",
    "detect_language",
    "english_gloss",
    "english_translation",
    "fixed_text",
    "normalize_language",
]

# Imported on first use: the detector's model, the dictionary and the texts load numpy and
# YAML, which a command that only reads its arguments or a log never needs. (The same as
# pipelines.core.lazy, which this lowest layer cannot import.)
_LAZY = {
    "APERTIUM_CHAINS": "_apertium",
    "ApertiumTranslator": "_apertium",
    "english_translation": "_apertium",
    "MIN_CONFIDENCE": "_detector",
    "detect_language": "_detector",
    "english_gloss": "_glossary",
    "fixed_text": "_texts",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
