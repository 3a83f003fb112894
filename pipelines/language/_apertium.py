"""A question in Spanish, French, Italian or Portuguese in English, by Apertium, for the search.

Apertium is a rule-based translation engine in Debian (``apertium`` and its language pairs,
GPL; decision 0037). It is not a Python dependency: where its pairs are installed a question
is translated, and where they are not it is searched without a translation. Debian has
Spanish to English; French, Italian and Portuguese go to Spanish first.

A pair is a chain of a dozen small programs. Starting them costs 0.1 to 0.5 s, so each pair's
chain is started once per process, on the first question that needs it, in null-flush mode:
every program passes its output on when it reads a NUL character, and a pair takes about 2 ms
a question. The four languages share the Spanish to English chain (its programs hold about
130 MB). Questions to one chain take turns (a lock); a chain that does not answer in time is
stopped, and the next question starts it again.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

__all__ = ["APERTIUM_CHAINS", "ApertiumTranslator", "english_translation"]

# The Debian pairs each language goes through, in order.
APERTIUM_CHAINS: dict[str, tuple[str, ...]] = {
    "es": ("spa-eng",),
    "fr": ("fr-es", "spa-eng"),
    "it": ("ita-spa", "spa-eng"),
    "pt": ("pt-es", "spa-eng"),
}
_MODES = Path("/usr/share/apertium/modes")
# Long enough for a chain's first question, which loads its dictionaries (0.5 s measured).
_TIMEOUT_S = 5.0
# Characters with a meaning in Apertium's stream format, sent escaped.
_RESERVED = frozenset("\\[]^$/<>@{}*#+~")
# What the text deformatter ends a text with: a sentence end and a blank. The bilingual stage
# waits for a blank after the last word before it passes a NUL on.
_END = ".[][\n]"


def _escaped(text: str) -> str:
    # Newlines would end the text early and NUL would flush it: a question is one line.
    plain = " ".join(text.replace("\0", " ").split())
    return "".join("\\" + c if c in _RESERVED else c for c in plain)


def _plain(stream: str) -> str:
    """Apertium's output as text: escapes undone, blanks ("[...]") dropped."""
    out: list[str] = []
    escaped = in_blank = False
    for c in stream:
        if escaped:
            if not in_blank:
                out.append(c)
            escaped = False
        elif c == "\\":
            escaped = True
        elif in_blank:
            in_blank = c != "]"
        elif c == "[":
            in_blank = True
        else:
            out.append(c)
    text = "".join(out).strip()
    return text[:-1].rstrip() if text.endswith(".") else text


class _Chain:
    """One running chain of pairs, in a process group of its own."""

    def __init__(self, command: str) -> None:
        self.process = subprocess.Popen(
            ["bash", "-c", command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.owner = os.getpid()

    def ask(self, text: str, timeout: float) -> str | None:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None
        assert stdout is not None
        stdin.write((_escaped(text) + _END).encode("utf-8") + b"\0")
        stdin.flush()
        deadline = time.monotonic() + timeout
        received = b""
        while b"\0" not in received:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([stdout], [], [], max(0.0, left))
            if not ready:
                return None
            chunk = os.read(stdout.fileno(), 65536)
            if not chunk:  # the chain ended
                return None
            received += chunk
        return _plain(received.split(b"\0", 1)[0].decode("utf-8", "replace"))

    def stop(self) -> None:
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=5)
        if self.process.stdout is not None:
            self.process.stdout.close()


class ApertiumTranslator:
    """Translates questions by the installed Apertium pairs (thread-safe)."""

    def __init__(self, modes: Path = _MODES, *, timeout: float = _TIMEOUT_S) -> None:
        self.modes = modes
        self.timeout = timeout
        # By pair: Spanish to English is one chain, shared by the four languages.
        self._chains: dict[str, _Chain] = {}
        pairs = {pair for chain in APERTIUM_CHAINS.values() for pair in chain}
        self._locks = {pair: threading.Lock() for pair in pairs}
        self._commands: dict[str, str | None] = {}

    def _command(self, pair: str) -> str | None:
        """The shell command of ``pair`` in null-flush mode, or None when the pair or
        Apertium itself is not installed."""
        if pair not in self._commands:
            self._commands[pair] = self._find_command(pair)
        return self._commands[pair]

    def _find_command(self, pair: str) -> str | None:
        tool = shutil.which("apertium-wblank-mode")
        mode = self.modes / f"{pair}.mode"
        if tool is None or not mode.is_file():
            return None
        found = subprocess.run(
            [tool, "-z", str(mode)], capture_output=True, text=True, timeout=30, check=False
        )
        if found.returncode != 0 or not found.stdout.strip():
            return None
        # The mode's two parameters: generation without unknown-word marks, and no tagger
        # option (what `apertium -u` passes).
        return found.stdout.strip().replace("$1", "-n").replace("$2", "")

    def available(self, language: str) -> bool:
        """Whether ``language`` can be translated here."""
        pairs = APERTIUM_CHAINS.get(language, ())
        return bool(pairs) and all(self._command(pair) is not None for pair in pairs)

    def translate(self, text: str, language: str) -> str | None:
        """``text`` (in ``language``) in English, or None: a language without installed
        pairs, a chain that failed or did not answer in time, or nothing left to translate."""
        if not self.available(language) or not text.strip():
            return None
        for pair in APERTIUM_CHAINS[language]:
            translated = self._ask(pair, text)
            if translated is None:
                return None
            text = translated
        return text

    def _ask(self, pair: str, text: str) -> str | None:
        command = self._command(pair)
        lock = self._locks[pair]
        if command is None or not lock.acquire(timeout=self.timeout):
            return None
        try:
            chain = self._chains.get(pair)
            if chain is None or chain.owner != os.getpid() or chain.process.poll() is not None:
                chain = self._chains[pair] = _Chain(command)
            try:
                answer = chain.ask(text, self.timeout)
            except OSError:
                answer = None
            if answer is None:
                # It may still be writing an answer that would be read as the next one's.
                del self._chains[pair]
                chain.stop()
            return answer or None
        finally:
            lock.release()

    def close(self) -> None:
        """Stop the running chains (they start again on the next question)."""
        for pair in list(self._chains):
            with self._locks[pair]:
                chain = self._chains.pop(pair, None)
                if chain is not None and chain.owner == os.getpid():
                    chain.stop()


_translator: ApertiumTranslator | None = None
_translator_lock = threading.Lock()


def english_translation(text: str, language: str) -> str | None:
    """``text`` in English by this process's :class:`ApertiumTranslator`, or None where
    ``language`` cannot be translated here (see the class)."""
    global _translator
    with _translator_lock:
        if _translator is None:
            _translator = ApertiumTranslator()
            atexit.register(_translator.close)
    return _translator.translate(text, language)
