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
(``hybrid``), with whole-card rows and with sentence rows (reciprocal rank fusion).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.runnables.config import run_in_executor

from cardrag.ingest import metadata as md
from cardrag.ingest.index.layout import is_chroma, merge_filters
from cardrag.ingest.index.manifest import ranked_rows
from cardrag.ingest.settings import Settings
from cardrag.ingest.splitter import CardSplitter
from cardrag.retrievers.bm25 import known_share
from cardrag.retrievers.bm25 import reads as bm25_reads
from cardrag.retrievers.bm25 import rows_of as bm25_rows
from cardrag.retrievers.bm25 import search as bm25_search
from cardrag.retrievers.budget import Rankings, budgeted, matched_children
from cardrag.retrievers.candidates import (
    best_rows,
    card_rows_of,
    first_fetch,
    next_fetch,
    no_card_rows,
    resolve,
    without_card_row,
)
from cardrag.retrievers.child_hit import ChildHit
from cardrag.retrievers.expansion import finish, parent_document, take
from cardrag.retrievers.fusion import (
    FusionWeights,
    ParentHit,
    best_per_parent,
    lexical_weight,
    rank_parents,
)
from cardrag.retrievers.hits import RowReader
from cardrag.retrievers.indexing import IndexedParents
from cardrag.retrievers.reads import at_once, beside, in_turn, nothing
from cardrag.retrievers.rerank import reranker_from
from cardrag.retrievers.stores import (
    Reader,
    StoreFilter,
    StoreReader,
    combine_filters,
    filter_problem,
    store_embeddings,
)

if TYPE_CHECKING:
    from cardrag.ingest.index import Index
    from cardrag.ingest.index.collections import Collections

logger = logging.getLogger(__name__)


class _Gate(enum.Enum):
    """A call's ``min_similarity`` left out: the retriever's own gate (``None``: no gate)."""

    OWN = "own"


class ScoredParentDocumentRetriever(IndexedParents):
    """Return ``k`` distinct parents ranked by their best child, with scores.

    Built as LangChain's ``ParentDocumentRetriever`` is (any vector store, any
    ``TextSplitter``, documents from any loader), or over an index ``cardrag ingest`` built
    (:meth:`from_index`).

    How many come back: ``k`` is an upper bound. Exactly ``k`` distinct parents whenever that
    many pass the filters (``filter``, restricted cards) and ``min_similarity``, else every one
    that passes, best first, or none: a caller that answers from what it gets is never handed
    a parent the gate judged unrelated. ``min_similarity=None`` per call ranks without the gate.

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

    @classmethod
    def from_index(
        cls, index: Index, settings: Settings, **overrides: Any
    ) -> ScoredParentDocumentRetriever:
        """The retriever over an opened index, configured from settings.

        BM25 is used when ``settings.hybrid`` is on and the index has one; card rows and
        sentence rows when the settings and the corpus say so
        (:func:`~cardrag.ingest.index.manifest.ranked_rows`).
        """
        card_rows, sentence_rows = ranked_rows(settings, index.manifest)
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
            "card_rows": card_rows,
            "dense_weight": settings.dense_weight,
            "card_weight": settings.card_weight,
            "sentence_rows": sentence_rows,
            "sentence_weight": settings.sentence_weight,
            "bm25_weight": settings.bm25_weight,
            "rrf_c": settings.rrf_c,
            "adaptive_fusion": settings.adaptive_fusion,
            "reranker": reranker_from(settings),
            "rerank_candidates": settings.rerank_candidates,
            "candidate_parents": settings.candidate_parents,
        }
        return cls.over(index.collections, **{**values, **overrides})

    @classmethod
    def over(cls, collections: Collections, **fields: Any) -> ScoredParentDocumentRetriever:
        """A retriever reading and writing an index's collections (``fields`` as the class's)."""
        return cls(
            vectorstore=collections.children,
            card_rows_store=collections.cards,
            restricted_store=collections.restricted,
            sentence_rows_store=collections.sentences,
            **{"id_key": md.PARENT_ID, **fields},
        )

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
        lexical_on = (self.bm25 is not None and self.bm25_weight != 0) and (
            is_chroma(self.vectorstore) or where is None
        )
        # sentence rows, as BM25, abstain for a question surely in a language no card is in
        sentences_on = self.sentence_rows and (self.bm25 is None or bm25_reads(self.bm25, query))
        # the reader, where the sentence ranking is each candidate's best sentence (large index)
        by_parent = rows if isinstance(rows, RowReader) and sentences_on else None
        by_parent = by_parent if by_parent and by_parent.sentences_by_parent(where) else None
        weights = self._weights(query)  # the question's, whatever the window
        # the first window is the same for any k up to candidate_parents: so are the first cards
        fetch = first_fetch(
            max(pool, self.candidate_parents), self.fetch_multiplier, self.max_fetch
        )
        records: dict[str, Document | None] = {}  # the docstore's, read once a question
        while True:
            # the rankings' windows of the same size: children, card rows, sentence rows, BM25;
            # Chroma's queries on the pool, BM25 and scans here meanwhile
            hits, cards, sentences, lexical_hits = self._reads(rows, where)(
                partial(rows.nearest, vector, fetch, where, kind="child"),
                partial(rows.nearest, vector, fetch, where, kind="card")
                if self.card_rows
                else nothing,
                partial(rows.nearest, vector, fetch, where, kind="sentence")
                if sentences_on and not by_parent
                else nothing,
                partial(self._lexical, query, fetch) if lexical_on else nothing,
            )
            lexical = best_per_parent(lexical_hits)
            windows = {h.parent_id for h in [*hits, *cards]}
            # parents only BM25 or a sentence row found: their children and card rows are read
            found = [*(p.parent_id for p in lexical), *(h.parent_id for h in sentences)]
            candidates = [*(h.parent_id for h in hits), *found]
            rows_of = self._rows_of if isinstance(rows, RowReader) else best_rows(lexical)
            # a large index: the candidates' best sentences, else a window of all
            parents = [*candidates, *windows]
            by_parent_read, asked = (
                by_parent.sentences_of(vector, parents, fetch) if by_parent else (nothing, False)
            )
            settle = self._reads(rows, where, by_id=True, asked=asked)
            extra, (more, no_row), by_parent_sentences = settle(
                partial(resolve, rows, vector, windows, found, rows_of, where),
                partial(card_rows_of, rows, vector, candidates, windows, cards, where)
                if self.card_rows
                else no_card_rows,
                by_parent_read,
            )
            dense = without_card_row([*hits, *extra], no_row)
            cards = [*cards, *more]
            sentences = by_parent_sentences if by_parent is not None else sentences
            ranked = rank_parents(
                [*dense, *cards, *sentences],
                lexical,
                min_similarity=floor,
                weights=weights,
                c=self.rrf_c,
                adaptive=self.adaptive_fusion,
            )
            chosen, missing = self._select(ranked, pool, records)
            fetch_more = next_fetch(hits, fetch, self.max_fetch, len(chosen), pool, floor)
            if fetch_more is None:
                docs = self._documents(rows, chosen, [dense, lexical_hits], query)
                return finish(docs, missing)[:want]
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

    def _weights(self, query: str) -> FusionWeights:
        """The rankings' weights for one question: BM25's by the share of its words it knows."""
        bm25 = self.bm25_weight
        if self.adaptive_fusion and self.bm25 is not None:
            bm25 = lexical_weight(bm25, known_share(self.bm25, query))
        return FusionWeights(self.dense_weight, self.card_weight, bm25, self.sentence_weight)

    def _lexical(self, query: str, n: int) -> list[ChildHit]:
        """BM25's ``n`` best children, the same window as the dense ones (empty without BM25)."""
        if self.bm25 is None:  # lexical_on asks only with BM25 on: a guard for the type
            return []
        hits = bm25_search(self.bm25, query, n, allow_restricted=self.allow_restricted)
        return [ChildHit(c, p, s, complete=False) for c, p, s in hits]  # text read if shown

    def _rows_of(self, parent_ids: Sequence[str]) -> list[str]:
        """The child ids of the given parents (BM25 indexes every child row)."""
        return bm25_rows(self.bm25, parent_ids) if self.bm25 is not None else []

    def _reader(self, query: str) -> Reader:
        """What this retriever reads for one question: Chroma's rows, or any store's."""
        if is_chroma(self.vectorstore):
            return self.rows.for_question()
        return StoreReader(self.vectorstore, self._embeddings, self.id_key, query)

    def _select(
        self, ranked: Sequence[ParentHit], k: int, records: dict[str, Document | None]
    ) -> tuple[list[tuple[ParentHit, Document]], list[str]]:
        """The first ``k`` ranked parents that exist and may be shown (:func:`take`)."""
        may_see = {"allow_restricted": self.allow_restricted, "allow_internal": self.allow_internal}
        return take(ranked, k, records, self.docstore.mget, **may_see)

    def _reads(
        self, rows: Reader, where: StoreFilter | None, *, by_id: bool = False, asked: bool = False
    ) -> Any:
        """How a step's reads run: the windows, or (``by_id``) the reads by id and sentences.

        Chroma's queries on the pool, beside the scans, BM25 and the Python around them, which
        hold the GIL and run here meanwhile (:func:`~cardrag.retrievers.reads.beside`);
        ``asked``: the by-id step's sentence ranking is a query. Another store's reads at once.
        """
        if not self.concurrent_reads:
            return in_turn
        if not isinstance(rows, RowReader) or callable(where):
            return at_once
        if by_id:
            return beside([*rows.by_id_reads(where), asked])
        return beside([*rows.window_queries(where), False])

    def _documents(
        self,
        rows: Reader,
        chosen: Sequence[tuple[ParentHit, Document]],
        matches: Rankings,
        query: str,
    ) -> list[Document]:
        """The returned documents: matched rows read, a budget's cut, the reranker's order last."""
        budget = self.max_parent_chars is not None or self.max_context_chars is not None
        matched = matched_children(matches, [hit for hit, _ in chosen]) if budget else []
        read = rows.complete([*(hit.best for hit, _ in chosen), *matched])
        docs = [
            parent_document(replace(hit, best=b), record)
            for (hit, record), b in zip(chosen, read[: len(chosen)], strict=True)
        ]
        limits = (self.max_parent_chars, self.max_context_chars)
        docs = budgeted(docs, *limits, read[len(docs) :], query)
        if self.reranker is not None and docs:
            docs = list(self.reranker.compress_documents(docs, query))
        return docs

    def _floor(self, per_call: float | _Gate | None) -> float | None:
        return self.similarity_gate if isinstance(per_call, _Gate) else per_call

    @property
    def _embeddings(self) -> Any:
        return store_embeddings(self.vectorstore)

    def _where(self, per_call: StoreFilter | None) -> StoreFilter | None:
        given = (self.filter, self.search_kwargs.get("filter"), per_call)
        if problem := filter_problem(self.vectorstore, per_call):  # the others: at construction
            raise ValueError(problem)
        if is_chroma(self.vectorstore):
            return merge_filters(*(f for f in given if isinstance(f, dict)))
        return combine_filters(*given)

    @property
    def rows(self) -> RowReader:
        """What this retriever reads from Chroma: the index's rows, as its caller may see them."""
        return RowReader(self.collections, self.allow_restricted, self.id_key, self.row_vectors)
