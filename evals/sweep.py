"""Sweeps over retrieval settings: one index per distinct chunking, every fusion setting on it.

Used by the chunking-budget notebook and by ``cardrag tune``. Embedding dominates the cost, so
an index is built once per ``(chunker, chunk_size, chunk_overlap)`` and every fusion setting
(weights, ``rrf_c``, the reranker) is evaluated on that same index; pass embeddings wrapped in
``CacheBackedEmbeddings`` and a text shared by two chunkings is embedded once.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.embeddings import Embeddings
from tqdm.auto import tqdm

from cardrag.evals.metrics import evaluate
from cardrag.evals.systems import by_rank, configured, index, lexical
from cardrag.ingest import metadata as md
from cardrag.ingest.lexical import BM25Index
from cardrag.ingest.settings import Settings
from cardrag.ingest.splitter import CardSplitter
from cardrag.retrievers.parent import ScoredParentDocumentRetriever

CHUNKING_FIELDS = ("chunker", "chunk_size", "chunk_overlap", "card_row_max_chars")
"""Settings that change what is embedded (a new index); every other field is query-time.
Card and sentence rows are always written; a setting without ``card_rows`` (or
``sentence_rows``) leaves them out of the query."""


@dataclass
class Built:
    """An index of one chunking, ready to be queried with any fusion setting."""

    base: ScoredParentDocumentRetriever
    """The retriever that wrote the index (its stores are shared by every setting)."""
    bm25: BM25Index
    """BM25 over the same children."""
    children: int
    """Children written (card rows not counted)."""
    chunks_per_card: float
    """Median children per card (card rows not counted)."""


def chunking_key(settings: Settings) -> tuple[Any, ...]:
    """The part of the settings that decides the index.

    Example:
        >>> chunking_key(Settings(chunk_size=300))
        ('parent_child', 300, 60, 2500)
    """
    return tuple(getattr(settings, name) for name in CHUNKING_FIELDS)


def build(
    cards: Sequence[Document], embeddings: Embeddings, settings: Settings, workdir: Path
) -> Built:
    """Index the cards with the settings' chunking (card and sentence rows included)."""
    every_row = {"card_rows": True, "sentence_rows": True}
    splitter = CardSplitter.from_settings(settings.model_copy(update=every_row))
    name = "-".join(str(v) for v in chunking_key(settings))
    base = index(cards, embeddings, splitter, workdir / name)
    children = splitter.split_documents(cards)
    per_card: dict[str, int] = {}
    for child in children:
        if md.is_child(child.metadata[md.CHUNK_INDEX]):
            parent = child.metadata[md.PARENT_ID]
            per_card[parent] = per_card.get(parent, 0) + 1
    return Built(
        base=base,
        bm25=lexical(base, settings),
        children=sum(per_card.values()),
        chunks_per_card=statistics.median(per_card.values()) if per_card else 0.0,
    )


def run(
    retriever: ScoredParentDocumentRetriever, queries: Mapping[str, str], depth: int = 10
) -> dict[str, dict[str, float]]:
    """Question id -> {card id: score} for the metrics (fused order where there is one)."""
    return {qid: by_rank(retriever.invoke(text, k=depth)) for qid, text in queries.items()}


def score(
    built: Built,
    settings: Settings,
    queries: Mapping[str, str],
    qrels: Mapping[str, dict[str, int]],
) -> dict[str, float]:
    """Recall@1/5, MRR@10 and nDCG@10 of the settings' query-time configuration on an index."""
    retriever = configured(built.base, settings, built.bm25)
    return evaluate(dict(qrels), run(retriever, queries))


def sweep(
    cards: Sequence[Document],
    queries: Mapping[str, str],
    qrels: Mapping[str, dict[str, int]],
    embeddings: Embeddings,
    candidates: Iterable[Settings],
    workdir: Path,
    *,
    progress: bool = True,
) -> list[tuple[Settings, Built, dict[str, float]]]:
    """Score every candidate; an index is built once per distinct chunking.

    Returns:
        ``(settings, index, metrics)`` per candidate, in the order given.
    """
    indexes: dict[tuple[Any, ...], Built] = {}
    out = []
    todo = list(candidates)
    for settings in tqdm(todo, desc="settings", unit="cfg", disable=None if progress else True):
        key = chunking_key(settings)
        if key not in indexes:
            indexes[key] = build(cards, embeddings, settings, workdir)
        built = indexes[key]
        out.append((settings, built, score(built, settings, queries, qrels)))
    return out


class CachedScores:
    """A cross-encoder whose scores are memoised by ``(question, passage)``.

    Candidates that differ only in fusion weights hand the reranker mostly the same parents;
    each pair is scored once per process.
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self.cache: dict[tuple[str, str], float] = {}

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """Scores of the passages, computing only the pairs not seen before."""
        missing = [p for p in dict.fromkeys(passages) if (query, p) not in self.cache]
        if missing:
            for passage, value in zip(missing, self.model.score(query, missing), strict=True):
                self.cache[(query, passage)] = value
        return [self.cache[(query, p)] for p in passages]


@functools.cache
def shared_reranker(threads: int) -> BaseDocumentCompressor:
    """The cross-encoder reranker with a score cache, one per process."""
    from cardrag.retrievers.rerank import CrossEncoderReranker, load_cross_encoder

    return CrossEncoderReranker(model=CachedScores(load_cross_encoder(threads)))
