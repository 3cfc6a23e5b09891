"""The scored parent-document retriever: search small children, return k whole parents.

A drop-in for LangChain's ``ParentDocumentRetriever``: the same fields with the same meaning
(``vectorstore``, ``docstore`` or ``byte_store``, ``child_splitter``, ``parent_splitter``,
``id_key``, ``child_metadata_fields``, ``search_kwargs``, ``search_type``), over any LangChain
vector store and any documents. What it adds: k counts parents, not children; every parent
carries the similarity of its best child and which child matched; a ``min_similarity`` gate
(``search_type="similarity_score_threshold"`` sets it); per-call filters; deterministic child
ids, so re-adding a parent replaces its children and ``delete`` removes them; a
``DocumentIndex``, so LangChain's indexing API keeps parents and children in step. Optionally
it fuses, at the parent level, the dense ranking with a BM25 ranking of the same children
(``hybrid``) and with whole-card rows (reciprocal rank fusion).
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
from langchain_core.indexing.base import DeleteResponse, DocumentIndex, UpsertResponse
from langchain_core.runnables.config import run_in_executor
from langchain_core.stores import ByteStore
from langchain_core.vectorstores import VectorStore
from langchain_text_splitters import TextSplitter
from pydantic import Field, model_validator

from cardrag.ingest import documents as split
from cardrag.ingest import metadata as md
from cardrag.ingest.index import Collections, Index, delete_documents, upsert_documents
from cardrag.ingest.index.collections import merge_filters
from cardrag.ingest.index.search import ChildHit, RowReader
from cardrag.ingest.index.vectors import RowVectors
from cardrag.ingest.lexical import BM25Index
from cardrag.ingest.settings import Settings, default
from cardrag.ingest.splitter import CardSplitter
from cardrag.retrievers.candidates import (
    best_rows,
    card_rows_of,
    first_fetch,
    next_fetch,
    resolve,
    without_card_row,
)
from cardrag.retrievers.expansion import finish, parent_document, select
from cardrag.retrievers.fields import field_problems
from cardrag.retrievers.fusion import FusionWeights, ParentHit, best_per_parent, rank_parents
from cardrag.retrievers.rerank import reranker_from
from cardrag.retrievers.stores import (
    Reader,
    StoreFilter,
    StoreReader,
    combine_filters,
    store_embeddings,
)

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


BM25_PREFIX = "cardrag-bm25/"
"""Key prefix of a hybrid retriever's BM25 files in its ``bm25_store``."""


class ScoredParentDocumentRetriever(ParentDocumentRetriever, DocumentIndex):
    """Return ``k`` distinct parents ranked by their best child, with scores.

    Built as LangChain's ``ParentDocumentRetriever`` is (any vector store, any
    ``TextSplitter``, documents from any loader), or over an index ``cardrag ingest`` built
    (:meth:`from_index`).

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
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> from langchain_core.stores import InMemoryStore
        >>> from langchain_core.vectorstores import InMemoryVectorStore
        >>> from langchain_text_splitters import RecursiveCharacterTextSplitter
        >>> retriever = ScoredParentDocumentRetriever(
        ...     vectorstore=InMemoryVectorStore(DeterministicFakeEmbedding(size=16)),
        ...     docstore=InMemoryStore(),
        ...     child_splitter=RecursiveCharacterTextSplitter(chunk_size=20, chunk_overlap=0),
        ...     k=1,
        ... )
        >>> retriever.add_documents([Document("Tea is a drink."), Document("Rice is a grain.")],
        ...                         ids=["tea", "rice"])
        >>> [(d.id, d.metadata["score"]) for d in retriever.invoke("Rice is a grain.")]
        [('rice', 1.0)]
    """

    vectorstore: VectorStore
    """The children's vector store: Chroma (the fast path: lean reads, whole-card rows, the
    restricted collection) or any other LangChain ``VectorStore``."""
    card_rows_store: Chroma | None = None
    """The whole-card rows' own collection (as ``cardrag ingest`` builds it); None: card rows,
    if any, share ``vectorstore`` and a ``chunk_index`` filter tells the kinds apart."""
    restricted_store: Chroma | None = None
    """The restricted cards' own collection, searched only with ``allow_restricted``; None:
    their rows share the other collections and a ``sensitivity`` filter in the query excludes
    them."""
    child_splitter: TextSplitter = Field(default_factory=CardSplitter)
    """Splits parents into children on ``add_documents`` (any ``TextSplitter``; the default
    :class:`~cardrag.ingest.splitter.CardSplitter` overlaps on word boundaries, puts a
    ``title`` on the first child and records every child's offsets)."""
    id_key: str = "doc_id"
    """Child metadata key holding the parent's id (LangChain's default; an index ``cardrag
    ingest`` built uses ``parent_id``)."""
    k: int = Field(default=default("k"), ge=1)
    """Distinct parents to return (``search_kwargs["k"]`` sets it too)."""
    fetch_multiplier: int = Field(default=default("fetch_multiplier"), ge=1)
    """The first search fetches ``k * fetch_multiplier`` children."""
    max_fetch: int = Field(default=default("max_fetch"), ge=1)
    """Upper bound on children fetched for one question (the window doubles up to it)."""
    min_similarity: float | None = None
    """Drop parents whose best child similarity is below this; ``None`` keeps all
    (``search_kwargs["score_threshold"]`` sets it too). The calibrated value depends on the
    embedding model: :meth:`from_index` sets ``Settings.effective_min_similarity``."""
    filter: StoreFilter | None = None
    """A filter always applied, in the store's own form (a Chroma ``where``, a callable for
    ``InMemoryVectorStore``), combined with ``search_kwargs["filter"]`` and any per-call one."""
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
    hybrid: bool = False
    """Fuse BM25 over the children with the dense ranking. Without ``bm25`` the retriever makes
    one (read from ``bm25_store``, else from a Chroma store's rows, else empty) and keeps it
    in step with ``add_documents`` and ``delete``."""
    bm25_store: ByteStore | None = None
    """Where a hybrid retriever keeps its BM25 index across processes (any ``ByteStore``, keys
    under ``cardrag-bm25/``); None: in memory, rebuilt from the rows of a Chroma store."""
    row_vectors: RowVectors | None = None
    """The children collection's vectors as an ingest saved them beside the index
    (:mod:`cardrag.ingest.index.vectors`): the rows of parents only BM25 found are scored from
    them instead of read from Chroma (the same scores, a fraction of the cost for long parents).
    Set by :meth:`from_index`; dropped by any write through the retriever."""
    dense_weight: float = Field(default=default("dense_weight"), ge=0)
    """RRF weight of the dense best-child ranking."""
    card_weight: float = Field(default=default("card_weight"), ge=0)
    """RRF weight of the whole-card rows' ranking (used only where the index has card rows)."""
    bm25_weight: float = Field(default=default("bm25_weight"), ge=0)
    """RRF weight of the BM25 ranking (used only when ``bm25`` is set)."""
    rrf_c: int = Field(default=default("rrf_c"), ge=1)
    """The ``c`` of reciprocal rank fusion: larger flattens the difference between ranks."""
    adaptive_fusion: bool = default("adaptive_fusion")
    """Fusion that follows the question: a ranking's weight grows with its first parent's
    lead, and the parent BM25 and a dense ranking both put first goes first (False: plain weighted
    RRF)."""
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
            "id_key": md.PARENT_ID,
            "child_splitter": CardSplitter.from_settings(settings),
            "k": settings.k,
            "fetch_multiplier": settings.fetch_multiplier,
            "max_fetch": settings.max_fetch,
            "concurrent_reads": settings.concurrent_reads,
            "min_similarity": settings.effective_min_similarity,
            "bm25": index.bm25 if settings.hybrid else None,
            "row_vectors": index.vectors,
            "card_rows": settings.uses_card_rows,
            "dense_weight": settings.dense_weight,
            "card_weight": settings.card_weight,
            "bm25_weight": settings.bm25_weight,
            "rrf_c": settings.rrf_c,
            "adaptive_fusion": settings.adaptive_fusion,
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
            **{"id_key": md.PARENT_ID, **fields},
        )

    @model_validator(mode="after")
    def _check_fields(self) -> ScoredParentDocumentRetriever:
        """Refuse what cannot be honoured, with the reason; make the hybrid BM25 index."""
        problems = field_problems(self)
        if problems:
            raise ValueError("; ".join(problems))
        if self.max_fetch < self._k:
            msg = f"max_fetch ({self.max_fetch}) must be at least k ({self._k})"
            raise ValueError(msg)
        if self.hybrid and self.bm25 is None:
            self.bm25 = self._open_bm25()
        return self

    def _open_bm25(self) -> BM25Index:
        """The hybrid retriever's BM25: saved in ``bm25_store``, or over Chroma's rows, or new."""
        if self.bm25_store is not None:
            saved = BM25Index.load_from(self.bm25_store, BM25_PREFIX)
            if saved is not None:
                return saved
        if isinstance(self.vectorstore, Chroma):
            return BM25Index.from_collections(
                self.collections.with_children(), id_key=self.id_key, keep_texts=True
            )
        return BM25Index.build([], [], [], keep_texts=True)

    # -- retrieval ----------------------------------------------------------------------------

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        filter: StoreFilter | None = None,
        k: int | None = None,
        min_similarity: float | _Gate | None = _Gate.OWN,
    ) -> list[Document]:
        """Per-call ``filter`` (in the store's form), ``k`` and ``min_similarity`` add to fields.

        ``min_similarity=None`` ranks without the gate; left out, the field applies.
        """
        want, floor, where = k or self._k, self._floor(min_similarity), self._where(filter)
        pool = max(want, self.rerank_candidates) if self.reranker is not None else want
        vector = self._embeddings.embed_query(query)
        rows = self._reader(query)
        # another store's filter cannot be applied to BM25's candidates: dense only then
        lexical_on = isinstance(self.vectorstore, Chroma) or where is None
        fetch = first_fetch(pool, self.fetch_multiplier, self.max_fetch)
        records: dict[str, Document | None] = {}  # the docstore's, read once a question
        scanned = (
            isinstance(rows, RowReader)
            and not callable(where)
            and rows.scans(where, card_rows=self.card_rows)
        )
        together = _in_turn if scanned else self._together
        while True:
            # the three rankings' windows of the same size: children, card rows, BM25
            hits, cards, lexical_hits = together(
                partial(rows.nearest, vector, fetch, where, card_rows=False),
                partial(rows.nearest, vector, fetch, where, card_rows=True)
                if self.card_rows
                else list,
                partial(self._lexical, query, fetch) if lexical_on else list,
            )
            lexical = best_per_parent(lexical_hits)
            windows = {h.parent_id for h in [*hits, *cards]}
            candidates = [*(h.parent_id for h in hits), *(p.parent_id for p in lexical)]
            rows_of = self._rows_of if isinstance(rows, RowReader) else best_rows(lexical)
            extra, (more, no_row) = together(
                partial(resolve, rows, vector, windows, lexical, rows_of, where),
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
                adaptive=self.adaptive_fusion,
            )
            chosen, missing = self._select(ranked, pool, records)
            fetch_more = next_fetch(hits, fetch, self.max_fetch, len(chosen), pool, floor)
            if fetch_more is None:
                docs = finish(self._documents(rows, chosen), missing)
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

    def _reader(self, query: str) -> Reader:
        """What this retriever reads for one question: Chroma's rows, or any store's."""
        if isinstance(self.vectorstore, Chroma):
            return self.rows
        return StoreReader(self.vectorstore, self._embeddings, self.id_key, query)

    def _select(
        self, ranked: Sequence[ParentHit], k: int, records: dict[str, Document | None]
    ) -> tuple[list[tuple[ParentHit, Document]], list[str]]:
        """The first ``k`` ranked parents that exist and may be shown, with their records.

        Reads only the records not read yet (``records``, kept across one question's windows),
        a slice at a time (each read opens files or makes a round trip).
        """
        chosen: list[tuple[ParentHit, Document]] = []
        missing: list[str] = []
        start = 0
        while len(chosen) < k and start < len(ranked):
            part = ranked[start : start + k - len(chosen)]
            unread = [p.parent_id for p in part if p.parent_id not in records]
            if unread:
                records.update(zip(unread, self.docstore.mget(unread), strict=True))
            more, gone = select(
                part,
                [records[p.parent_id] for p in part],
                k - len(chosen),
                allow_restricted=self.allow_restricted,
                allow_internal=self.allow_internal,
            )
            chosen += more
            missing += gone
            start += len(part)
        return chosen, missing

    def _documents(
        self, rows: Reader, chosen: Sequence[tuple[ParentHit, Document]]
    ) -> list[Document]:
        """The returned documents, with their matched rows' text and metadata read (one read)."""
        best = rows.complete([hit.best for hit, _ in chosen])
        return [
            parent_document(replace(hit, best=b), record)
            for (hit, record), b in zip(chosen, best, strict=True)
        ]

    def _floor(self, per_call: float | _Gate | None) -> float | None:
        return self.similarity_gate if isinstance(per_call, _Gate) else per_call

    @property
    def _k(self) -> int:
        """Parents to return: ``search_kwargs["k"]`` where given, else ``k``."""
        return int(self.search_kwargs.get("k", self.k))

    @property
    def similarity_gate(self) -> float | None:
        """The gate a call without ``min_similarity`` applies (None: no gate).

        ``search_kwargs["score_threshold"]`` where given, else ``min_similarity``.
        """
        threshold = self.search_kwargs.get("score_threshold", self.min_similarity)
        return None if threshold is None else float(threshold)

    @property
    def _embeddings(self) -> Any:
        return store_embeddings(self.vectorstore)

    def _where(self, per_call: StoreFilter | None) -> StoreFilter | None:
        given = (self.filter, self.search_kwargs.get("filter"), per_call)
        if isinstance(self.vectorstore, Chroma):
            if any(callable(f) for f in given):
                msg = "Chroma takes a `where` dict as filter, not a callable"
                raise ValueError(msg)
            return merge_filters(*(f for f in given if isinstance(f, dict)))
        return combine_filters(*given)

    # -- writing ------------------------------------------------------------------------------

    def add_documents(
        self,
        documents: list[Document],
        ids: list[str] | None = None,
        add_to_docstore: bool = True,
        **kwargs: Any,
    ) -> None:
        """Add parents (and their children) as ``ParentDocumentRetriever`` does; re-adding replaces.

        Each parent's id is ``ids[i]``, else its ``Document.id``, else a new uuid. With a
        ``parent_splitter`` each document is cut into sections first, ``{id}-01``, ``{id}-02``,
        ... (or, as LangChain allows, ``ids`` name the sections one for one). Children get
        deterministic ids ``{parent id}::{NN}`` and ``id_key``; the children a re-added parent
        no longer has, and the sections a re-added document no longer has, are deleted.

        Args:
            documents: Parent documents, from any loader.
            ids: Their ids (optional).
            add_to_docstore: False writes only the children (the parents are in the docstore
                already); then every parent needs an id.
            **kwargs: Passed to the vector store's ``add_documents``.
        """
        parents, replaced = self._parents(documents, ids, add_to_docstore=add_to_docstore)
        stale = [s for s in replaced if s not in {p.id for p in parents}]
        if stale:
            delete_documents(self._target, self.docstore, stale, self.id_key)
        children = split.child_documents(
            parents,
            self.child_splitter,
            id_key=self.id_key,
            child_metadata_fields=self.child_metadata_fields,
        )
        written = upsert_documents(
            self._target,
            self.docstore,
            self.child_splitter,
            parents,
            children=children,
            id_key=self.id_key,
            add_to_docstore=add_to_docstore,
            **kwargs,
        )
        self._keep_in_step([*stale, *(str(p.id) for p in parents)], written)

    async def aadd_documents(
        self,
        documents: list[Document],
        ids: list[str] | None = None,
        add_to_docstore: bool = True,
        **kwargs: Any,
    ) -> None:
        """Async :meth:`add_documents` (the write runs in an executor)."""
        body = partial(self.add_documents, documents, ids, add_to_docstore, **kwargs)
        await run_in_executor(None, body)

    def upsert(self, items: Sequence[Document], /, **kwargs: Any) -> UpsertResponse:
        """Add or replace parents by their ``id`` (a new uuid where they have none).

        The ``DocumentIndex`` write that LangChain's indexing API calls
        (``langchain_core.indexing.index``): a replaced parent's old children are deleted.
        """
        ids = split.parent_ids(list(items), None)
        self.add_documents(list(items), ids=ids, **kwargs)
        return {"succeeded": ids, "failed": []}

    def get(self, ids: Sequence[str], /, **kwargs: Any) -> list[Document]:
        """The stored parents with these ids (with a ``parent_splitter``: a document's sections).

        Missing ids are skipped; the order is that of ``ids``.
        """
        found = self._stored(ids)
        return [doc for _, docs in found for doc in docs]

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> DeleteResponse:
        """Remove parents with their children (a document's id removes all its sections).

        Raises:
            ValueError: without ``ids`` (nothing is deleted by default).
        """
        if ids is None:
            msg = "delete() needs the ids of the parents to remove"
            raise ValueError(msg)
        found = self._stored(ids)
        parents = list(dict.fromkeys([*ids, *(str(d.id) for _, docs in found for d in docs)]))
        delete_documents(self._target, self.docstore, parents, self.id_key)
        self._keep_in_step(parents, [])
        done = [i for i, docs in found if docs]
        return {"num_deleted": len(done), "succeeded": done, "num_failed": 0, "failed": []}

    def _parents(
        self, documents: Sequence[Document], ids: Sequence[str] | None, *, add_to_docstore: bool
    ) -> tuple[list[Document], list[str]]:
        """The parents to write (ids set) and the sections they replace."""
        if not add_to_docstore and ids is None and not all(d.id for d in documents):
            msg = "If IDs are not passed in, `add_to_docstore` MUST be True"
            raise ValueError(msg)
        if self.parent_splitter is None:
            return split.with_ids(documents, split.parent_ids(documents, ids)), []
        if ids is not None and len(ids) != len(documents):  # LangChain's: one id per section
            pieces = self.parent_splitter.split_documents(list(documents))
            return split.with_ids(pieces, split.parent_ids(pieces, ids)), []
        names = split.parent_ids(documents, ids)
        before = [str(d.id) for _, docs in self._stored(names) for d in docs]
        return split.sections(documents, names, self.parent_splitter), before

    def _stored(self, ids: Sequence[str]) -> list[tuple[str, list[Document]]]:
        """Each id with its stored parents: its own record, else its sections' records."""
        records = self.docstore.mget(list(ids))
        out: list[tuple[str, list[Document]]] = []
        for doc_id, record in zip(ids, records, strict=True):
            if record is not None:
                out.append((doc_id, [split.with_ids([record], [doc_id])[0]]))
            elif self.parent_splitter is not None:
                out.append((doc_id, split.stored_sections(self.docstore, doc_id)))
            else:
                out.append((doc_id, []))
        return out

    def _keep_in_step(self, removed: Sequence[str], written: Sequence[Document]) -> None:
        """Keep BM25 in step with a write: rows of ``removed`` parents gone, ``written`` in.

        The saved row vectors (``row_vectors``) describe the rows before the write: dropped.
        """
        self.row_vectors = None
        if self.bm25 is None:
            return
        if self.bm25.texts is not None:
            rows = [(str(d.id), d.page_content, d.metadata) for d in written]
            self.bm25 = self.bm25.updated(removed, rows, id_key=self.id_key)
        elif isinstance(self.vectorstore, Chroma):  # an ingest's index: rebuilt from its rows
            self.bm25 = BM25Index.from_collections(
                self.collections.with_children(), stemmed=self.bm25.stemmed, id_key=self.id_key
            )
        if self.bm25_store is not None:
            self.bm25.save_to(self.bm25_store, BM25_PREFIX)

    @property
    def _target(self) -> VectorStore | Collections:
        """Where children are written: the index's collections (Chroma), or the store."""
        return self.collections if isinstance(self.vectorstore, Chroma) else self.vectorstore

    @property
    def collections(self) -> Collections:
        """The Chroma collections this retriever reads and writes.

        Raises:
            TypeError: when the vector store is not Chroma.
        """
        if not isinstance(self.vectorstore, Chroma):
            msg = f"{type(self.vectorstore).__name__} is not Chroma: it has no collections"
            raise TypeError(msg)
        return Collections(self.vectorstore, self.card_rows_store, self.restricted_store)

    @property
    def rows(self) -> RowReader:
        """What this retriever reads from Chroma: the index's rows, as its caller may see them."""
        return RowReader(self.collections, self.allow_restricted, self.id_key, self.row_vectors)


def _in_turn(*reads: Callable[[], Any]) -> list[Any]:
    """Run reads one after the other.

    For reads that hold the GIL (scans of saved vectors, BM25): run at once, they only wait
    for each other.
    """
    return [read() for read in reads]
