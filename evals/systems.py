"""The systems compared side by side, on the same model, children and settings.

* ``card-atomic``: one vector per whole card (the ``none`` chunker: one child = the card),
  through the same retriever, so only the chunking differs.
* ``vanilla-pdr``: LangChain's ``ParentDocumentRetriever`` over the same children, asked for
  k children (its k), as its users call it. Its order is its rank; it has no score.
* ``bm25``: BM25 alone over the same children (each card analysed in its language), best
  child per parent: the lexical baseline.
* ``children``: ``ScoredParentDocumentRetriever``, dense children only, k distinct parents.
* ``dense``: the same plus the whole-card rows (every dense ranking ``ours`` uses, no BM25).
* ``hybrid``: the same plus BM25 over the children, fused at the parent level (RRF).
* ``hybrid+card``: the same plus a whole-card row per card as a third ranking.
* ``ours``: whatever the settings configure (the shipped default unless overridden).
* ``ours+rerank``: ``ours`` with the cross-encoder over its top 10 (when the ``rerank`` extra
  is installed).
* ``sentence-window``: ``ours`` with the ``sentence_window`` chunker (one child per sentence,
  its own index), so the three chunkers (``none`` = card-atomic, ``parent_child``,
  ``sentence_window``) sit side by side.

One index holds the children and the card rows (in their own collection, as ``cardrag ingest``
builds it); systems that do not use card rows never query that collection, so nothing is
embedded twice and no system pays for a filter.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from langchain_classic.retrievers import ParentDocumentRetriever
from langchain_classic.storage import LocalFileStore
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import InMemoryByteStore, InMemoryStore
from tqdm.auto import tqdm

from cardrag.ingest import metadata as md
from cardrag.ingest.index import Index, chroma_client, open_collections
from cardrag.ingest.index.cache import cached_embeddings
from cardrag.ingest.index.manifest import corpus_rankings
from cardrag.ingest.index.parents import count_parents
from cardrag.ingest.index.vectors import RowVectors
from cardrag.ingest.lexical import BM25Index
from cardrag.ingest.settings import Settings
from cardrag.ingest.splitter import CardSplitter
from cardrag.retrievers.bm25 import search as lexical_search
from cardrag.retrievers.child_hit import ChildHit
from cardrag.retrievers.fusion import best_per_parent
from cardrag.retrievers.parent import ScoredParentDocumentRetriever


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
    """Median retrieval time per question (store-side only when the model caches queries)."""


def by_rank(docs: Sequence[Document]) -> dict[str, float]:
    """Card id -> a score that only encodes the order returned; the metrics rank by it.

    The order is the ranking, whether fused, reranked, or vanilla's (which has no score).

    Example:
        >>> by_rank([Document(id="a", page_content=""), Document(id="b", page_content="")])
        {'a': 2.0, 'b': 1.0}
    """
    return {str(d.id): float(len(docs) - rank) for rank, d in enumerate(docs)}


EVAL_CACHE = "CARDRAG_EVAL_CACHE"
"""Environment variable naming a folder where evaluation vectors persist between runs."""


def cached(embeddings: Embeddings, namespace: str) -> Embeddings:
    """The model with document and query vectors cached for this run.

    Each distinct text is embedded once however many indexes and settings use it. The cache
    is in memory, or in the folder ``CARDRAG_EVAL_CACHE`` names (one file per text, keyed by
    the model name and the text's SHA-256, as ingest's cache), so a re-run embeds only what is
    new.
    """
    folder = os.environ.get(EVAL_CACHE)
    store = LocalFileStore(folder) if folder else InMemoryByteStore()
    return cached_embeddings(embeddings, store, namespace, queries=True)


def whole_card_splitter() -> CardSplitter:
    """The ``none`` chunker: the whole card (title-prefixed) as its only child."""
    return CardSplitter(mode="none")


def index(
    cards: Sequence[Document], embeddings: Embeddings, splitter: CardSplitter, path: Path
) -> ScoredParentDocumentRetriever:
    """Write cards through the retriever's ``add_documents`` into a Chroma folder.

    The retriever returned carries the children's, the card rows' and the sentence rows'
    vectors and texts (``row_vectors``), saved beside the index as an ingest saves them.
    """
    retriever = ScoredParentDocumentRetriever.over(
        open_collections(chroma_client(path), embeddings),
        docstore=InMemoryStore(),
        child_splitter=splitter,
    )
    for start in tqdm(
        range(0, len(cards), 256),
        desc=f"indexing {path.name}",
        unit="batch",
        leave=False,
        disable=None,
    ):
        retriever.add_documents(list(cards[start : start + 256]))

    # the rows' vectors and texts, saved beside the index as an ingest saves them (every
    # retriever over this index shares them: ours reads what it reads in the app)
    def saved(store: Any, name: str) -> RowVectors | None:
        return RowVectors.write(store._collection, path / f"saved-{name}") if store else None

    stores = retriever.collections
    children = RowVectors.write(stores.children._collection, path / "saved-children")
    card_rows, sentences = saved(stores.cards, "cards"), saved(stores.sentences, "sentences")
    retriever.row_vectors = replace(children, cards=card_rows, sentences=sentences)
    return retriever


def configured(
    base: ScoredParentDocumentRetriever,
    settings: Settings,
    bm25: BM25Index | None,
    *,
    gated: bool = False,
) -> ScoredParentDocumentRetriever:
    """A retriever over ``base``'s stores configured like the settings say.

    Ungated by default: ranking metrics score every question's ten best cards. ``gated``
    keeps the settings' similarity gate, as the app runs it. The children's vectors are
    ``base``'s (:func:`index` reads them back once).
    """
    stores = Index(
        path=Path(),
        collections=base.collections,
        docstore=base.docstore,
        manifest={"fusion": rankings_of(base)},  # the rankings this corpus supports, as ingest's
        bm25=bm25,
        vectors=base.row_vectors,
    )
    ungated = {} if gated else {"min_similarity": None}
    return ScoredParentDocumentRetriever.from_index(stores, settings, **ungated)


def build(
    cards: Sequence[Document],
    embeddings: Embeddings,
    settings: Settings,
    path: Path,
    *,
    gated: bool = False,
) -> ScoredParentDocumentRetriever:
    """Index cards as the settings say and return the configured retriever (for app checks)."""
    splitter = CardSplitter.from_settings(settings)
    base = index(cards, embeddings, splitter, path)
    bm25 = lexical(base, settings)
    return configured(base, settings, bm25, gated=gated)


def rankings_of(base: ScoredParentDocumentRetriever) -> dict[str, Any]:
    """The rankings the corpus ``base`` wrote supports, as an ingest's manifest records them."""
    stores = base.collections
    kinds = {
        "card": stores.cards._collection.count() if stores.cards is not None else 0,
        "sentence": stores.sentences._collection.count() if stores.sentences is not None else 0,
    }
    return corpus_rankings(count_parents(base.docstore), kinds)


def lexical(base: ScoredParentDocumentRetriever, settings: Settings) -> BM25Index:
    """BM25 over the children ``base`` wrote, analysed as the settings say."""
    return BM25Index.from_collections(
        base.collections.with_children(), stemmed=settings.bm25_stem_languages
    )


def sentence_window(
    cards: Sequence[Document], embeddings: Embeddings, settings: Settings, path: Path
) -> ScoredParentDocumentRetriever:
    """Ours with the ``sentence_window`` chunker, over an index of its own in ``path``."""
    sentences = settings.model_copy(update={"chunker": "sentence_window"})
    window = index(cards, embeddings, CardSplitter.from_settings(sentences), path)
    return configured(window, sentences, lexical(window, settings))


def timed_runs(
    searches: dict[str, Callable[[str], list[Document]]], queries: dict[str, str], ask_k: int
) -> list[SystemRun]:
    """Every system on every question, the systems taking turns question by question.

    Who goes first rotates; a machine whose speed drifts then moves every system's ms alike
    (the bench's ``interleaved_timings``, without its warm-up pass).

    Example:
        >>> runs = timed_runs({"a": lambda q: [], "b": lambda q: []}, {"q1": "x", "q2": "y"}, 5)
        >>> [(r.name, sorted(r.run), r.parents_per_query) for r in runs]
        [('a', ['q1', 'q2'], 0.0), ('b', ['q1', 'q2'], 0.0)]
    """
    names = list(searches)
    runs: dict[str, dict[str, dict[str, float]]] = {name: {} for name in names}
    counts: dict[str, list[int]] = {name: [] for name in names}
    times: dict[str, list[float]] = {name: [] for name in names}
    turns = tqdm(queries.items(), desc="systems", unit="q", leave=False, disable=None)
    for i, (qid, text) in enumerate(turns):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            started = time.perf_counter()
            docs = searches[name](text)
            times[name].append(time.perf_counter() - started)
            runs[name][qid] = by_rank(docs)
            # for k-parent retrievers the top ask_k of a deeper list is what asking ask_k returns
            counts[name].append(len(docs[:ask_k]))
    return [
        SystemRun(n, runs[n], statistics.fmean(counts[n]), 1000 * statistics.median(times[n]))
        if times[n]
        else SystemRun(n, {}, 0.0, 0.0)
        for n in names
    ]


def run_systems(
    cards: Sequence[Document],
    queries: dict[str, str],
    embeddings: Embeddings,
    settings: Settings,
    workdir: Path,
    *,
    depth: int = 10,
    ask_k: int = 5,
) -> list[SystemRun]:
    """Index once per chunking and run every system on every question.

    Args:
        cards: Parent documents.
        queries: Question id -> text.
        embeddings: The model; pass one that caches query vectors (``evals.run`` wraps it in
            ``CacheBackedEmbeddings``) so every system reuses them and times only the store.
        settings: Chunk budgets and the configuration of ``ours``.
        workdir: Empty folder for the Chroma collections.
        depth: Cards ranked per question for the metrics (MRR@10 needs 10).
        ask_k: The k a user asks for, for the parents-per-query column.
    """
    atomic = index(cards, embeddings, whole_card_splitter(), workdir / "card-atomic")
    every_row = {"card_rows": True, "sentence_rows": True}
    splitter = CardSplitter.from_settings(settings.model_copy(update=every_row))
    base = index(cards, embeddings, splitter, workdir / "children")
    bm25 = lexical(base, settings)
    # the rows each of ours' parts ranks, over the same index (sentence rows: ours only)
    parts = {"children": (False, False), "dense": (False, True), "hybrid": (True, False)}
    variants = {
        name: settings.model_copy(
            update={"hybrid": hybrid, "card_rows": card_rows, "sentence_rows": False}
        )
        for name, (hybrid, card_rows) in {**parts, "hybrid+card": (True, True)}.items()
    }
    variants["ours"] = settings
    if not settings.rerank and reranker_available():
        variants["ours+rerank"] = settings.model_copy(update={"rerank": True})
    vanilla = ParentDocumentRetriever(
        vectorstore=base.vectorstore,
        docstore=base.docstore,
        child_splitter=splitter,
        id_key=md.PARENT_ID,
    )
    for text in tqdm(
        queries.values(), desc="embedding questions", unit="q", leave=False, disable=None
    ):
        embeddings.embed_query(text)

    def vanilla_search(k: int) -> Callable[[str], list[Document]]:
        def search(text: str) -> list[Document]:
            vanilla.search_kwargs = {"k": k}
            return vanilla.invoke(text)

        return search

    def ours_search(retriever: ScoredParentDocumentRetriever) -> Callable[[str], list[Document]]:
        return lambda q: retriever.invoke(q, k=depth)

    def bm25_search(text: str) -> list[Document]:
        parents = best_per_parent(
            ChildHit(c, p, s) for c, p, s in lexical_search(bm25, text, 100 * depth)
        )
        return [Document(id=p.parent_id, page_content="") for p in parents[:depth]]

    window = sentence_window(cards, embeddings, settings, workdir / "sentences")
    searches = {
        "card-atomic": ours_search(atomic),
        "vanilla-pdr": vanilla_search(depth),
        "bm25": bm25_search,
        **{name: ours_search(configured(base, s, bm25)) for name, s in variants.items()},
        "sentence-window": ours_search(window),
    }
    runs = timed_runs(searches, queries, ask_k)
    # parents per query when asked for ask_k: vanilla counts children, so ask it separately
    (asked,) = timed_runs({"vanilla-pdr": vanilla_search(ask_k)}, queries, ask_k)
    runs[1].parents_per_query = (
        statistics.mean(len(r) for r in asked.run.values()) if asked.run else 0.0
    )
    return runs


def reranker_available() -> bool:
    """Whether the ``rerank`` extra is installed (the cross-encoder's files are there)."""
    try:
        from cardrag.retrievers.rerank import model_path

        return (model_path() / "model.onnx").is_file()
    except ImportError:
        return False


def describe(settings: Settings) -> dict[str, Any]:
    """The retrieval configuration of ``ours``, for the report."""
    return {
        "hybrid": settings.hybrid,
        "bm25_stem_languages": settings.bm25_stem_languages,
        "card_rows": settings.card_rows,
        "sentence_rows": settings.uses_sentence_rows,
        "weights": {
            "dense": settings.dense_weight,
            "card": settings.card_weight,
            "bm25": settings.bm25_weight,
            "sentence": settings.sentence_weight,
        },
        "rrf_c": settings.rrf_c,
        "adaptive_fusion": settings.adaptive_fusion,
        "chunker": settings.chunker,
        "rerank": settings.rerank,
    }
