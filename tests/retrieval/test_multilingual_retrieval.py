"""Questions in other languages find their English form's sources (decision 0037): ingest keeps
a multilingual model's vector of each chunk in the chunk table, the retriever searches a
question that is not in English through it too, routes it to every collection, and says so
in the retrieval record; English questions are searched exactly as before.

Through the real models (MiniLM, multilingual-e5-small) over the ingested sample; the
arithmetic and the table format also with a small fake model."""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from pipelines.catalog.catalog import catalog_for
from pipelines.core.options import RequestOptions
from pipelines.core.settings import Settings, load_settings
from pipelines.index import store
from pipelines.index.chunk_table import ChunkTable, ChunkTableWriter, add_multilingual
from pipelines.index.embeddings import MULTILINGUAL_MAX_TOKENS, make_multilingual_embeddings
from pipelines.index.multilingual import E5Embeddings
from pipelines.index.version_index import build_from_store
from pipelines.language import english_gloss, english_translation
from pipelines.pipeline import AnswerPipeline
from pipelines.retrieval.expander import rule_expansion
from pipelines.retrieval.ranking import blended_similarity
from pipelines.retrieval.retriever import ReactomeRetriever

ENGLISH = "What causes Tangier disease, and what does ABCA1 do?"
TANGIER = {
    "es": "¿Qué causa la enfermedad de Tangier y qué hace ABCA1?",
    "de": "Was verursacht die Tangier-Krankheit, und was macht ABCA1?",
    "zh": "唐吉尔病是由什么引起的？ABCA1有什么作用？",  # noqa: RUF001 (as a Chinese or Japanese asker writes it)
    "ja": "タンジール病の原因は何ですか？ABCA1は何をしますか？",  # noqa: RUF001 (as a Chinese or Japanese asker writes it)
}
CHOLESTEROL_EN = "How does ABCA1 move cholesterol out of cells?"
CHOLESTEROL_ZH = "ABCA1是如何把胆固醇运出细胞的？"  # noqa: RUF001 (as a Chinese or Japanese asker writes it)
EXPORT_ZH = "我想导出一张通路图，应该怎么做？"  # noqa: RUF001 (as a Chinese or Japanese asker writes it)


class _Unnamed(Embeddings):
    """A fake model: a unit vector drawn from each text's checksum."""

    dimensions = 64

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors = []
        for text in texts:
            drawn = np.random.default_rng(zlib.crc32(text.encode())).normal(size=self.dimensions)
            vectors.append((drawn / np.linalg.norm(drawn)).tolist())
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class _Named(_Unnamed):
    """A fake multilingual model: what a table records of it is its name, tokens and
    derivation."""

    name = "fake-multilingual"
    max_tokens = 16
    derivation = 1


def _retriever(home: Path, minilm: Embeddings, **settings: Any) -> ReactomeRetriever:
    pipeline = AnswerPipeline(
        load_settings(home=home, event_logs=False, **settings), embeddings=minilm
    )
    retriever = pipeline.own_retriever
    assert retriever is not None
    return retriever


def _ids(retriever: ReactomeRetriever, question: str) -> list[str]:
    documents = retriever.invoke(question, options=RequestOptions())
    return [str(d.metadata.get("st_id") or d.metadata.get("url")) for d in documents]


def _record(retriever: ReactomeRetriever, question: str) -> dict[str, Any]:
    """The retrieval record of ``question``, expanded by the rules."""
    found = rule_expansion(question, [], max_queries=3, catalog=retriever.catalog)
    _, kept = retriever.search_recorded(
        found, found.collections, 10, question=question, cite_urls=False
    )
    assert kept is not None
    return kept.record()


def _queries(retriever: ReactomeRetriever, question: str) -> list[str]:
    """The queries ``retriever`` searched for ``question``, as its record lists them."""
    return list(_record(retriever, question)["queries"])


def _tables(settings: Settings) -> dict[str, Path]:
    client = store.open_client(settings)
    found = {}
    for name in catalog_for(settings).names:
        version = store.active_version(client, name)
        assert version is not None
        found[name] = store.keyword_index_dir(settings, version.name)
    return found


# --- the arithmetic -------------------------------------------------------------------------


def test_a_chunk_counts_by_the_better_of_the_two_models_on_the_first_ones_scale() -> None:
    scale = (8.0, -6.0)
    assert blended_similarity(0.5, 0.70, scale) == 0.5  # 8 * 0.70 - 6 = -0.4: its own wins
    assert blended_similarity(0.1, 0.80, scale) == pytest.approx(0.4)
    # Never above 1, as a cosine is: a stretched scale must not show a relevance of 1.3.
    assert blended_similarity(0.2, 0.91, scale) == 1.0


def test_a_question_in_another_language_is_routed_to_every_collection() -> None:
    catalog = catalog_for()
    # English hints send this to the user guide alone; its Chinese form has no English word.
    assert catalog.route("How do I export a pathway diagram?") == ["userguide"]
    assert sorted(catalog.route(EXPORT_ZH)) == sorted(catalog.names)
    # English questions are routed by the hints as before: no user guide for a disease.
    assert "userguide" not in catalog.route(ENGLISH)
    assert "userguide" in catalog.route(TANGIER["de"])


# --- the table ------------------------------------------------------------------------------


def test_a_table_holds_each_rows_multilingual_vector_and_searches_by_it(tmp_path: Path) -> None:
    model = _Named()
    texts = ["ABCA1 exports cholesterol", "TP53 stops the cell cycle", "Export a diagram"]
    with ChunkTableWriter(tmp_path, 3, multilingual=model) as writer:
        own = np.eye(3, 8, dtype=np.float32)
        writer.add(texts, [{"title": t} for t in texts], own, indexed=texts)
    table = ChunkTable.load(tmp_path)
    assert table is not None
    assert table.multilingual is not None
    assert table.multilingual.describe() == {
        "model": "fake-multilingual",
        "max_tokens": 16,
        "derivation": 1,
    }
    query = np.asarray(model.embed_documents([texts[1]]), dtype=np.float32)
    assert table.nearest(query, 1, multilingual=True) == [[1]]
    assert table.read([2])[0].multilingual is None  # read only when a search asks
    record = table.read([2], multilingual=True)[0]
    assert record.multilingual is not None
    assert np.allclose(record.multilingual, model.embed_documents([texts[2]])[0], atol=1e-6)


def test_a_table_without_them_gets_them_once_and_again_for_another_model(tmp_path: Path) -> None:
    texts = ["ABCA1 exports cholesterol", "TP53 stops the cell cycle"]
    with ChunkTableWriter(tmp_path, 2) as writer:
        writer.add(texts, [{"title": "T"}] * 2, np.eye(2, 8, dtype=np.float32))
    before = ChunkTable.load(tmp_path)
    assert before is not None
    assert before.multilingual is None
    with pytest.raises(ValueError, match="no multilingual vectors"):
        before.nearest(np.zeros((1, 8), dtype=np.float32), 1, multilingual=True)

    model = _Named()
    assert add_multilingual(tmp_path, model)
    assert not add_multilingual(tmp_path, model)  # held already
    after = ChunkTable.load(tmp_path)
    assert after is not None
    assert after.multilingual is not None
    assert len(after.multilingual.vectors) == 2
    # The heading (the title) is embedded with the chunk, as the keyword index holds it.
    expected = model.embed_documents(["T\nABCA1 exports cholesterol"])[0]
    assert np.allclose(after.multilingual.vectors[0], expected, atol=1e-6)

    class Rederived(_Named):
        derivation = 2

    assert add_multilingual(tmp_path, Rederived())
    described = json.loads((tmp_path / "chunk_table.json").read_text())
    assert described["multilingual"]["derivation"] == 2
    assert described["rows"] == 2  # the rest of the description is kept


def test_only_the_english_only_offline_model_gets_a_multilingual_one(minilm: Embeddings) -> None:
    assert make_multilingual_embeddings(load_settings(), minilm) is not None
    assert make_multilingual_embeddings(load_settings(multilingual=False), minilm) is None
    assert make_multilingual_embeddings(load_settings(), _Unnamed()) is None


# --- through the real models ------------------------------------------------------------------


def test_ingest_keeps_the_multilingual_vectors_of_every_chunk(sample_home: Path) -> None:
    settings = load_settings(home=sample_home)
    for name, folder in _tables(settings).items():
        table = ChunkTable.load(folder)
        assert table is not None, name
        assert table.multilingual is not None, name
        assert table.multilingual.describe()["model"] == "multilingual-e5-small-q8"
        assert len(table.multilingual.vectors) == len(table)
        norms = np.linalg.norm(np.asarray(table.multilingual.vectors), axis=1)
        assert np.allclose(norms, 1.0, atol=1e-3), name


@pytest.mark.parametrize("language", sorted(TANGIER))
def test_a_translated_question_finds_its_english_forms_first_sources(
    sample_home: Path, minilm: Embeddings, language: str
) -> None:
    retriever = _retriever(sample_home, minilm)
    english = _ids(retriever, ENGLISH)[:2]
    assert set(english) == {"R-HSA-5682201", "R-HSA-5682113"}  # the variant and its pathway
    assert set(english) <= set(_ids(retriever, TANGIER[language])[:3])


def test_without_the_multilingual_model_a_chinese_question_finds_nothing_of_the_sort(
    sample_home: Path, minilm: Embeddings
) -> None:
    # What the model adds: the English-only model alone finds neither source.
    off = _retriever(sample_home, minilm, multilingual=False)
    assert not {"R-HSA-5682201", "R-HSA-5682113"} & set(_ids(off, TANGIER["zh"]))
    on = _retriever(sample_home, minilm)
    assert _ids(on, EXPORT_ZH)[0].startswith("/userguide")


def test_the_record_ranks_a_translated_questions_candidates_by_the_multilingual_search_too(
    sample_home: Path, minilm: Embeddings
) -> None:
    retriever = _retriever(sample_home, minilm)

    translated = _record(retriever, TANGIER["de"])
    ranked = [c for c in translated["candidates"] if c["ranks"][0]["multilingual"] is not None]
    assert ranked, "no candidate was found by the multilingual search"
    lead = next(c for c in translated["candidates"] if c["n"] == 1)
    assert lead["ranks"][0]["multilingual"] is not None
    # Only the question as asked is embedded by it: the other queries have no such rank.
    assert all(rank["multilingual"] is None for c in ranked for rank in c["ranks"][1:])
    english = _record(retriever, ENGLISH)
    assert all("multilingual" not in rank for c in english["candidates"] for rank in c["ranks"])


def test_a_chinese_or_japanese_questions_words_are_searched_in_english_too(
    sample_home: Path, minilm: Embeddings
) -> None:
    on = _retriever(sample_home, minilm)
    # The record shows the query the dictionary wrote, after the expander's own.
    chinese = _queries(on, CHOLESTEROL_ZH)
    assert chinese[-1] == english_gloss(CHOLESTEROL_ZH)
    assert {"ABCA1", "cholesterol"} <= set(chinese[-1].split())
    assert len(_queries(on, TANGIER["ja"])) == len(chinese)
    # Not for a question in Latin letters, nor with the multilingual search off.
    assert not any("cholesterol" in q for q in _queries(on, TANGIER["es"]))
    off = _retriever(sample_home, minilm, multilingual=False)
    assert english_gloss(CHOLESTEROL_ZH) not in _queries(off, CHOLESTEROL_ZH)
    # What it finds: the English keyword evidence puts the cholesterol-efflux sources first.
    assert set(_ids(on, CHOLESTEROL_ZH)[:3]) & set(_ids(on, CHOLESTEROL_EN)[:3])


def test_a_spanish_french_italian_or_portuguese_question_is_searched_in_english_too(
    sample_home: Path, minilm: Embeddings
) -> None:
    on = _retriever(sample_home, minilm)
    # The record shows Apertium's English last; of the expander's alternatives only those in
    # English stay (its Spanish word lists give way to the English form).
    spanish = _queries(on, TANGIER["es"])
    assert spanish == [TANGIER["es"], "ABCA1", english_translation(TANGIER["es"], "es")]
    assert {"Tangier", "ABCA1"} <= set(spanish[-1].replace("?", " ").split())
    # German has no pair: the question is searched as before; nor with the search off.
    assert not any("Tangier disease" in q for q in _queries(on, TANGIER["de"]))
    off = _retriever(sample_home, minilm, multilingual=False)
    assert spanish[-1] not in _queries(off, TANGIER["es"])
    untranslated = _retriever(sample_home, minilm, translation=False)
    assert spanish[-1] not in _queries(untranslated, TANGIER["es"])
    # Another translator, or none, is the retriever's to choose.
    shouting = on.model_copy(update={"translation": lambda text, _language: text.upper()})
    assert _queries(shouting, TANGIER["es"])[-1] == TANGIER["es"].upper()
    silent = on.model_copy(update={"translation": None})
    expander = rule_expansion(TANGIER["es"], [], max_queries=3, catalog=on.catalog).queries
    assert _queries(silent, TANGIER["es"]) == expander
    assert len(expander) > len(spanish)


def test_a_table_built_from_the_store_holds_the_same_multilingual_vectors(
    sample_home: Path, tmp_path: Path
) -> None:
    # As an instance sharing only the store builds it (decision 0018): from Chroma's texts.
    home = Path(shutil.copytree(sample_home, tmp_path / "copy"))
    settings = load_settings(home=home)
    client = store.open_client(settings)
    version = store.active_version(client, "disease_variants")
    assert version is not None
    ingested = ChunkTable.load(store.keyword_index_dir(settings, version.name))
    model = make_multilingual_embeddings(settings, AnswerPipeline(settings).embeddings)
    built = build_from_store(
        version.collection, tmp_path / "built", lock=tmp_path / "lock", multilingual=lambda: model
    ).table
    assert ingested is not None
    assert ingested.multilingual is not None
    assert built is not None
    assert built.multilingual is not None
    assert built.multilingual.describe() == ingested.multilingual.describe()
    assert np.allclose(built.multilingual.vectors, ingested.multilingual.vectors, atol=1e-6)


def test_an_index_from_before_gets_its_multilingual_vectors_when_first_searched(
    sample_home: Path, tmp_path: Path, minilm: Embeddings
) -> None:
    home = Path(shutil.copytree(sample_home, tmp_path / "copy"))
    settings = load_settings(home=home)
    for folder in _tables(settings).values():
        described = json.loads((folder / "chunk_table.json").read_text())
        described.pop("multilingual")
        (folder / "chunk_table.json").write_text(json.dumps(described))
        (folder / "multilingual.npy").unlink()
    retriever = _retriever(home, minilm)
    assert {"R-HSA-5682201", "R-HSA-5682113"} <= set(_ids(retriever, TANGIER["zh"])[:3])
    for folder in _tables(settings).values():
        table = ChunkTable.load(folder)
        assert table is not None
        assert table.multilingual is not None


def test_english_questions_never_load_the_multilingual_model(
    sample_home: Path, minilm: Embeddings, model_cache: Path
) -> None:
    # Its 135 MB and first derivation are for questions in other languages only.
    model = E5Embeddings(model_cache=model_cache, max_tokens=MULTILINGUAL_MAX_TOKENS)
    pipeline = AnswerPipeline(load_settings(home=sample_home, event_logs=False), embeddings=minilm)
    retriever = pipeline.own_retriever
    assert retriever is not None
    retriever.multilingual = lambda: model
    assert "R-HSA-5682113" in _ids(retriever, ENGLISH)
    assert not model.loaded
    assert "R-HSA-5682113" in _ids(retriever, TANGIER["es"])
    assert model.loaded
