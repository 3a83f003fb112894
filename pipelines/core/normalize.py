"""Questions put in one canonical form before any rule reads them or any search runs.

Text that looks the same must be decided the same: a zero-width space or a soft hyphen inside
"should", a Cyrillic "o" in "stop", or full-width letters would otherwise slip past the rules
in :mod:`pipelines.retrieval.refusal_rules` and miss the keyword index. So every question is:

1. NFKC-normalized (full-width and compatibility forms become their plain letters);
2. stripped of invisible format characters (Unicode category Cf: zero-width spaces and
   joiners, soft hyphens, word joiners, byte-order marks, bidirectional controls);
3. a word written in Latin letters and Cyrillic or Greek letters drawn like Latin ones has
   those replaced by the Latin letters; so has a word wholly of look-alikes (a Cyrillic "I")
   in a question whose letters are mostly in Latin words. A word with any other letter is
   left as it is. Greek letters biology writes on purpose (alpha, beta, gamma, kappa...) are
   not look-alikes here; a question written in Cyrillic or Greek keeps its letters.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["normalize_question"]

# Cyrillic and Greek letters drawn exactly like a Latin letter, as pairs (look-alike, Latin);
# written as escapes because in source they cannot be told from the Latin ones.
_PAIRS = (
    # Cyrillic, lower case
    "\u0430a\u0441c\u0501d\u0435e\u04bbh\u0456i\u0458j\u04cfl"
    "\u043eo\u0440p\u051bq\u0455s\u051dw\u0445x\u0443y"
    # Cyrillic, upper case
    "\u0410A\u0412B\u0421C\u0415E\u041dH\u0406I\u0408J\u041aK"
    "\u041cM\u041eO\u0420P\u051aQ\u0405S\u0422T\u051cW\u0425X"
    "\u04aeY"
    # Greek capitals and small omicron
    "\u0391A\u0392B\u0395E\u0396Z\u0397H\u0399I\u039aK\u039cM"
    "\u039dN\u039fO\u03a1P\u03a4T\u03a5Y\u03a7X\u03bfo"
)
_LOOK_ALIKES = str.maketrans({_PAIRS[i]: _PAIRS[i + 1] for i in range(0, len(_PAIRS), 2)})
_WORD = re.compile(r"[^\W\d_]+")


def _is_latin(character: str) -> bool:
    return character.isascii() or unicodedata.name(character, "").startswith("LATIN")


def normalize_question(question: str) -> str:
    """``question`` in canonical form (see the module docstring); idempotent."""
    text = unicodedata.normalize("NFKC", question)
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    words = _WORD.findall(text)
    latin_words = {word for word in words if any(_is_latin(c) for c in word)}
    # Mostly Latin: most letters are in words that have a Latin letter, so a word spelled
    # wholly in look-alikes (a Cyrillic "I") among them is one too.
    mostly_latin = sum(len(w) for w in words if w in latin_words) * 2 > sum(map(len, words))

    def mapped(word: re.Match[str]) -> str:
        found = word.group()
        latin = found.translate(_LOOK_ALIKES)
        if (mostly_latin or found in latin_words) and all(_is_latin(c) for c in latin):
            return latin
        return found

    return _WORD.sub(mapped, text)
