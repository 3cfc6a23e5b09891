"""Retrieval latency on the shipped cards: warm ``invoke`` against the floor, same run.

The floor is what any retriever must pay: one query embedding plus one Chroma query of the
same first window. Every system answers the same golden questions, after a warm-up, with a
fixed thread count; the figure that matters is the median ratio to the floor.

Run: ``python -m evals.bench.latency`` (or ``make bench``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from evals.cases import load_golden_cases
from evals.report import machine
from ingest.cards import load_cards
from ingest.embeddings import load_embeddings
from ingest.settings import Settings
from ingest.splitter import CardSplitter
from ingest.store import build_index, open_index
from retrievers.parent import ScoredParentDocumentRetriever


def timings(fn: Callable[[str], object], questions: list[str], rounds: int) -> list[float]:
    """Seconds per call, ``rounds`` passes over the questions after one warm-up pass."""
    for q in questions:
        fn(q)
    out = []
    for _ in range(rounds):
        for q in questions:
            started = time.perf_counter()
            fn(q)
            out.append(time.perf_counter() - started)
    return out


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(p / 100 * len(ordered)) - 1))]


def main(argv: list[str] | None = None) -> int:
    """Print a Markdown table of p50/p95 and the ratio to the floor."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    settings = Settings()
    embeddings = load_embeddings(settings.embedding_model, settings.threads)
    questions = [c.query for c in load_golden_cases()]
    with tempfile.TemporaryDirectory() as tmp:
        splitter = CardSplitter.from_settings(settings.model_copy(update={"card_vector": True}))
        build_index(load_cards(settings.cards_dir), Path(tmp), embeddings, splitter, progress=False)
        index = open_index(Path(tmp), embeddings)
        window = settings.k * settings.fetch_multiplier

        def floor(q: str) -> object:
            vector = embeddings.embed_query(q)
            return index.vectorstore.similarity_search_by_vector_with_relevance_scores(
                vector, k=window
            )

        systems: dict[str, Callable[[str], object]] = {"floor: embed + 1 Chroma query": floor}
        for name, overrides in {
            "children (dense only)": {"hybrid": False, "card_vector": False},
            "hybrid (dense + BM25)": {"hybrid": True, "card_vector": False},
            "hybrid + card rows": {"hybrid": True, "card_vector": True},
            "ours (settings)": {},
        }.items():
            retriever = ScoredParentDocumentRetriever.from_index(
                index, settings.model_copy(update=overrides)
            )
            systems[name] = retriever.invoke
        results = {name: timings(fn, questions, args.rounds) for name, fn in systems.items()}
    base = statistics.median(results["floor: embed + 1 Chroma query"])
    print(
        f"Machine: {machine()}; model {settings.embedding_model}, {settings.threads} thread(s); "
        f"{len(questions)} golden questions x {args.rounds} rounds after a warm-up; "
        f"k={settings.k}.\n"
    )
    print("| system | p50 ms | p95 ms | p50 / floor |")
    print("|---|---|---|---|")
    for name, values in results.items():
        p50 = statistics.median(values)
        print(
            f"| {name} | {1000 * p50:.2f} | {1000 * percentile(values, 95):.2f} "
            f"| {p50 / base:.2f}x |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
