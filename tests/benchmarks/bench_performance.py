"""Speed, side by side with the classic LangChain stack, on ../shared/data.

    .venv/bin/python -m tests.benchmarks.bench_performance [--quick] [--data DIR] [--home DIR]

Sections (each a ratio or a difference measured in this one process, never a fixed number):

- retrieval: p50/p95 latency of our retriever and of the classic stack (_stacks.py) over
  3 collections and with the reaction summaries as a 4th, same embeddings, same expander;
- overhead: time to first token with a zero-latency answer model, minus retrieval alone (as
  the server takes the first token, and as a synchronous caller does);
- answers (_answer_speed.py): with the extractive model and the offline judge, the first
  token after retrieval's end and as a multiple of retrieval's time, and the evidence step's
  time per answer, each against its goal (issue 27);
- handler: cost per token event over a long stream, against the same stream without it;
- live citations (_live.py): the handler's cost per token with ``live_citations`` off and on
  over one answer-like stream, and how long live mode holds text back (done.data.timings'
  held_back_ms and held_back_chars) over the questions with the extractive model and with
  fake models that split markers across tokens, streaming at a fixed pace;
- finalizer: strip + finalize on a 10,000-character answer with 50 markers;
- retrieval record (_retrieval_record.py): what the candidates record adds to a request, in
  time (with it against without, interleaved) and in log bytes (its line against the log);
- serving: concurrent SSE streams against `serve` on 127.0.0.1 (bench_serving.py);
- limits (_limits_cost.py): what counting the answer cap and the rate limit in a real
  `redis-server` adds per request, against counting them in the process, and the round
  trips Redis saw per request (issue 28).

``--quick`` runs on the bundled sample corpus with fewer questions and tokens and a small
serving run, in under 2 minutes on a fresh machine; CI runs it to report, not to assert.
Writes results/NAME.json and results/NAME.png.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import timeit
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import FakeListChatModel
from langchain_core.retrievers import BaseRetriever

from callbacks.events import TokenEvent
from callbacks.handler import AnswerEventHandler
from pipelines.catalog import bundled_dir
from pipelines.catalog.catalog import COLLECTION_NAMES
from pipelines.citations.finalize import finalize_citations, strip_out_of_range_markers
from pipelines.core.options import RequestOptions
from pipelines.core.settings import Settings
from pipelines.core.tags import RETRIEVAL_TAG
from pipelines.index.embeddings import MiniLMEmbeddings, make_multilingual_embeddings
from pipelines.index.store import open_client
from pipelines.pipeline import AnswerPipeline
from tests.benchmarks import (
    _answer_speed,
    _limits_cost,
    _live,
    _retrieval_record,
    _stacks,
    _tracing_cost,
)
from tests.benchmarks._common import (
    DEFAULT_DATA,
    cache_home,
    load_questions,
    percentile,
    prepared_home,
    table,
    write_results,
)
from tests.benchmarks.eval_languages import translated_questions
from tests.support.fakes import ScriptedStream

# --- retrieval ---------------------------------------------------------------------------------


def bench_retrieval(
    settings: Settings,
    embeddings: Any,
    questions: list[str],
    collections: Sequence[str],
    *,
    asked_in: str = "English",
) -> dict[str, Any]:
    """``asked_in``: "English", or the other languages, whose questions ours also searches
    through the multilingual model and the dictionary (decision 0037)."""
    client = open_client(settings)
    print(f"  building both stacks over {', '.join(collections)}...", file=sys.stderr)

    def multilingual() -> Embeddings | None:
        return make_multilingual_embeddings(settings, embeddings)

    second = multilingual if asked_in != "English" else None
    stacks: dict[str, BaseRetriever] = {
        "ours": _stacks.ours(settings, client, embeddings, collections, multilingual=second),
        "classic": _stacks.classic(client, embeddings, collections),
    }
    ours: dict[str, Any] = {"options": RequestOptions(collections=tuple(collections))}
    for name, retriever in stacks.items():  # warm caches, indexes and the ONNX session
        for question in questions[:3]:
            retriever.invoke(question, **(ours if name == "ours" else {}))
    samples: dict[str, list[float]] = {name: [] for name in stacks}
    # Interleaved, so load on the machine falls on both alike.
    for question in questions:
        for name, retriever in stacks.items():
            kwargs: dict[str, Any] = ours if name == "ours" else {}
            started = time.perf_counter()
            retriever.invoke(question, **kwargs)
            samples[name].append((time.perf_counter() - started) * 1000)
    result: dict[str, Any] = {
        "collections": list(collections),
        "questions": len(questions),
        "asked_in": asked_in,
    }
    for name, values in samples.items():
        result[name] = {"p50_ms": percentile(values, 0.5), "p95_ms": percentile(values, 0.95)}
    result["ratio_p50"] = result["ours"]["p50_ms"] / result["classic"]["p50_ms"]
    return result


# --- pipeline overhead -------------------------------------------------------------------------


def bench_overhead(settings: Settings, embeddings: Any, questions: list[str]) -> dict[str, Any]:
    """First token with a zero-latency answer model, less the retrieval alone, both p50 over
    the questions, paired per question. The first token is timed as the server takes it
    (``astream`` on an event loop in this thread, the overhead the goal is about) and as a
    synchronous caller does (``stream``: the pipeline runs on its own loop in another thread,
    and each event crosses to the caller's)."""
    pipeline = AnswerPipeline(
        settings,
        embeddings=embeddings,
        answer_model=FakeListChatModel(responses=["ABCA1 [1]."]),
        expander_model=_stacks.FixedExpander(collections=list(COLLECTION_NAMES)),
    )
    loop = asyncio.new_event_loop()

    async def first_async(question: str) -> float:
        started = time.perf_counter()
        events = pipeline.astream(question)
        try:
            async for event in events:
                if isinstance(event, TokenEvent):
                    return (time.perf_counter() - started) * 1000
            raise AssertionError(f"no token for {question!r}")
        finally:
            await events.aclose()

    def first_sync(question: str) -> float:
        started = time.perf_counter()
        for event in pipeline.stream(question):
            if isinstance(event, TokenEvent):
                # timed before leaving the loop: leaving waits for the cancelled rest
                return (time.perf_counter() - started) * 1000
        raise AssertionError(f"no token for {question!r}")

    try:
        for question in questions[:3]:
            list(pipeline.stream(question))
            loop.run_until_complete(first_async(question))
        # Each way in its own pass, each question's retrieval alone timed right before it
        # (the same caches warm for both).
        timed: dict[str, tuple[list[float], list[float]]] = {}
        for way, first in (
            ("async", lambda q: loop.run_until_complete(first_async(q))),
            ("sync", first_sync),
        ):
            retrieval: list[float] = []
            first_token: list[float] = []
            for question in questions:
                started = time.perf_counter()
                pipeline.retriever.invoke(question)
                retrieval.append((time.perf_counter() - started) * 1000)
                first_token.append(first(question))
            timed[way] = (retrieval, first_token)
    finally:
        loop.close()
    p50 = {way: tuple(map(statistics.median, lists)) for way, lists in timed.items()}
    (p50_retrieval, p50_first), (sync_retrieval, p50_sync) = p50["async"], p50["sync"]
    return {
        "first_token_p50_ms": p50_first,
        "retrieval_p50_ms": p50_retrieval,
        "overhead_ms": p50_first - p50_retrieval,
        "overhead_share": (p50_first - p50_retrieval) / p50_retrieval,
        "first_token_sync_p50_ms": p50_sync,
        "retrieval_sync_pass_p50_ms": sync_retrieval,
        "overhead_sync_share": (p50_sync - sync_retrieval) / sync_retrieval,
    }


# --- handler cost per token ----------------------------------------------------------------------


class _NothingAsync(AsyncCallbackHandler):
    async def on_llm_new_token(self, *args: Any, **kwargs: Any) -> None:
        return None


def _handler_after_retrieval() -> AnswerEventHandler:
    """Our handler as it is when answer tokens flow: started, retrieval ended, gate open."""
    events: list[Any] = []
    handler = AnswerEventHandler(request_id="bench", emit=events.append)
    handler.start("q", ["reactome"], {})
    run_id = uuid.uuid4()
    handler.on_retriever_start({}, "q", run_id=run_id, tags=[RETRIEVAL_TAG], name="retrieval")
    document = Document(
        page_content="x",
        metadata={"st_id": "R-HSA-5682113", "display_name": "ABCA1", "collection": "reactome",
                  "citable": True},
    )  # fmt: skip
    handler.on_retriever_end([document], run_id=run_id)
    return handler


def bench_handler(tokens: int, rounds: int = 3) -> dict[str, Any]:
    model = ScriptedStream(script=lambda _: ["a"] * tokens)

    def best(make: Callable[[], list[Any]]) -> float:
        return min(asyncio.run(_live.timed_stream(model, make())) for _ in range(rounds))

    baseline = best(list)
    nothing = best(lambda: [_NothingAsync()])
    ours = best(lambda: [_handler_after_retrieval()])
    per_token = 1e6 / tokens
    return {
        "tokens": tokens,
        "stream_alone_us_per_token": baseline * per_token,
        "noop_async_handler_us": (nothing - baseline) * per_token,
        "our_handler_us": (ours - baseline) * per_token,
    }


# --- finalizer ---------------------------------------------------------------------------------


def bench_finalizer() -> dict[str, Any]:
    sentence = "ABCA1 moves cholesterol and phospholipid out of the cell onto apoA-I. "
    parts = []
    for index in range(50):
        marker = f" [{index % 23 + 1}, {(index * 7) % 23 + 1}] "
        parts.append((sentence * 3)[: 10_000 // 50 - len(marker)] + marker)
    text = "".join(parts)
    sources = [f"source {n}" for n in range(20)]
    # A different text each call, as in real use (the finalizer caches per text).
    runs = 300
    texts = [f"{number:05d}{text[5:]}" for number in range(runs)]

    def finalize_all() -> None:
        for answer in texts:
            finalize_citations(strip_out_of_range_markers(answer, len(sources)), sources)

    finalize_all()  # warm the per-group parse cache, as a running server's is
    seconds = min(timeit.repeat(finalize_all, number=1, repeat=5)) / runs
    return {"chars": len(text), "markers": text.count("["), "ms": seconds * 1000}


# --- idle memory of serve -------------------------------------------------------------------


def serve_memory(home: Path, workers: int = 1) -> dict[str, Any]:
    """Resident memory of `reactome-answers serve` over this home: after start-up, and after
    answering (models loaded, indexes read); with ``workers``, of each worker process."""
    import subprocess

    import httpx

    from tests.benchmarks.bench_serving import _children
    from tests.support.servers import free_port, wait_until_serving

    port = free_port()
    command = [str(Path(sys.executable).parent / "reactome-answers"), "--home", str(home),
               "--no-log", "serve", "--port", str(port), "--workers", str(workers)]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def rss_mb(pid: int) -> float:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        line = next(line for line in status if line.startswith("VmRSS:"))
        return int(line.split()[1]) / 1024

    def servers() -> list[int]:
        if workers == 1:
            return [process.pid]
        found = _children(process.pid)
        return [pid for pid in found if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]

    try:
        wait_until_serving(f"http://127.0.0.1:{port}/healthz", lambda: process.poll() is None)
        started = [rss_mb(pid) for pid in servers()]
        body = {"question": "What causes Tangier disease?"}
        for _ in range(2 * workers):  # a worker may take several; each likely gets one
            httpx.post(f"http://127.0.0.1:{port}/v1/answer", json=body, timeout=120)
        return {
            "workers": workers,
            "started_mb": [round(mb, 1) for mb in started],
            "after_answers_mb": [round(rss_mb(pid), 1) for pid in servers()],
        }
    finally:
        process.terminate()
        process.wait(timeout=30)


# Fairness at a hosted model's pace (issue 17): 40 tokens a second per stream.
FAIR_GAP_MS = 25.0
FAIR_TOKENS = 200
FAIR_GOALS_MS = {50: 60.0, 200: 100.0}  # p99 gap between tokens, one worker


# --- report ------------------------------------------------------------------------------------


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = results["retrieval"]
    figure, axes = plt.subplots(figsize=(7, 4))
    labels = [f"{len(run['collections'])} collections" for run in runs]
    for offset, name in enumerate(["ours", "classic"]):
        values = [run[name]["p50_ms"] for run in runs]
        axes.bar([i + (offset - 0.5) * 0.35 for i in range(len(runs))], values, 0.35, label=name)
    axes.set_xticks(range(len(runs)), labels)
    axes.set_ylabel("p50 latency, ms")
    axes.set_title("Retrieval: ours vs MultiQuery(Merger(Ensemble(BM25, Chroma)))")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="../shared/data")
    parser.add_argument("--home", type=Path, help="where the corpus is ingested")
    parser.add_argument("--quick", action="store_true", help="a reduced run (under 2 minutes)")
    parser.add_argument("--name", help="results/NAME.json (default: bench or bench-quick)")
    args = parser.parse_args(argv)
    quick = args.quick
    name = args.name or ("bench-quick" if quick else "bench")
    home = args.home or cache_home("bench-home-quick" if quick else "bench-home")

    embeddings = MiniLMEmbeddings(model_cache=cache_home("models"))
    # The quick run measures the bundled sample (seconds to ingest on a fresh machine); the
    # full run all of ../shared/data plus the reaction summaries.
    data = bundled_dir() if quick else args.data
    settings = prepared_home(data, home, embeddings, with_reactions=not quick)
    labeled = load_questions()[: 15 if quick else None]
    questions = [q["question"] for q in labeled]

    results: dict[str, Any] = {"quick": quick, "retrieval": []}
    print("retrieval...", file=sys.stderr)
    results["retrieval"].append(bench_retrieval(settings, embeddings, questions, COLLECTION_NAMES))
    if not quick:
        four = [*COLLECTION_NAMES, "reactions"]
        results["retrieval"].append(bench_retrieval(settings, embeddings, questions, four))
        # The test half's translations (issue 38: at most 0.15x the classic stack's time).
        translated = [q["question"] for q in translated_questions() if q["split"] == "test"]
        results["retrieval"].append(
            bench_retrieval(
                settings, embeddings, translated, COLLECTION_NAMES, asked_in="7 other languages"
            )
        )
    print("overhead...", file=sys.stderr)
    results["overhead"] = bench_overhead(settings, embeddings, questions)
    # As eval_quality asks them: user-guide questions with url citations on, since without
    # them a user-guide answer has nothing to cite.
    asked = [(q["question"], {"cite_urls": q["collections"] == ["userguide"]}) for q in labeled]
    print("extractive answers and evidence...", file=sys.stderr)
    results["answer_speed"] = _answer_speed.bench_answer_speed(settings, embeddings, asked)
    print("handler...", file=sys.stderr)
    results["handler"] = bench_handler(20_000 if quick else 100_000)
    print("live citations...", file=sys.stderr)
    results["live_handler"] = _live.bench_live_handler(
        20_000 if quick else 100_000, rounds=5 if quick else 3
    )
    results["held_back"] = {
        "extractive": _live.held_back(AnswerPipeline(settings, embeddings=embeddings), asked),
        **_live.fake_held_back(settings, questions, token_ms=10.0, char_ms=2.0),
    }
    results["finalizer"] = bench_finalizer()
    print("tracing...", file=sys.stderr)
    results["tracing"] = _tracing_cost.bench_tracing(
        settings, embeddings, questions, tokens=20_000 if quick else 100_000
    )
    print("retrieval record...", file=sys.stderr)
    results["retrieval_record"] = _retrieval_record.bench_retrieval_record(
        settings, embeddings, questions, rounds=3 if quick else 2
    )
    print("limits in Redis...", file=sys.stderr)
    results["limits"] = _limits_cost.bench_limits(requests=1000 if quick else 2000)
    if not quick:
        results["serve_memory"] = [serve_memory(home, workers) for workers in (1, 2)]
    print("serving...", file=sys.stderr)
    from tests.benchmarks.bench_serving import bench_serving

    # Saturation: far more token events than one process can carry.
    results["serving"] = [
        bench_serving(streams, tokens=100 if quick else 300, gap_ms=2.0)
        for streams in ((50,) if quick else (50, 200))
    ]
    results["fairness"] = [
        bench_serving(streams, tokens=FAIR_TOKENS, gap_ms=FAIR_GAP_MS, workers=workers)
        for workers in ((1,) if quick else (1, 2))
        for streams in ((50,) if quick else (50, 200))
    ]

    print("\nRetrieval latency (4 alternative queries each)")
    rows = []
    for run in results["retrieval"]:
        rows.append([
            run.get("asked_in", "English"), run["questions"], len(run["collections"]),
            run["ours"]["p50_ms"], run["ours"]["p95_ms"], run["classic"]["p50_ms"],
            run["classic"]["p95_ms"], run["ratio_p50"],
        ])  # fmt: skip
    headers = ["asked in", "questions", "collections", "ours p50", "ours p95", "classic p50",
               "classic p95", "ratio p50"]  # fmt: skip
    print(table(headers, rows))
    overhead = results["overhead"]
    print(
        f"\nPipeline overhead: first token p50 {overhead['first_token_p50_ms']:.1f} ms, "
        f"retrieval alone p50 {overhead['retrieval_p50_ms']:.1f} ms: "
        f"{overhead['overhead_ms']:.1f} ms ({overhead['overhead_share']:.1%} of retrieval; "
        f"a synchronous caller's first token {overhead['first_token_sync_p50_ms']:.1f} ms, "
        f"{overhead['overhead_sync_share']:.1%})"
    )
    print(_answer_speed.report(results["answer_speed"]))
    handler = results["handler"]
    print(
        f"Handler over {handler['tokens']:,} tokens: {handler['our_handler_us']:.1f} µs per "
        f"token above the stream alone ({handler['stream_alone_us_per_token']:.1f} µs); a "
        f"no-op AsyncCallbackHandler adds {handler['noop_async_handler_us']:.1f} µs"
    )
    live = results["live_handler"]
    print(
        f"Live citations over {live['tokens']:,} answer-like tokens ({live['markers']:,} "
        f"markers, {live['sources']} sources): our handler adds {live['off_us']:.1f} µs per "
        f"token off, {live['live_us']:.1f} µs live: live costs "
        f"{live['live_minus_off_us']:+.1f} µs per token (goal: under 2); called directly, "
        f"{live['direct_off_us']:.1f} against {live['direct_live_us']:.1f} µs: "
        f"{live['direct_live_minus_off_us']:+.1f} µs"
    )
    print("Live citations, held back per answer (done.data.timings), p50 / p99 / max")
    rows = []
    for label, run in (
        ("extractive model", results["held_back"]["extractive"]),
        (f"split markers, a token per {results['held_back']['tokens']['token_ms']:g} ms",
         results["held_back"]["tokens"]),
        (f"one char per chunk, {results['held_back']['characters']['char_ms']:g} ms apart",
         results["held_back"]["characters"]),
    ):  # fmt: skip
        ms, chars = run["held_back_ms"], run["held_back_chars"]
        rows.append([label, run["answers"], f"{ms['p50']:.2f} / {ms['p99']:.2f} / {ms['max']:.2f}",
                     f"{chars['p50']:g} / {chars['p99']:g} / {chars['max']:g}"])  # fmt: skip
    print(table(["answers from", "answers", "held_back_ms", "held_back_chars"], rows))
    finalizer = results["finalizer"]
    print(
        f"Finalizer: {finalizer['ms']:.3f} ms on {finalizer['chars']:,} characters with "
        f"{finalizer['markers']} markers"
    )
    print(_tracing_cost.report(results["tracing"]))
    print(_retrieval_record.report(results["retrieval_record"]))
    print(_limits_cost.report(results["limits"]))
    for memory in results.get("serve_memory", []):
        each = ", ".join(
            f"{start:.0f} -> {after:.0f}"
            for start, after in zip(memory["started_mb"], memory["after_answers_mb"], strict=True)
        )
        print(
            f"serve --workers {memory['workers']} over this corpus, MB resident per serving "
            f"process after start-up -> after answering: {each}"
        )
    keys = ["streams", "workers", "completed", "errors", "mixed", "gap_p50_ms", "gap_p99_ms",
            "seconds", "cpu_us_per_event", "saturation_events_per_s"]  # fmt: skip
    print("\nServing at saturation (SSE on 127.0.0.1, fake model, a token every 2 ms)")
    print(table(keys, [[run[k] for k in keys] for run in results["serving"]]))
    print(f"\nFairness (a token every {FAIR_GAP_MS:g} ms, {FAIR_TOKENS} tokens a stream)")
    rows = []
    for run in results["fairness"]:
        goal = FAIR_GOALS_MS.get(run["streams"]) if run["workers"] == 1 else None
        met = "" if goal is None else ("met" if run["gap_p99_ms"] < goal else "missed")
        rows.append([*(run[k] for k in keys), f"< {goal:g} ms: {met}" if goal else ""])
    print(table([*keys, "p99 goal"], rows))

    path = write_results(name, results)
    plot(results, path.with_suffix(".png"))
    print(f"\nwrote {path} and {path.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
