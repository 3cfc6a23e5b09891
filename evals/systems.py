"""The systems compared side by side, on the same model, children and settings.

* ``card-atomic``: one vector per whole card (the ``none`` chunker: one child = the card),
  through the same retriever, so only the chunking differs.
* ``vanilla-pdr``: LangChain's ``ParentDocumentRetriever`` over the same children, asked for
  k children (its k), as its users call it. Its order is its rank; it has no score.
* ``ours``: ``ScoredParentDocumentRetriever`` over the same children, k distinct parents.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from langchain_classic.retrievers import ParentDocumentRetriever
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import InMemoryStore
from tqdm.auto import tqdm

from ingest import metadata as md
from ingest.splitter import CardSplitter
from ingest.store import open_vectorstore
from retrievers.parent import ScoredParentDocumentRetriever

SYSTEMS = ("card-atomic", "vanilla-pdr", "ours")
WHOLE_CARD = 10_000_000
"""Chunk size of the ``none`` chunker: larger than any card, so one child per card."""


class QueryCache(Embeddings):
    """Embeds each distinct question once and reuses it across systems (same model)."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self._query = functools.lru_cache(maxsize=None)(inner.embed_query)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Delegate to the wrapped model."""
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        """Cached query vector."""
        return list(self._query(text))


@dataclass
class SystemRun:
    """One system's answers to every question."""

    name: str
    """System name."""
    run: dict[str, dict[str, float]]
    """Question id -> {card id: score}, for the metrics."""
    parents_per_query: float
    """Mean number of distinct cards returned when asked for ``ask_k``."""
    ms_per_query: float
    """Median retrieval time per question (query vectors cached: store-side cost only)."""


def whole_card_splitter() -> CardSplitter:
    """The ``none`` chunker: the whole card (title-prefixed) as its only child."""
    return CardSplitter(chunk_size=WHOLE_CARD, chunk_overlap=0)


def index(
    cards: Sequence[Document], embeddings: Embeddings, splitter: CardSplitter, path: Path
) -> ScoredParentDocumentRetriever:
    """Write cards through the retriever's ``add_documents`` into a Chroma folder."""
    retriever = ScoredParentDocumentRetriever(
        vectorstore=open_vectorstore(path, embeddings),
        docstore=InMemoryStore(),
        child_splitter=splitter,
    )
    for start in tqdm(
        range(0, len(cards), 256), desc=f"indexing {path.name}", unit="batch", leave=False
    ):
        retriever.add_documents(list(cards[start : start + 256]))
    return retriever


def _timed_run(
    name: str, queries: dict[str, str], search: Callable[[str], list[Document]], ask_k: int
) -> SystemRun:
    run: dict[str, dict[str, float]] = {}
    counts: list[int] = []
    times: list[float] = []
    for qid, text in tqdm(queries.items(), desc=name, unit="q", leave=False):
        started = time.perf_counter()
        docs = search(text)
        times.append(time.perf_counter() - started)
        # vanilla has no scores: its order is its ranking, so score by reciprocal rank
        run[qid] = {
            str(d.id): float(d.metadata.get(md.SCORE, 1.0 / rank)) for rank, d in enumerate(docs, 1)
        }
        # for k-parent retrievers the top ask_k of a deeper list is what asking for ask_k returns
        counts.append(len(docs[:ask_k]))
    return SystemRun(
        name, run, statistics.mean(counts) if counts else 0.0, 1000 * statistics.median(times)
    )


def run_systems(
    cards: Sequence[Document],
    queries: dict[str, str],
    embeddings: Embeddings,
    splitter: CardSplitter,
    workdir: Path,
    *,
    depth: int = 10,
    ask_k: int = 5,
) -> list[SystemRun]:
    """Index once per chunking and run every system on every question.

    Args:
        cards: Parent documents.
        queries: Question id -> text.
        embeddings: The model (wrapped in a query cache here).
        splitter: The children's chunking (shared by vanilla and ours).
        workdir: Empty folder for the Chroma collections.
        depth: Cards ranked per question for the metrics (MRR@10 needs 10).
        ask_k: The k a user asks for, for the parents-per-query column.
    """
    cached = QueryCache(embeddings)
    atomic = index(cards, cached, whole_card_splitter(), workdir / "card-atomic")
    ours = index(cards, cached, splitter, workdir / "children")
    vanilla = ParentDocumentRetriever(
        vectorstore=ours.vectorstore,
        docstore=ours.docstore,
        child_splitter=splitter,
        id_key=md.PARENT_ID,
    )
    for text in tqdm(queries.values(), desc="embedding questions", unit="q", leave=False):
        cached.embed_query(text)

    def vanilla_search(k: int) -> Callable[[str], list[Document]]:
        def search(text: str) -> list[Document]:
            vanilla.search_kwargs = {"k": k}
            return vanilla.invoke(text)

        return search

    runs = [
        _timed_run("card-atomic", queries, lambda q: atomic.invoke(q, k=depth), ask_k),
        _timed_run("vanilla-pdr", queries, vanilla_search(depth), ask_k),
        _timed_run("ours", queries, lambda q: ours.invoke(q, k=depth), ask_k),
    ]
    # parents per query when asked for ask_k: vanilla counts children, so ask it separately
    asked = _timed_run("vanilla-pdr", queries, vanilla_search(ask_k), ask_k)
    runs[1].parents_per_query = (
        statistics.mean(len(r) for r in asked.run.values()) if asked.run else 0.0
    )
    return runs
