"""Retrieval latency on the shipped cards: warm ``invoke`` against the floor, same run.

The floor is what any retriever must pay: one query embedding plus one Chroma query of the
same first window. Every system answers the same golden questions, after a warm-up, with a
fixed thread count; the figure that matters is the median ratio to the floor.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_classic.retrievers import ParentDocumentRetriever
from langchain_core.embeddings import Embeddings
from langchain_core.stores import InMemoryStore

from cardrag.evals.systems import reranker_available, whole_card_splitter
from cardrag.ingest import metadata as md
from cardrag.ingest.cards import Card
from cardrag.ingest.index import (
    build_index,
    chroma_client,
    open_collections,
    open_index,
    upsert_documents,
)
from cardrag.ingest.settings import Settings
from cardrag.ingest.splitter import CardSplitter
from cardrag.retrievers.parent import ScoredParentDocumentRetriever

FLOOR = "floor: embed + 1 Chroma query"


def interleaved_timings(
    systems: dict[str, Callable[[str], object]], questions: list[str], rounds: int
) -> dict[str, list[float]]:
    """Seconds per call of each system, the systems taking turns on every question.

    One warm-up pass of every system first. Timed one system after another, a machine whose
    speed drifts during the run (a shared host, a CPU changing frequency) moves one system's
    figures and not the floor's, and their ratio with it (the same store measured 1.7x and
    2.8x the floor in two runs ten minutes apart); taking turns, every system meets the same
    conditions. The order of the turns rotates with each question, so none always runs first.

    Example:
        >>> calls = []
        >>> times = interleaved_timings({"a": calls.append, "b": calls.append}, ["q1", "q2"], 1)
        >>> sorted(times), [len(t) for t in times.values()], len(calls)
        (['a', 'b'], [2, 2], 8)
    """
    for fn in systems.values():
        for q in questions:
            fn(q)
    names = list(systems)
    out: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(rounds):
        for i, q in enumerate(questions):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                started = time.perf_counter()
                systems[name](q)
                out[name].append(time.perf_counter() - started)
    return out


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(p / 100 * len(ordered)) - 1))]


def summary(results: dict[str, list[float]], floor: str = FLOOR) -> list[dict[str, Any]]:
    """p50, p95 and the p50 ratio to the floor, per system."""
    base = statistics.median(results[floor])
    return [
        {
            "system": name,
            "p50_ms": round(1000 * statistics.median(values), 2),
            "p95_ms": round(1000 * percentile(values, 95), 2),
            "ratio": round(statistics.median(values) / base, 2),
        }
        for name, values in results.items()
    ]


def latency(
    cards: list[Card],
    questions: list[str],
    embeddings: Embeddings,
    settings: Settings,
    workdir: Path,
    rounds: int,
) -> list[dict[str, Any]]:
    """Every system over the same index (card-atomic over its own), warm, same run."""
    splitter = CardSplitter.from_settings(settings.model_copy(update={"card_rows": True}))
    build_index(cards, workdir / "store", embeddings, splitter, progress=False)
    index = open_index(workdir / "store", embeddings)
    atomic_stores = open_collections(chroma_client(workdir / "atomic"), embeddings)
    docs = [c.to_document() for c in cards]
    upsert_documents(atomic_stores, InMemoryStore(), whole_card_splitter(), docs)
    window = settings.k * settings.fetch_multiplier

    def floor(q: str) -> object:
        vector = embeddings.embed_query(q)
        return index.vectorstore.similarity_search_by_vector_with_relevance_scores(vector, k=window)

    vanilla = ParentDocumentRetriever(
        vectorstore=index.vectorstore,
        docstore=index.docstore,
        child_splitter=splitter,
        id_key=md.PARENT_ID,
        search_kwargs={"k": settings.k},
    )
    atomic = ScoredParentDocumentRetriever.over(
        atomic_stores, docstore=index.docstore, k=settings.k
    )
    systems: dict[str, Callable[[str], object]] = {
        FLOOR: floor,
        "card-atomic": atomic.invoke,
        "vanilla ParentDocumentRetriever": vanilla.invoke,
    }
    variants: dict[str, dict[str, Any]] = {
        "children (dense only)": {"hybrid": False, "card_rows": False},
        "hybrid (dense + BM25)": {"hybrid": True, "card_rows": False},
        "ours (shipped settings)": {},
    }
    if reranker_available():
        variants["ours + reranker (top 10)"] = {"rerank": True}
    for name, overrides in variants.items():
        retriever = ScoredParentDocumentRetriever.from_index(
            index, settings.model_copy(update=overrides)
        )
        systems[name] = retriever.invoke
    return summary(interleaved_timings(systems, questions, rounds))
