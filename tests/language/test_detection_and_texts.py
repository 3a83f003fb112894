"""The language of a question and the fixed texts in it (pipelines/language, decision 0035).

The accuracy bars are counts on tests/language_samples.yaml, read from the measurement in
decision 0035 (``python -m tests.benchmarks.language_detectors``); the detector is
deterministic, so the counts are exact for a given model. Every ordinary question is detected
(112 of 112 measured: a whole question is never misread). Of the 18 hard ones per language
(identifiers around one or two words, two- and three-word questions, Spanish beside
Portuguese, kanji-only Japanese, terse terms), at least 14: the worst language measured,
Japanese, has 15 (its three kanji-only noun phrases read as Chinese), so one question of slack
lets a model update trade one terse question for another and still fails a real regression.
"""

from __future__ import annotations

import re
import string
import threading
import time
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.links import sources_markdown
from callbacks.events import Reference
from pipelines.answering.extractive import NOTHING_RELEVANT
from pipelines.catalog.catalog import load_catalog
from pipelines.language import (
    DEFAULT_LANGUAGE,
    SUPPORTED_LANGUAGES,
    ApertiumTranslator,
    _detector,
    _texts,
    detect_language,
    english_gloss,
    fixed_text,
    normalize_language,
)
from pipelines.language._letters import letter_count, without_identifiers
from pipelines.retrieval.refusal_rules import ADVICE_REFUSAL, question_too_long, rule_refusal

SAMPLES = yaml.safe_load(
    (Path(__file__).parents[1] / "language_samples.yaml").read_text(encoding="utf-8")
)
HARD_BAR = 14


def _misses(language: str, group: str) -> list[str]:
    questions = SAMPLES["languages"][language][group]
    return [f"{q!r} -> {detect_language(q)}" for q in questions if detect_language(q) != language]


# --- detection ------------------------------------------------------------------------------


def test_the_samples_cover_every_supported_language_alike() -> None:
    assert tuple(SAMPLES["languages"]) == SUPPORTED_LANGUAGES
    for groups in SAMPLES["languages"].values():
        assert len(groups["ordinary"]) == 14
        assert len(groups["hard"]) == 18


@pytest.mark.parametrize("language", SUPPORTED_LANGUAGES)
def test_every_ordinary_question_is_detected(language: str) -> None:
    assert _misses(language, "ordinary") == []


@pytest.mark.parametrize("language", SUPPORTED_LANGUAGES)
def test_hard_questions_are_detected_above_the_measured_bar(language: str) -> None:
    misses = _misses(language, "hard")
    assert len(SAMPLES["languages"][language]["hard"]) - len(misses) >= HARD_BAR, misses


@pytest.mark.parametrize("question", SAMPLES["identifiers_only"])
def test_a_question_of_identifiers_alone_is_english(question: str) -> None:
    assert detect_language(question) == "en"


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What does TP53 do in R-HSA-69488?", "en"),
        ("¿Qué es la glucólisis?", "es"),
        ("O que significa IDH1 R132H?", "pt"),
        ("Wie reguliert der mTOR-Signalweg das Zellwachstum?", "de"),
        ("TP53在R-HSA-69488中起什么作用", "zh"),
        ("BRCA1の機能は", "ja"),
        # Two kana are a question ("why"): a CJK character counts two letters.
        ("なぜ", "ja"),
        # Nothing to read: English.
        ("", "en"),
        ("   \n", "en"),
        ("???", "en"),
        ("ok", "en"),
        # A low confidence: English rather than a guess between near-equals.
        ("glucose", "en"),
        ("TP53 mutation", "en"),
    ],
)
def test_examples(question: str, expected: str) -> None:
    assert detect_language(question) == expected


def test_only_the_start_of_a_long_question_is_read() -> None:
    english = "Which enzymes take part in cholesterol synthesis in the liver? " * 20
    spanish = "¿Qué enzimas participan en la síntesis del colesterol en el hígado? " * 200
    assert len(english) > 1000
    assert detect_language(english + spanish) == "en"
    assert detect_language(spanish + english) == "es"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("What does TP53 do in R-HSA-69488?", "What does do in ?"),
        (
            "Wie reguliert der mTOR-Signalweg das Zellwachstum?",
            "Wie reguliert der Signalweg das Zellwachstum?",
        ),
        ("Wo ist der Download-Knopf?", "Wo ist der Download Knopf?"),
        ("ABCA1-Mangel?", "Mangel?"),
        ("hsa-miR-21-5p CHEBI:15422 GO:0006915", ""),
        ("See https://reactome.org/content/detail/R-HSA-109581 now", "See now"),
        ("PI3K/AKT/mTOR", ""),
        ("TP53在R-HSA-69488中", "在 中"),
        ("Qu'est-ce que l'ADN ?", "Qu'est ce que ?"),
    ],
)
def test_identifiers_are_set_aside(text: str, words: str) -> None:
    assert without_identifiers(text) == words


def test_letters_count_chinese_and_japanese_characters_double() -> None:
    assert letter_count("Role of ?") == 6
    assert letter_count("的作用") == 6
    assert letter_count("TNF-β") == 4


def test_the_model_is_loaded_once_by_threads_that_ask_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loads: list[int] = []
    real_load = _detector._load

    def counted_load() -> Any:
        loads.append(1)
        time.sleep(0.05)  # widen the window in which a second load could start
        return real_load()

    monkeypatch.setattr(_detector, "_identifier", None)
    monkeypatch.setattr(_detector, "_load", counted_load)
    _detector._detected.cache_clear()  # a question read before is not read again
    start = threading.Barrier(6)
    found: list[str] = []

    def ask() -> None:
        start.wait()
        found.append(detect_language("¿Qué enzimas participan en la síntesis del colesterol?"))

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert loads == [1]
    assert found == ["es"] * 6


def _cpu_seconds(work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(3):
        begun = time.process_time()
        work()
        best = min(best, time.process_time() - begun)
    return best


@pytest.mark.parametrize(
    "unit",
    ["a" + "-" * 50 + " ", "a-", "x", "A1", "https://" + "a" * 50 + " ", "mTOR-", "é'"],
)
def test_setting_identifiers_aside_is_linear(unit: str) -> None:
    # As tests/core/test_linear_time.py measures: 8x the text costs about 8x the time when
    # linear, 64x when quadratic.
    small = unit * (20_000 // len(unit))
    large = small * 8
    ratio = _cpu_seconds(lambda: without_identifiers(large)) / max(
        _cpu_seconds(lambda: without_identifiers(small)), 1e-4
    )
    assert ratio < 24


# --- language tags --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("es", "es"),
        ("ES", "es"),
        ("es-MX", "es"),
        ("es-419", "es"),
        ("pt-BR", "pt"),
        ("pt_BR", "pt"),
        ("zh-Hans", "zh"),
        ("zh-Hans-CN", "zh"),
        ("zh-Hant", "zh"),
        ("ja-JP", "ja"),
        (" en-GB ", "en"),
        ("de-CH-1996", "de"),
        ("fr", "fr"),
        ("it-IT", "it"),
        ("nl", None),
        ("nl-BE", None),
        ("", None),
        ("english", None),
        ("e", None),
        ("en-", None),
        ("es,en;q=0.9", None),
        ("x-klingon", None),
    ],
)
def test_normalize_language(tag: str, expected: str | None) -> None:
    assert normalize_language(tag) == expected


# --- fixed texts ----------------------------------------------------------------------------


def _file(language: str) -> dict[str, str]:
    folder = resources.files("pipelines.language") / "texts"
    loaded: dict[str, str] = yaml.safe_load((folder / f"{language}.yaml").read_text("utf-8"))
    return loaded


def _fields(template: str) -> set[tuple[str, str, str | None]]:
    """Each placeholder with its format spec and conversion: "{n}" and "{n!r}" differ."""
    return {
        (field, spec or "", conversion)
        for _, field, spec, conversion in string.Formatter().parse(template)
        if field is not None
    }


def test_there_is_one_text_file_per_supported_language() -> None:
    folder = resources.files("pipelines.language") / "texts"
    files = sorted(entry.name for entry in folder.iterdir() if entry.name.endswith(".yaml"))
    assert files == sorted(f"{language}.yaml" for language in SUPPORTED_LANGUAGES)


@pytest.mark.parametrize("language", SUPPORTED_LANGUAGES)
def test_each_language_has_the_english_keys_and_placeholders(language: str) -> None:
    english, texts = _file("en"), _file(language)
    assert list(texts) == list(english)
    for key, text in texts.items():
        assert isinstance(text, str), key
        assert _fields(text) == _fields(english[key]), key
        # Every text is written out, but the English note that sources are in English.
        assert text.strip() or (language == "en" and key == "quoted_in_english"), key


def test_english_copies_the_wording_the_code_uses_today() -> None:
    # Until the code reads these texts, the two must not drift apart.
    assert fixed_text("advice_refusal", "en") == ADVICE_REFUSAL
    empty, not_text = rule_refusal("  ", 100), rule_refusal("a\x01b", 100)
    assert empty is not None
    assert not_text is not None
    assert fixed_text("empty_question", "en") == empty.text
    assert fixed_text("not_text", "en") == not_text.text
    assert fixed_text("too_long", "en", chars="1,234", max_chars="1,000") == question_too_long(
        "x" * 1234, 1000
    )
    assert fixed_text("nothing_relevant", "en") == NOTHING_RELEVANT
    catalog = load_catalog()
    labels = [definition.label for definition in catalog]
    joined = labels[0]
    if len(labels) > 1:
        first = fixed_text("list_separator", "en").join(labels[:-1])
        joined = fixed_text("list_or", "en", first=first, last=labels[-1])
    assert fixed_text("nothing_found", "en", collections=joined) == catalog.nothing_found()
    reference = Reference(n=1, source_n=1, st_id="R-HSA-1", display_name="X", collection="c")
    heading = sources_markdown([reference]).split("\n")[2]
    assert heading == fixed_text("sources_heading", "en")
    assert fixed_text("quoted_in_english", "en") == ""


def test_a_text_is_given_in_the_language_asked_by_any_tag() -> None:
    assert fixed_text("sources_heading", "es") == "Fuentes:"
    assert fixed_text("sources_heading", "pt-BR") == "Fontes:"
    assert fixed_text("sources_heading", "zh-Hans") == _file("zh")["sources_heading"]
    assert fixed_text("list_or", "de", first="A, B", last="C") == "A, B oder C"


@pytest.mark.parametrize("language", ["nl", "xx-YY", "", "klingon"])
def test_an_unsupported_language_falls_back_to_english(language: str) -> None:
    assert fixed_text("advice_refusal", language) == ADVICE_REFUSAL


def test_a_key_a_language_lacks_or_leaves_empty_falls_back_to_english(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = _texts._texts

    def partial(language: str) -> Any:
        if language == "es":
            return {"advice_refusal": ""}
        return real(language)

    monkeypatch.setattr(_texts, "_texts", partial)
    assert fixed_text("advice_refusal", "es") == ADVICE_REFUSAL
    assert fixed_text("sources_heading", "es") == "Sources:"


def test_an_unknown_key_or_a_missing_field_is_an_error() -> None:
    with pytest.raises(KeyError, match="no fixed text 'advise_refusal'"):
        fixed_text("advise_refusal", "en")
    with pytest.raises(KeyError, match="needs chars, max_chars"):
        fixed_text("too_long", "fr")


def test_the_default_language_is_english() -> None:
    assert DEFAULT_LANGUAGE == "en" == SUPPORTED_LANGUAGES[0]


# --- the English of a Chinese or Japanese question's words ---------------------------------


@pytest.mark.parametrize(
    ("question", "words"),
    [
        # the words a keyword search needs, whole, with the symbols and variants as written
        ("白喉毒素如何阻断蛋白质合成？", ["diphtheria", "toxin", "protein"]),  # noqa: RUF001
        ("尿素循环", ["urea", "cycle"]),
        ("ABCA1在胆固醇外流中的作用", ["ABCA1", "cholesterol", "outflow"]),
        ("BRAF V600E 是如何驱动黑色素瘤的", ["BRAF", "V600E", "melanin"]),
        # Japanese kanji compounds, through the dictionary's traditional forms too
        ("尿素回路を動かす酵素", ["urea", "enzyme"]),
        ("血友病と甲状腺ホルモン", ["hemophilia", "thyroid"]),
    ],
)
def test_a_han_character_questions_words_are_given_in_english(
    question: str, words: list[str]
) -> None:
    gloss = english_gloss(question).split()
    assert set(words) <= set(gloss), gloss
    # in the question's order
    assert sorted(words, key=gloss.index) == words


@pytest.mark.parametrize(
    "question",
    [
        "What does ABCA1 do?",
        "¿Qué causa la enfermedad de Tangier?",  # Latin letters only: nothing to look up
        "タンパク質",  # katakana loanwords are left alone (and 質 alone is one character)
        "",
    ],
)
def test_a_question_without_han_words_in_the_dictionary_gets_nothing_of_its_own(
    question: str,
) -> None:
    gloss = english_gloss(question)
    assert not set(gloss.split()) - set(question.replace("?", " ").split())
    assert english_gloss("What does ABCA1 do?") == ""


def test_the_dictionary_is_loaded_once_by_threads_that_ask_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pipelines.language import _glossary

    loads: list[int] = []
    real = _glossary._load

    def counted() -> dict[str, str]:
        loads.append(1)
        return real()

    monkeypatch.setattr(_glossary, "_table", None)
    monkeypatch.setattr(_glossary, "_load", counted)
    results: list[str] = []
    threads = [
        threading.Thread(target=lambda: results.append(english_gloss("尿素循环"))) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert results == [english_gloss("尿素循环")] * 4
    assert "urea" in results[0]
    assert loads == [1]


# --- a question in English by Apertium --------------------------------------------------------


def _words(text: str) -> list[str]:
    return [w for w in re.split(r"[\s,;?¿!¡]+", text) if w]


@pytest.fixture
def translator() -> Iterator[ApertiumTranslator]:
    found = ApertiumTranslator()
    yield found
    found.close()


class _Echo(ApertiumTranslator):
    """A chain that sends back what it is given (``cat``), or never answers (``sleep``)."""

    def __init__(self, command: str, timeout: float = 10.0) -> None:
        super().__init__(timeout=timeout)
        self.command = command
        self.started = 0

    def _find_command(self, pair: str) -> str | None:
        self.started += 1
        return self.command


@pytest.mark.parametrize(
    ("language", "question", "words"),
    [
        ("es", "¿Qué causa la enfermedad de Tangier y qué hace ABCA1?", ["illness", "ABCA1"]),
        ("fr", "Quelle petite molécule active la carbamoyl phosphate synthétase I ?", ["small"]),
        ("it", "Quali due proteine sono mutate nella malattia di Lafora?", ["proteins", "two"]),
        ("pt", "Por que as mutações de G6PD são tão frequentes?", ["frequent", "G6PD"]),
    ],
)
def test_a_question_in_a_language_apertium_has_is_translated_into_english(
    translator: ApertiumTranslator, language: str, question: str, words: list[str]
) -> None:
    assert translator.available(language)
    english = translator.translate(question, language)
    assert english is not None
    assert set(words) <= set(_words(english)), english


def test_identifiers_pass_through_a_translation_unchanged(translator: ApertiumTranslator) -> None:
    question = "¿Por qué IDH1 R132H, BRAF V600E y R-HSA-70635 importan con 6-mercaptopurine?"
    english = translator.translate(question, "es")
    assert english is not None
    for identifier in ("IDH1", "R132H", "BRAF", "V600E", "R-HSA-70635", "6-mercaptopurine"):
        assert identifier in _words(english), english


def test_the_stream_formats_own_characters_neither_break_nor_shift_the_answers(
    translator: ApertiumTranslator,
) -> None:
    odd = "¿Qué es [R-HSA-1] ^x$ <y> @z a/b {w} * # \\ o\nsalto\0nulo?"
    assert translator.translate(odd, "es") is not None
    # The next question gets its own answer, not the rest of the last one's.
    english = translator.translate("¿Qué causa la mutación de la proteína?", "es")
    assert english is not None
    assert {"mutation", "protein"} <= set(_words(english)), english


@pytest.mark.parametrize("language", ["de", "zh", "ja", "en"])
def test_a_language_without_a_pair_gets_no_translation(
    translator: ApertiumTranslator, language: str
) -> None:
    assert not translator.available(language)
    assert translator.translate("Was verursacht die Tangier-Krankheit?", language) is None


def test_without_apertium_installed_a_question_gets_no_translation(tmp_path: Path) -> None:
    missing = ApertiumTranslator(tmp_path)  # no mode files there
    assert not missing.available("es")
    assert missing.translate("¿Qué causa la enfermedad de Tangier?", "es") is None


def test_what_is_sent_comes_back_as_it_was_written() -> None:
    echo = _Echo("cat")
    try:
        for text in ("a [b] ^c$ <d> @e f/g {h} * # + \\ i", "ABCA1 R-HSA-70635 V600E", "¿Qué?"):
            assert echo.translate(text, "es") == text
        # Each pair's chain is found once, then kept; Spanish has one pair.
        assert echo.started == 1
        # French goes through Spanish: one more pair, the Spanish to English one shared.
        assert echo.translate("a [b]", "fr") == "a [b]"
        assert echo.started == 2
    finally:
        echo.close()


def test_a_chain_that_does_not_answer_in_time_is_stopped_and_started_again() -> None:
    silent = _Echo("sleep 60", timeout=0.5)
    try:
        assert silent.translate("¿Qué?", "es") is None
        assert "spa-eng" not in silent._chains  # stopped, not left to answer the next one
        silent.command = "cat"
        silent._commands.clear()
        assert silent.translate("¿Qué?", "es") == "¿Qué?"
    finally:
        silent.close()


def test_threads_asking_at_once_each_get_their_own_translation(
    translator: ApertiumTranslator,
) -> None:
    questions = {f"¿Qué hace ABCA{n} en la enfermedad?": f"ABCA{n}" for n in range(1, 9)}
    answers: dict[str, str | None] = {}

    def ask(question: str) -> None:
        answers[question] = translator.translate(question, "es")

    threads = [threading.Thread(target=ask, args=(q,)) for q in questions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(answers) == len(questions)
    for question, symbol in questions.items():
        assert symbol in (answers[question] or ""), answers[question]
