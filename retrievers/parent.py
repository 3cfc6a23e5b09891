"""The scored parent-document retriever: search small children, return k whole parent cards.

What it fixes in LangChain's ``ParentDocumentRetriever``: k counts parents, not children;
every parent carries the similarity of its best child and which child matched; a
``min_similarity`` gate; per-call Chroma filters; deterministic child ids, so re-adding a
card replaces its rows. Optionally it fuses, at the parent level, the dense ranking with a
BM25 ranking of the same children and with whole-card rows (reciprocal rank fusion).
"""

from __future__ import annotations

import enum
import logging
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from typing import Any

from langchain_chroma import Chroma
from langchain_classic.retrievers import ParentDocumentRetriever
from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.runnables.config import run_in_executor
from pydantic import Field, model_validator

from cardrag.ingest import metadata as md
from cardrag.ingest.index import Collections, Index, delete_documents, upsert_documents
from cardrag.ingest.index.collections import Where, merge_filters
from cardrag.ingest.index.rows import with_ids
from cardrag.ingest.index.search import ChildHit, RowReader
from cardrag.ingest.lexical import BM25Index
from cardrag.ingest.settings import Settings, default
from cardrag.ingest.splitter import CardSplitter
from cardrag.retrievers.candidates import (
    card_rows_of,
    first_fetch,
    next_fetch,
    resolve,
    without_card_row,
)
from cardrag.retrievers.expansion import assemble, finish
from cardrag.retrievers.fusion import FusionWeights, ParentHit, best_per_parent, rank_parents
from cardrag.retrievers.rerank import reranker_from

logger = logging.getLogger(__name__)

_READS: dict[int, ThreadPoolExecutor] = {}
"""Threads for :meth:`ScoredParentDocumentRetriever._together` (reads only, never nested),
one pool per process: a worker forked from a process that had already read gets its own
(a forked child inherits the pool but not its threads)."""


def read_pool() -> ThreadPoolExecutor:
    """This process's pool for concurrent reads, made on first use."""
    pid = os.getpid()
    if pid not in _READS:
        _READS.clear()  # a parent's pool: its threads did not come along
        _READS[pid] = ThreadPoolExecutor(max_workers=4, thread_name_prefix="cardrag-read")
    return _READS[pid]


def _no_card_rows() -> tuple[list[ChildHit], set[str]]:
    return [], set()


class _Gate(enum.Enum):
    """The per-call ``min_similarity`` of a call that passes none: the retriever's own gate.

    A per-call ``None`` means no gate, as the field's ``None`` does.
    """

    OWN = "own"


class ScoredParentDocumentRetriever(ParentDocumentRetriever):
    """Return ``k`` distinct parent cards ranked by their best child, with scores.

    How many cards come back: ``k`` is an upper bound. The retriever returns exactly ``k``
    distinct cards whenever at least ``k`` cards pass the filters (``filter``, restricted
    cards) and ``min_similarity``, and otherwise every card that passes, best first: fewer
    than ``k``, or an empty list when none does. It never pads the list with cards below the
    gate, because a caller that answers from what it gets (the graph, an LCEL chain) must
    not be handed a card the gate judged unrelated. With the multilingual model's gate a
    question in a language the cards are not written in often returns fewer than ``k``
    (for example one card at ``k=3``); pass ``min_similarity=None`` per call to rank
    without the gate (left out, the retriever's own applies).

    Example:
        >>> from cardrag.ingest.embeddings import load_embeddings   # doctest: +SKIP
        >>> from cardrag.ingest.index import open_index  # doctest: +SKIP
        >>> from cardrag.ingest.settings import Settings, default  # doctest: +SKIP
        >>> settings = Settings()  # doctest: +SKIP
        >>> model = settings.embedding_model  # doctest: +SKIP
        >>> index = open_index(settings.store_dir, load_embeddings(model), model)  # doctest: +SKIP
        >>> retriever = ScoredParentDocumentRetriever(  # doctest: +SKIP
        ...     vectorstore=index.vectorstore, docstore=index.docstore, k=3)
        >>> docs = retriever.invoke("Can I take it with food?",  # doctest: +SKIP
        ...                         filter={"topics": {"$contains": "food-timing"}})
        >>> [(d.id, round(d.metadata["score"], 2)) for d in docs]  # doctest: +SKIP
        [('card-...', 0.6...), ...]
    """

    vectorstore: Chroma
    """The children collection (Chroma, with its declared distance space)."""
    card_rows_store: Chroma | None = None
    """The whole-card rows' own collection (as ``cardrag ingest`` builds it); None: card rows,
    if any, share ``vectorstore`` and a ``chunk_index`` filter tells the kinds apart."""
    restricted_store: Chroma | None = None
    """The restricted cards' own collection, searched only with ``allow_restricted``; None:
    their rows share the other collections and a ``sensitivity`` filter in the query excludes
    them."""
    child_splitter: CardSplitter = Field(default_factory=CardSplitter)
    """Splits parents into children on ``add_documents``."""
    id_key: str = md.PARENT_ID
    """Child metadata key holding the parent's id."""
    k: int = Field(default=default("k"), ge=1)
    """Distinct parents to return."""
    fetch_multiplier: int = Field(default=default("fetch_multiplier"), ge=1)
    """The first search fetches ``k * fetch_multiplier`` children."""
    max_fetch: int = Field(default=default("max_fetch"), ge=1)
    """Upper bound on children fetched for one question (the window doubles up to it)."""
    min_similarity: float | None = None
    """Drop parents whose best child similarity is below this; ``None`` keeps all. (The
    calibrated value depends on the embedding model: :meth:`from_index` sets
    ``Settings.effective_min_similarity``.)"""
    filter: Where | None = None
    """A Chroma ``where`` filter always applied (combined with any per-call filter)."""
    allow_restricted: bool = False
    """Return cards whose ``sensitivity`` is ``restricted`` (excluded in the query by default)."""
    allow_internal: bool = False
    """Return cards whose ``sensitivity`` is ``internal`` (written for staff). By default they
    are ranked with the others and dropped before expansion: they are few, and a metadata
    filter on the public collections would slow every query
    (:mod:`cardrag.ingest.index.collections`)."""
    card_rows: bool = False
    """Rank whole-card rows (``chunk_index`` -1) as a third list, from their own query."""
    bm25: BM25Index | None = None
    """BM25 over the same children; when set, its parent ranking is fused with the dense one."""
    dense_weight: float = Field(default=default("dense_weight"), ge=0)
    """RRF weight of the dense best-child ranking."""
    card_weight: float = Field(default=default("card_weight"), ge=0)
    """RRF weight of the whole-card rows' ranking (used only where the index has card rows)."""
    bm25_weight: float = Field(default=default("bm25_weight"), ge=0)
    """RRF weight of the BM25 ranking (used only when ``bm25`` is set)."""
    rrf_c: int = Field(default=default("rrf_c"), ge=1)
    """The ``c`` of reciprocal rank fusion: larger flattens the difference between ranks."""
    reranker: BaseDocumentCompressor | None = None
    """Reorders the top ``rerank_candidates`` parents (e.g. the cross-encoder in
    :mod:`cardrag.retrievers.rerank`) before the best ``k`` are returned."""
    rerank_candidates: int = Field(default=default("rerank_candidates"), ge=1)
    """Parents handed to the reranker (at least ``k``)."""
    concurrent_reads: bool = default("concurrent_reads")
    """Make the independent reads of one question at the same time (the vector queries and
    BM25; then the reads by id; then the matched rows and the docstore), on a small shared
    thread pool. False reads one after the other (one core per request, for a server that
    runs as many workers as cores)."""

    @classmethod
    def from_index(
        cls, index: Index, settings: Settings, **overrides: Any
    ) -> ScoredParentDocumentRetriever:
        """The retriever over an opened index, configured from settings.

        BM25 is used when ``settings.hybrid`` is on and the index has one; card rows are used
        when ``settings.card_rows`` is on (otherwise filtered out of the query).
        """
        values: dict[str, Any] = {
            "docstore": index.docstore,
            "child_splitter": CardSplitter.from_settings(settings),
            "k": settings.k,
            "fetch_multiplier": settings.fetch_multiplier,
            "max_fetch": settings.max_fetch,
            "concurrent_reads": settings.concurrent_reads,
            "min_similarity": settings.effective_min_similarity,
            "bm25": index.bm25 if settings.hybrid else None,
            "card_rows": settings.uses_card_rows,
            "dense_weight": settings.dense_weight,
            "card_weight": settings.card_weight,
            "bm25_weight": settings.bm25_weight,
            "rrf_c": settings.rrf_c,
            "reranker": reranker_from(settings),
            "rerank_candidates": settings.rerank_candidates,
        }
        return cls.over(index.collections, **{**values, **overrides})

    @classmethod
    def over(cls, collections: Collections, **fields: Any) -> ScoredParentDocumentRetriever:
        """A retriever reading and writing an index's collections (``fields`` as the class's)."""
        return cls(
            vectorstore=collections.children,
            card_rows_store=collections.cards,
            restricted_store=collections.restricted,
            **fields,
        )

    @model_validator(mode="after")
    def _check_fetch(self) -> ScoredParentDocumentRetriever:
        if self.max_fetch < self.k:
            msg = f"max_fetch ({self.max_fetch}) must be at least k ({self.k})"
            raise ValueError(msg)
        return self

    # -- retrieval ----------------------------------------------------------------------------

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        filter: Where | None = None,
        k: int | None = None,
        min_similarity: float | _Gate | None = _Gate.OWN,
    ) -> list[Document]:
        """Per-call ``filter`` (Chroma ``where``), ``k`` and ``min_similarity`` override fields.

        ``min_similarity=None`` ranks without the gate; left out, the field applies.
        """
        want, floor, where = k or self.k, self._floor(min_similarity), self._where(filter)
        pool = max(want, self.rerank_candidates) if self.reranker is not None else want
        vector = self._embeddings.embed_query(query)
        rows = self.rows
        fetch = first_fetch(pool, self.fetch_multiplier, self.max_fetch)
        while True:
            # the three rankings' windows of the same size: children, card rows, BM25
            hits, cards, lexical_hits = self._together(
                partial(rows.nearest, vector, fetch, where, card_rows=False),
                partial(rows.nearest, vector, fetch, where, card_rows=True)
                if self.card_rows
                else list,
                partial(self._lexical, query, fetch),
            )
            lexical = best_per_parent(lexical_hits)
            windows = {h.parent_id for h in [*hits, *cards]}
            candidates = [*(h.parent_id for h in hits), *(p.parent_id for p in lexical)]
            extra, (more, no_row) = self._together(
                partial(resolve, rows, vector, windows, lexical, self._rows_of, where),
                partial(card_rows_of, rows, vector, candidates, windows, cards, where)
                if self.card_rows
                else _no_card_rows,
            )
            dense = without_card_row([*hits, *extra], no_row)
            cards = [*cards, *more]
            ranked = rank_parents(
                [*dense, *cards],
                lexical,
                min_similarity=floor,
                weights=self._weights,
                c=self.rrf_c,
            )
            docs, missing = self._expand(rows, ranked, pool)
            fetch_more = next_fetch(hits, fetch, self.max_fetch, len(docs), pool, floor)
            if fetch_more is None:
                docs = finish(docs, missing)
                if self.reranker is not None and docs:
                    docs = list(self.reranker.compress_documents(docs, query))
                return docs[:want]
            fetch = fetch_more

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **options: Any
    ) -> list[Document]:
        """Run the sync body in an executor, with the same per-call ``options``.

        Chroma's local client and the file store block anyway, and one body means the sync and
        async paths cannot drift apart.
        """
        body = partial(
            self._get_relevant_documents, query, run_manager=run_manager.get_sync(), **options
        )
        return await run_in_executor(None, body)

    def _together(self, *reads: Callable[[], Any]) -> list[Any]:
        """Run independent reads at once (``concurrent_reads``), or one after the other.

        Chroma's queries and reads release the GIL, so on two cores the two vector queries
        take the time of one (measured at 10,000 cards: 2.9 ms one after the other, 1.6 ms
        at once).
        """
        if not self.concurrent_reads:
            return [read() for read in reads]
        pool = read_pool()
        later = [pool.submit(read) for read in reads[1:]]
        first = reads[0]()
        return [first, *(f.result() for f in later)]

    @property
    def _weights(self) -> FusionWeights:
        return FusionWeights(dense=self.dense_weight, card=self.card_weight, bm25=self.bm25_weight)

    def _lexical(self, query: str, n: int) -> list[ChildHit]:
        """BM25's ``n`` best children, the same window as the dense ones (empty without BM25)."""
        if self.bm25 is None or self.bm25_weight == 0:
            return []
        hits = self.bm25.search(query, n, allow_restricted=self.allow_restricted)
        return [ChildHit(c, p, s) for c, p, s in hits]

    def _rows_of(self, parent_ids: Sequence[str]) -> list[str]:
        """The child ids of the given parents (BM25 indexes every child row)."""
        return self.bm25.rows_of(parent_ids) if self.bm25 is not None else []

    def _expand(
        self, rows: RowReader, ranked: Sequence[ParentHit], k: int
    ) -> tuple[list[Document], list[str]]:
        """The first ``k`` ranked parents that exist and may be shown, read from the docstore.

        Reads only as many records as still needed, a slice at a time (each read opens files
        or makes a round trip).
        """
        docs: list[Document] = []
        missing: list[str] = []
        start = 0
        while len(docs) < k and start < len(ranked):
            part = ranked[start : start + k - len(docs)]
            part, records = self._together(
                partial(self._complete, rows, part),
                partial(self.docstore.mget, [p.parent_id for p in part]),
            )
            more, gone = assemble(
                part,
                records,
                k - len(docs),
                allow_restricted=self.allow_restricted,
                allow_internal=self.allow_internal,
            )
            docs += more
            missing += gone
            start += len(part)
        return docs, missing

    def _complete(self, rows: RowReader, ranked: Sequence[ParentHit]) -> list[ParentHit]:
        """The parents with their matched rows' text and metadata read (for provenance)."""
        best = rows.complete([p.best for p in ranked])
        return [replace(p, best=b) for p, b in zip(ranked, best, strict=True)]

    def _floor(self, per_call: float | _Gate | None) -> float | None:
        return self.min_similarity if isinstance(per_call, _Gate) else per_call

    @property
    def _embeddings(self) -> Any:
        embeddings = self.vectorstore.embeddings
        if embeddings is None:
            msg = "the Chroma vector store needs an embedding_function"
            raise ValueError(msg)
        return embeddings

    def _where(self, per_call: Where | None) -> Where | None:
        return merge_filters(self.filter, per_call)

    # -- writing ------------------------------------------------------------------------------

    def add_documents(
        self,
        documents: list[Document],
        ids: list[str] | None = None,
        add_to_docstore: bool = True,
        **kwargs: Any,
    ) -> None:
        """Upsert parents: deterministic child ids, stale children removed, parents stored.

        Args:
            documents: Parent documents; their ``id`` (or ``ids``) is the card id.
            ids: Card ids, when the documents carry none.
            add_to_docstore: Must be True: parents always go to the docstore with their
                children, so the two never disagree.
            **kwargs: Ignored (kept for LangChain's signature).
        """
        if not add_to_docstore:
            msg = (
                "add_to_docstore=False is not supported: parents and children are written together"
            )
            raise ValueError(msg)
        upsert_documents(
            self.collections, self.docstore, self.child_splitter, with_ids(documents, ids)
        )
        self._refresh_bm25()

    async def aadd_documents(
        self,
        documents: list[Document],
        ids: list[str] | None = None,
        add_to_docstore: bool = True,
        **kwargs: Any,
    ) -> None:
        """Async :meth:`add_documents` (the write runs in an executor)."""
        await run_in_executor(None, self.add_documents, documents, ids, add_to_docstore)

    def delete(self, ids: Sequence[str]) -> None:
        """Remove cards: their children and their parent records."""
        delete_documents(self.collections, self.docstore, ids)
        self._refresh_bm25()

    @property
    def collections(self) -> Collections:
        """The collections this retriever reads and writes."""
        return Collections(self.vectorstore, self.card_rows_store, self.restricted_store)

    @property
    def rows(self) -> RowReader:
        """What this retriever reads: the index's rows, as its caller may see them."""
        return RowReader(self.collections, self.allow_restricted, self.id_key)

    def _refresh_bm25(self) -> None:
        """Rebuild BM25 from the collections after a write (bm25s indexes are static)."""
        if self.bm25 is not None:
            self.bm25 = BM25Index.from_collections(
                self.collections.with_children(), stemmed=self.bm25.stemmed
            )
