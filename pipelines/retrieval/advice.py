"""The personal-advice gate: refuse "should I / is it safe for me / for my ..." questions.

The rules in :mod:`pipelines.retrieval.refusal_rules` catch the plainest requests for advice
on one's own care; most are worded too freely for rules ("ran out of levothyroxine, is it ok to go
without"). This gate learns the difference from labeled examples shipped with the package
(``advice_examples.yaml``): each example is embedded with the pipeline's own embedding model,
a few lexical cues are appended (first person, a relative, a decision word, a dose or lab
value, a mechanism or website word, a part of a web page), and an L2-regularised logistic
regression is fitted on them, once per process and embedding model. A question is refused
when its score is above its threshold: :data:`THRESHOLD`, or the higher
:data:`WEBSITE_THRESHOLD` for a question the catalog routes to the user guide
(docs/decisions/0019).

Why a linear model rather than the nearest examples alone: the sentence embedding is mostly
about the topic (warfarin, statins), and advice and mechanism questions share topics; a
nearest-neighbour vote mixes them up, while a linear direction across all examples separates
"asks for a decision about me" from "asks how it works" whatever the drug (docs/decisions/0013).

Website questions (routed to the user guide alone or with others) need more to be refused:
"Can I switch the diagram to show drugs?" is about the website, however it sounds, but "how
can I get rid of the leg cramps from my statin" is routed there by its "how can I get" and
is still a request for advice.

No shipped example and no question in the tests scores within :data:`MARGIN` of its
threshold (tests/retrieval/test_advice_gate.py), so another CPU's rounding cannot flip their
decisions.

A question in another language is judged by a second gate when the pipeline has a
multilingual model (decision 0037): the same features over that model's vectors, fitted on
the examples and their translations (``advice_examples_translated.yaml``, each labelled as its
English source), with the same thresholds. English questions are judged as before: the
translations never move the English model's boundary (with MiniLM they did, decision 0036).
"""

from __future__ import annotations

import re
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np
import yaml
from langchain_core.embeddings import Embeddings

from pipelines.catalog.catalog import Catalog, catalog_for
from pipelines.core.memory import give_back_freed_memory
from pipelines.index.chunk_sentences import query_vectors
from pipelines.language import DEFAULT_LANGUAGE, detect_language

__all__ = [
    "MARGIN",
    "THRESHOLD",
    "WEBSITE_THRESHOLD",
    "AdviceExample",
    "AdviceGate",
    "AdviceVerdict",
    "leave_one_out",
    "load_examples",
    "load_translated_examples",
]

_Matrix = np.ndarray[Any, np.dtype[np.float64]]

# Logit above which a question is refused. On the examples' leave-one-out scores the classes
# overlap between about -0.4 and 1.0 (docs/decisions/0019); a must-answer question refused
# costs more than an advice question answered (whose answer is still only about pathways), so
# the threshold sits at the top of the overlap: no must-answer example is above it.
THRESHOLD = 1.0
# The threshold for a question routed to the user guide: the route says it is about the
# website, where first-person wording ("can I stop", "should I use") is the norm. On the
# leave-one-out scores the routed must-answer examples stay below 0 and the routed advice
# ones above 3.
WEBSITE_THRESHOLD = 2.0
# No shipped example and no test question may score closer than this to its threshold
# (tests/retrieval/test_advice_gate.py). With onnxruntime's graph optimizations off (plain kernels
# for fused ones, as another CPU's instruction set swaps kernels) a score moved by at most 0.2, with
# the examples embedded and the gate refitted the same way; with the unquantized model instead of
# the int8 one, a far larger change of the vectors, by at most 0.44; with 2 threads instead of 1,
# not at all (``python -m tests.benchmarks.advice_gate --spread``). 0.5 is above both.
MARGIN = 0.5
# Weight of the lexical cues next to the 384 embedding dimensions, and the L2 penalty; chosen
# by leave-one-out on the examples (0.3 and 0.03 gave the widest gap between the classes).
_CUE_WEIGHT = 0.3
_L2 = 0.03
# The multilingual model's gate: its vectors are scaled up and the penalty lowered before the
# fit. e5's cosines crowd into a narrow band (unrelated questions score about 0.8), so the
# English model's penalty flattened the direction that separates the classes. Chosen by
# leaving out each translated example's group (its English source and all its translations) and
# scoring the group's translations: of 315, 15 wrong and 25 near the threshold at (1, 0.03); 6
# and 4 at (6, 0.01), about the same from 4 to 8 (decision 0037).
_MULTILINGUAL_VECTOR_SCALE = 6.0
_MULTILINGUAL_L2 = 0.01
_NEWTON_STEPS = 12
_NEAREST = 3

# Cues the embedding under-weights. Each is a yes/no feature; the classifier learns its sign.
# Each cue is written for English and for every other language an answer may be asked in
# (pipelines.language): the examples are English, so the cue's weight is learnt there, and a
# question in Spanish or Japanese that says "my son" or "how many mg should I take" shows the
# same feature. The other languages' words count only in a question detected as written in
# one of them, so English scores are what they were (tests/retrieval/test_advice_gate.py).
_CUE_PATTERNS = (
    # first person
    (
        r"\b(?:i|i'm|im|i've|ive|i'd|me|my|mine|myself)\b",
        r"\b(?:yo|mis?|me|m'|conmigo|eu|meus?|minhas?|mim|comigo|je|j'|moi|mon|mes|ich|meine?[mnrs]?|"
        r"mir|mich|io|mio|mia|miei)\b|我|私|僕|自分",
    ),
    # someone the asker cares for
    (
        r"\b(?:son|daughter|child|kid|baby|babies|toddler|newborn|teenager|mum|mom|dad|father|"
        r"mother|wife|husband|partner|grandad|grandma|grandpa|granny|nan)\b"
        r"|\b\d+\s*(?:month|year|week)s?\s+old\b",
        r"\b(?:hij[oa]s?|beb[éê]s?|madre|padre|esposo|esposa|marido|abuel[oa]|filh[oa]s?|mãe|pai|"
        r"avó|avô|fils|fille|bébé|mère|père|mari|sohn|tochter|mutter|vater|ehefrau|ehemann|"
        r"oma|opa|figli[oa]|bambin[oa]|moglie|marito|nonn[oa])\b"
        r"|儿子|女儿|孩子|宝宝|妈妈|爸爸|母亲|父亲|妻子|丈夫|老公|老婆|奶奶|爷爷|息子|娘|子供|子ども|赤ちゃん|祖母|祖父",
    ),
    # a decision about oneself
    (
        r"\bshould\s+i\b|\b(?:is|it'?s|would|be)\s+(?:it\s+)?(?:ok|okay|safe|fine|bad|dangerous|"
        r"serious|normal|worth|sensible|a\s+good\s+idea|too\s+much|enough)\b"
        r"|\b(?:for|suit)\s+me\b|\b(?:safe|ok|okay)\s+to\b",
        r"\b(?:debo|debería|deberia|puedo|devo|deveria|posso|dois-je|devrais|puis-je|peux-je|"
        r"soll|sollte|darf|dovrei)\b|\b(?:es|é|est-ce|ist\s+es|è)\s+(?:seguro|peligroso|perigoso|"
        r"dangereux|grave|gefährlich|sicher|schlimm|pericoloso|sicuro)\b"
        r"|应该|该不该|要不要|可以吗|安全吗|危险吗|べき|大丈夫|いいですか|危険",
    ),
    # a dose or a lab value
    (
        r"\b\d+(?:[.,]\d+)?\s*(?:mg|mcg|µg|g|iu|units?|%|puffs?|tablets?|pills?|kg|mmol)\b",
        r"\d\s*(?:毫克|微克|片|粒|ミリグラム|錠)|\b(?:comprimidos?|pastillas?|cápsulas?|"
        r"comprimés?|gélules?|tabletten|kapseln|compresse|pastiglie)\b",
    ),
    # an impersonal how/why/what question
    (
        r"^\s*(?:how|why|what|which|where|whats|what's)\b(?!.*\b(?:i|me|my)\b)",
        r"^\s*¿?\s*(?:cómo|por\s+qué|qué|cuál|cuáles|como|porque|por\s+que|o\s+que|quais?|"
        r"comment|pourquoi|quel(?:le)?s?|qu'est-ce|wie|warum|wieso|welche[rs]?|perché|cosa|"
        r"quale|quali)\b(?!.*\b(?:yo|mis?|me|eu|meus?|minhas?|je|mon|mes|ich|meine?[mnrs]?|mir|"
        r"mich|io|mio|mia)\b)|^(?!.*[我私])(?=.*(?:为什么|如何|怎样|什么|哪些|なぜ|どのように|どうして|何が|どの))",
    ),
    # mechanism and website words
    (
        r"\b(?:reactome|pathways?|browser|analysis|api|download|upload|identifiers?|diagrams?|"
        r"database|cypher|mechanism|inhibits?|receptors?|enzymes?|signall?ing|mutations?|"
        r"reactions?)\b",
        r"\b(?:vías?|mecanismos?|receptores|enzimas?|señalización|mutación|mutaciones|"
        r"reacción|reacciones|sinalização|mutação|mutações|reação|reações|voies?|mécanismes?|"
        r"récepteurs?|signalisation|réactions?|signalweg\w*|stoffwechselweg\w*|mechanismus|"
        r"rezeptor\w*|enzym\w*|reaktion\w*|datenbank|meccanismo|recettor\w*|segnalazione|"
        r"mutazion\w*|reazion\w*)\b|通路|途径|机制|受体|酶|信号|突变|经路|経路|パスウェイ|機序|メカニズム|受容体|酵素|シグナル|変異",
    ),
    # parts of a web page ("Can I stop the tour?" is not about a treatment)
    (
        r"\b(?:tour|walkthrough|tutorial|tips?|overlay|pages?|tab|panel|screen|screenshots?|"
        r"font|labels?|zoom|colou?rs?|contrast|cache|reload|login|account|button|menu|link|"
        r"export|token|viewer|app)\b",
        r"\b(?:página|pestaña|pantalla|botón|enlace|exportar|cuenta|guía|aba|tela|botão|"
        r"exportação|conta|onglet|écran|bouton|lien|exporter|compte|seite|reiter|bildschirm|"
        r"schaltfläche|knopf|exportieren|konto|pagina|scheda|schermo|pulsante|collegamento|"
        r"esportare|sito)\b|网页|页面|按钮|链接|导出|账号|网站|ページ|ボタン|リンク|エクスポート|アカウント|サイト|画面",
    ),
)
_CUES = tuple(
    (re.compile(english, re.IGNORECASE), re.compile(others, re.IGNORECASE))
    for english, others in _CUE_PATTERNS
)


@dataclass(frozen=True)
class AdviceExample:
    id: str
    question: str
    label: str  # "advice" or "answer"
    kind: str


@dataclass(frozen=True)
class AdviceVerdict:
    """The gate's reading of one question: refused or not, and why (for the event log)."""

    refused: bool
    score: float
    nearest: list[dict[str, Any]]  # the closest examples: id, label, similarity
    threshold: float = THRESHOLD  # the one that applied: WEBSITE_THRESHOLD for the website
    # The multilingual model's name when it judged (a question in another language).
    embeddings: str | None = None

    @property
    def distance(self) -> float:
        """How far the score is from deciding the other way; under :data:`MARGIN`, rounding
        on another CPU could flip it."""
        return abs(self.score - self.threshold)

    def timed(self, started: float, ended: float) -> dict[str, Any]:
        """The ruling as the custom event :data:`~pipelines.core.tags.ADVICE_RECORD` carries
        it: made between ``started`` and ``ended`` (``time.perf_counter``), sent now."""
        return {
            "refused": self.refused,
            "score": round(self.score, 3),
            "threshold": self.threshold,
            "ms": round((ended - started) * 1000, 3),
            "ago_ms": round((time.perf_counter() - ended) * 1000, 3),
        }

    def detail(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "score": round(self.score, 3),
            "threshold": self.threshold,
            "nearest": self.nearest,
        }
        if self.embeddings is not None:
            found["embeddings"] = self.embeddings
        return found


def load_examples() -> list[AdviceExample]:
    """The labeled examples shipped with the package
    (``pipelines/retrieval/advice_examples.yaml``)."""
    text = (
        resources.files("pipelines.retrieval").joinpath("advice_examples.yaml").read_text("utf-8")
    )
    return [
        AdviceExample(str(e["id"]), str(e["question"]), str(e["label"]), str(e.get("kind", "")))
        for e in yaml.safe_load(text)
    ]


def load_translated_examples() -> list[AdviceExample]:
    """The shipped examples' translations (``advice_examples_translated.yaml``), each with its
    English source's label and kind."""
    sources = {example.id: example for example in load_examples()}
    text = (
        resources.files("pipelines.retrieval")
        .joinpath("advice_examples_translated.yaml")
        .read_text("utf-8")
    )
    return [
        AdviceExample(
            str(entry["id"]),
            str(entry["question"]),
            sources[str(entry["source"])].label,
            sources[str(entry["source"])].kind,
        )
        for entry in yaml.safe_load(text)
    ]


def _cues(question: str) -> _Matrix:
    # The other languages' words only for a question in one of them: "MI", "miR-21", "ICH"
    # and "PAI-1" are English questions' symbols, not "my" and "I".
    foreign = detect_language(question) != DEFAULT_LANGUAGE
    return (
        np.array(
            [
                1.0 if english.search(question) or (foreign and others.search(question)) else 0.0
                for english, others in _CUES
            ]
        )
        * _CUE_WEIGHT
    )


def _features(vectors: _Matrix, questions: Sequence[str], scale: float = 1.0) -> _Matrix:
    cues = np.array([_cues(question) for question in questions]).reshape(len(questions), -1)
    return np.hstack([vectors * scale, cues, np.ones((len(questions), 1))])


def _fit(features: _Matrix, labels: _Matrix, l2: float = _L2) -> _Matrix:
    """L2-regularised logistic regression by Newton's method: deterministic, no dependency,
    a few tens of milliseconds on a few hundred examples. The classes are weighted equally
    whatever their sizes; the intercept (last column) is not penalised."""
    share = float(labels.mean())
    weights = np.where(labels == 1, 0.5 / share, 0.5 / (1 - share))
    penalty = l2 * np.eye(features.shape[1])
    penalty[-1, -1] = 0.0
    w = np.zeros(features.shape[1])
    for _ in range(_NEWTON_STEPS):
        p = 1.0 / (1.0 + np.exp(-(features @ w)))
        gradient = features.T @ (weights * (p - labels)) + penalty @ w
        hessian = (features * (weights * p * (1 - p))[:, None]).T @ features + penalty
        w = w - np.linalg.solve(hessian, gradient)
    return w


def _unit(vectors: Any) -> _Matrix:
    """Rows scaled to length 1: cosine similarity whatever the model returns."""
    matrix = np.atleast_2d(np.asarray(vectors, dtype=np.float64))
    unit: _Matrix = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    return unit


def _embed(embeddings: Embeddings, texts: Sequence[str]) -> _Matrix:
    return _unit(embeddings.embed_documents(list(texts)))


def _threshold(question: str, catalog: Catalog) -> float:
    """The score above which ``question`` is refused: higher for a website question."""
    # By the hints, not the question's language: every question in another language is
    # routed to the user guide too (decision 0037), and is not a website question for that.
    website = "userguide" in catalog and "userguide" in catalog.route_by_hints(question)
    return WEBSITE_THRESHOLD if website else THRESHOLD


@dataclass(frozen=True)
class _Model:
    examples: list[AdviceExample]
    vectors: _Matrix
    weights: _Matrix
    scale: float = 1.0  # of the vectors in the features


# One fitted model per embedding model in the process: the examples are embedded and the
# classifier fitted once, on first use, however many pipelines share the embeddings.
_MODELS: weakref.WeakKeyDictionary[Embeddings, _Model] = weakref.WeakKeyDictionary()
_MODELS_LOCK = threading.Lock()


def _labels(examples: Sequence[AdviceExample]) -> _Matrix:
    return np.array([1.0 if e.label == "advice" else 0.0 for e in examples])


class AdviceGate:
    """Scores questions against the examples with ``embeddings`` (shared, thread-safe)."""

    def __init__(
        self,
        embeddings: Embeddings,
        *,
        catalog: Catalog | None = None,
        examples: Sequence[AdviceExample] | None = None,
        multilingual: Callable[[], Embeddings | None] | None = None,
    ) -> None:
        """``examples``: instead of the shipped ones (fitted per gate, not cached).
        ``multilingual``: gives the multilingual model that judges a question in another
        language (loaded on first use), or None."""
        self.embeddings = embeddings
        self.catalog = catalog or catalog_for()
        self.multilingual = multilingual
        self._examples = list(examples) if examples is not None else None
        self._own: _Model | None = None

    def _model(self) -> _Model:
        if self._examples is not None:
            if self._own is None:
                self._own = self._fit_model(self._examples)
            return self._own
        with _MODELS_LOCK:  # a second request waits for the first fit rather than redo it
            model = _MODELS.get(self.embeddings)
            if model is None:
                model = _MODELS[self.embeddings] = self._fit_model(load_examples())
            return model

    def _fit_model(self, examples: Sequence[AdviceExample]) -> _Model:
        questions = [e.question for e in examples]
        vectors = _embed(self.embeddings, questions)
        return _Model(
            list(examples), vectors, _fit(_features(vectors, questions), _labels(examples))
        )

    def _second_model(self, question: str) -> tuple[Embeddings, _Model] | None:
        """The multilingual model and the gate fitted on its vectors, for a question in
        another language; None for English or without such a model."""
        if self.multilingual is None or self._examples is not None:
            return None
        if detect_language(question) == DEFAULT_LANGUAGE:
            return None
        embeddings = self.multilingual()
        if embeddings is None:
            return None
        with _MODELS_LOCK:
            model = _MODELS.get(embeddings)
            if model is None:
                examples = [*load_examples(), *load_translated_examples()]
                questions = [e.question for e in examples]
                # Embedded as the question being judged is: e5 reads a question unlike a
                # passage ("query: ").
                vectors = _unit(query_vectors(embeddings, questions))
                features = _features(vectors, questions, _MULTILINGUAL_VECTOR_SCALE)
                weights = _fit(features, _labels(examples), _MULTILINGUAL_L2)
                model = _MODELS[embeddings] = _Model(
                    examples, vectors, weights, _MULTILINGUAL_VECTOR_SCALE
                )
                give_back_freed_memory()  # of loading the model and embedding the examples
        return embeddings, model

    def warm_up(self) -> None:
        """Embed the examples and fit now rather than on the first question."""
        self._model()

    def check(self, question: str, vector: Sequence[float] | None = None) -> AdviceVerdict:
        """The verdict on ``question``; ``vector``: its embedding by this gate's model when
        the caller has it already (the retriever embeds the question with its alternative
        queries), else it is embedded here. A question in another language is judged by the
        multilingual model's gate when there is one (``vector`` is then not used)."""
        text = question.strip()
        second = self._second_model(text)
        if second is not None:
            embeddings, model = second
            # As the retriever embeds the question for its search: one vector, looked up there.
            unit = _unit(embeddings.embed_query(text))[0]
        else:
            model = self._model()
            unit = _unit(self.embeddings.embed_query(text) if vector is None else vector)[0]
        score = float(_features(unit[None, :], [text], model.scale)[0] @ model.weights)
        similarities = model.vectors @ unit
        nearest = [
            {
                "id": model.examples[i].id,
                "label": model.examples[i].label,
                "similarity": round(float(similarities[i]), 3),
            }
            for i in np.argsort(-similarities)[:_NEAREST]
        ]
        threshold = _threshold(text, self.catalog)
        judged_by = str(getattr(second[0], "name", "multilingual")) if second else None
        return AdviceVerdict(score > threshold, score, nearest, threshold, judged_by)


def leave_one_out(
    embeddings: Embeddings,
    examples: Sequence[AdviceExample] | None = None,
    catalog: Catalog | None = None,
) -> dict[str, Any]:
    """Dev figures: each example scored by a classifier fitted on all the others.

    Returns ``advice_questions``, ``advice_refused`` (share), ``answer_questions``,
    ``answer_refused`` (count) and ``missed`` (ids on each side that the gate gets wrong),
    the same shape eval_quality reports per split, plus the per-example ``scores`` and
    ``distances`` (from the threshold that applies to each)."""
    examples = list(examples) if examples is not None else load_examples()
    catalog = catalog or catalog_for()
    questions = [e.question for e in examples]
    features = _features(_embed(embeddings, questions), questions)
    labels = _labels(examples)
    scores: dict[str, float] = {}
    distances: dict[str, float] = {}
    refused: dict[str, bool] = {}
    for i, example in enumerate(examples):
        others = np.arange(len(examples)) != i
        score = float(features[i] @ _fit(features[others], labels[others]))
        threshold = _threshold(example.question, catalog)
        scores[example.id] = round(score, 3)
        distances[example.id] = round(abs(score - threshold), 3)
        refused[example.id] = score > threshold
    advice = [e for e in examples if e.label == "advice"]
    answer = [e for e in examples if e.label != "advice"]
    return {
        "advice_questions": len(advice),
        "advice_refused": sum(refused[e.id] for e in advice) / max(len(advice), 1),
        "answer_questions": len(answer),
        "answer_refused": sum(refused[e.id] for e in answer),
        "missed": {
            "advice_answered": [e.id for e in advice if not refused[e.id]],
            "answer_refused": [e.id for e in answer if refused[e.id]],
        },
        "scores": scores,
        "distances": distances,
    }
