"""The scored parent-document retriever: search small children, return k whole parent cards.

What it fixes in LangChain's ``ParentDocumentRetriever``: k counts parents, not children;
every parent carries the similarity of its best child and which child matched; a
``min_similarity`` gate; per-call Chroma filters; deterministic child ids, so re-adding a
card replaces its rows. Optionally it fuses, at the parent level, the dense ranking with a
BM25 ranking of the same children and with whole-card rows (reciprocal rank fusion).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
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
from pydantic import Field, PrivateAttr, model_validator

from cardrag.ingest import metadata as md
from cardrag.ingest.index import Collections, Index, delete_documents, upsert_documents
from cardrag.ingest.index.collections import Where, merge_filters
from cardrag.ingest.lexical import BM25Index
from cardrag.ingest.settings import Settings, default
from cardrag.ingest.splitter import CardSplitter
from cardrag.retrievers.fusion import (
    ChildHit,
    FusionWeights,
    ParentHit,
    best_per_parent,
    rank_parents,
)
from cardrag.retrievers.scoring import collection_space, cosine_similarities, distance_to_similarity

logger = logging.getLogger(__name__)


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
    without the gate.

    Example:
        >>> from cardrag.ingest.embeddings import load_embeddings   # doctest: +SKIP
        >>> from cardrag.ingest.index import open_index
        >>> from cardrag.ingest.settings import Settings, default
        >>> settings = Settings()
        >>> model = settings.embedding_model
        >>> index = open_index(settings.store_dir, load_embeddings(model), model)
        >>> retriever = ScoredParentDocumentRetriever(
        ...     vectorstore=index.vectorstore, docstore=index.docstore, k=3)
        >>> docs = retriever.invoke("Can I take it with food?",
        ...                         filter={"topics": {"$contains": "food-timing"}})
        >>> [(d.id, round(d.metadata["score"], 2)) for d in docs]
        [('card-...', 0.6...), ...]
    """

    vectorstore: Chroma
    """The children collection (Chroma, with its declared distance space)."""
    card_store: Chroma | None = None
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
    _space: str | None = PrivateAttr(default=None)

    @classmethod
    def from_index(
        cls, index: Index, settings: Settings, **overrides: Any
    ) -> ScoredParentDocumentRetriever:
        """The retriever over an opened index, configured from settings.

        BM25 is used when ``settings.hybrid`` is on and the index has one; card rows are used
        when ``settings.card_vector`` is on (otherwise filtered out of the query).
        """
        values: dict[str, Any] = {
            "docstore": index.docstore,
            "child_splitter": CardSplitter.from_settings(settings),
            "k": settings.k,
            "fetch_multiplier": settings.fetch_multiplier,
            "max_fetch": settings.max_fetch,
            "min_similarity": settings.effective_min_similarity,
            "bm25": index.bm25 if settings.hybrid else None,
            "card_rows": settings.card_rows,
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
            card_store=collections.cards,
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
        min_similarity: float | None = None,
    ) -> list[Document]:
        """Per-call ``filter`` (Chroma ``where``), ``k`` and ``min_similarity`` override fields."""
        want, floor, where = k or self.k, self._floor(min_similarity), self._where(filter)
        pool = max(want, self.rerank_candidates) if self.reranker is not None else want
        vector = self._embeddings.embed_query(query)
        lexical_hits = self._lexical(query)
        fetch = first_fetch(pool, self.fetch_multiplier, self.max_fetch)
        while True:
            # each ranking gets its own window of the same size: children, card rows, BM25
            hits = self._search_rows(vector, fetch, where, cards=False)
            cards = self._search_rows(vector, fetch, where, cards=True) if self.card_rows else []
            lexical = best_per_parent(lexical_hits[:fetch])
            extra = self._resolve(vector, [*hits, *cards], lexical, where, fetch)
            ranked = rank_parents(
                [*hits, *cards, *extra],
                lexical,
                min_similarity=floor,
                weights=self._weights,
                c=self.rrf_c,
            )
            docs, missing = self._expand(ranked, pool)
            fetch_more = next_fetch(hits, fetch, self.max_fetch, len(docs), pool, floor)
            if fetch_more is None:
                docs = finish(docs, missing)
                if self.reranker is not None and docs:
                    docs = list(self.reranker.compress_documents(docs, query))
                return docs[:want]
            fetch = fetch_more

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        filter: Where | None = None,
        k: int | None = None,
        min_similarity: float | None = None,
    ) -> list[Document]:
        """Run the sync body in an executor.

        Chroma's local client and the file store block anyway, and one body means the sync and
        async paths cannot drift apart.
        """
        body = partial(
            self._get_relevant_documents,
            query,
            run_manager=run_manager.get_sync(),
            filter=filter,
            k=k,
            min_similarity=min_similarity,
        )
        return await run_in_executor(None, body)

    @property
    def _weights(self) -> FusionWeights:
        return FusionWeights(dense=self.dense_weight, card=self.card_weight, bm25=self.bm25_weight)

    def _lexical(self, query: str) -> list[ChildHit]:
        """BM25 hits over the whole window the search may grow to (empty without BM25)."""
        if self.bm25 is None or self.bm25_weight == 0:
            return []
        hits = self.bm25.search(query, self.max_fetch, allow_restricted=self.allow_restricted)
        return [ChildHit(c, p, s) for c, p, s in hits]

    def _resolve(
        self,
        vector: list[float],
        hits: Sequence[ChildHit],
        lexical: Sequence[ParentHit],
        where: Where | None,
        fetch: int,
    ) -> list[ChildHit]:
        """Dense hits for parents BM25 found but the dense window did not.

        Their rows are read by parent id (``get``, an indexed lookup) and scored against the
        question here: a vector query restricted to a few parents costs Chroma far more than
        an unrestricted one (30 ms against 4 ms at 40,000 children). The read carries the same
        ``where`` and reads the same collections, so filters and the restricted exclusion
        apply to BM25 candidates too; it gives their dense similarity for the gate.
        """
        seen = {h.parent_id for h in hits}
        unknown = [p.parent_id for p in lexical if p.parent_id not in seen]
        if not unknown:
            return []
        only = merge_filters(where, {self.id_key: {"$in": unknown}})
        window = min(self.max_fetch, max(fetch, 4 * len(unknown)))
        found = self._read_rows(vector, window, only, cards=False)
        if self.card_rows:
            found += self._read_rows(vector, window, only, cards=True)
        return found

    def _read_rows(
        self, vector: list[float], window: int, where: Where | None, *, cards: bool
    ) -> list[ChildHit]:
        """The ``window`` rows of one kind matching ``where`` nearest the question.

        Read with ``get`` and scored exactly (no vector search).
        """
        hits: list[ChildHit] = []
        for store, only in self._queries(cards, where):
            rows = store.get(where=only, include=["embeddings", "metadatas", "documents"])
            scores = cosine_similarities(vector, rows["embeddings"])
            hits += [
                row_hit(str(row_id), meta or {}, text or "", score, self.id_key)
                for row_id, meta, text, score in zip(
                    rows["ids"], rows["metadatas"], rows["documents"], scores, strict=True
                )
            ]
        return nearest(hits, window)

    def _expand(self, ranked: Sequence[ParentHit], k: int) -> tuple[list[Document], list[str]]:
        """The first ``k`` ranked parents that exist and may be shown, read from the docstore.

        Reads only as many records as still needed, a slice at a time (each read opens files
        or makes a round trip).
        """
        docs: list[Document] = []
        missing: list[str] = []
        start = 0
        while len(docs) < k and start < len(ranked):
            part = ranked[start : start + k - len(docs)]
            records = self.docstore.mget([p.parent_id for p in part])
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

    def _floor(self, per_call: float | None) -> float | None:
        return self.min_similarity if per_call is None else per_call

    @property
    def _embeddings(self) -> Any:
        embeddings = self.vectorstore.embeddings
        if embeddings is None:
            msg = "the Chroma vector store needs an embedding_function"
            raise ValueError(msg)
        return embeddings

    def _where(self, per_call: Where | None) -> Where | None:
        return merge_filters(self.filter, per_call)

    def _queries(self, cards: bool, where: Where | None) -> list[tuple[Chroma, Where | None]]:
        """The (collection, filter) pairs that hold one kind of row: the index's row plan."""
        return self.collections.plan(
            cards=cards, where=where, allow_restricted=self.allow_restricted
        )

    def _search_rows(
        self, vector: list[float], fetch: int, where: Where | None, *, cards: bool
    ) -> list[ChildHit]:
        """The ``fetch`` nearest rows of one kind, over every collection that holds them."""
        hits = [
            h
            for store, f in self._queries(cards, where)
            for h in self._search(store, vector, fetch, f)
        ]
        return nearest(hits, fetch)

    def _search(
        self, store: Chroma, vector: list[float], fetch: int, where: Where | None
    ) -> list[ChildHit]:
        """One vector query: the ``fetch`` nearest rows of ``store`` with similarities."""
        if self._space is None:  # read once: the space is fixed when the collection is made
            self._space = collection_space(self.vectorstore)
        space = self._space
        results = store.similarity_search_by_vector_with_relevance_scores(
            vector, k=fetch, filter=where
        )
        return [
            row_hit(
                str(doc.id),
                doc.metadata,
                doc.page_content,
                distance_to_similarity(distance, space),
                self.id_key,
            )
            for doc, distance in results
        ]

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
        return Collections(self.vectorstore, self.card_store, self.restricted_store)

    def _refresh_bm25(self) -> None:
        """Rebuild BM25 from the collections after a write (bm25s indexes are static)."""
        if self.bm25 is not None:
            self.bm25 = BM25Index.from_collections(
                self.collections.with_children(), self.bm25.languages
            )


# -- pure helpers shared by the sync and async paths ------------------------------------------


def reranker_from(settings: Settings) -> BaseDocumentCompressor | None:
    """The cross-encoder reranker when ``settings.rerank`` is on (needs the ``rerank`` extra)."""
    if not settings.rerank:
        return None
    from cardrag.retrievers.rerank import CrossEncoderReranker, load_cross_encoder

    return CrossEncoderReranker(model=load_cross_encoder(settings.threads))


def first_fetch(k: int, multiplier: int, max_fetch: int) -> int:
    """Children to fetch first: ``k * multiplier``, capped at ``max_fetch``."""
    return min(k * multiplier, max_fetch)


def next_fetch(
    hits: Sequence[ChildHit],
    fetch: int,
    max_fetch: int,
    found: int,
    k: int,
    min_similarity: float | None,
) -> int | None:
    """The next, larger window, or ``None`` when fetching more cannot help.

    Stop when k parents were found, when the store returned fewer children than asked (it
    holds no more), when the window is already ``max_fetch``, or when the last child fetched
    is already below ``min_similarity`` (every further child scores lower still).
    """
    if found >= k or len(hits) < fetch or fetch >= max_fetch:
        return None
    if min_similarity is not None and hits and hits[-1].score < min_similarity:
        return None
    return min(fetch * 2, max_fetch)


def assemble(
    ranked: Sequence[ParentHit],
    parents: Sequence[Document | None],
    k: int,
    *,
    allow_restricted: bool,
    allow_internal: bool = False,
) -> tuple[list[Document], list[str]]:
    """Turn ranked parent hits and their docstore records into at most k scored documents.

    Cards the caller may not see (:func:`visible`) are skipped.

    Returns:
        The documents, and the ids of parents missing from the docstore (skipped).
    """
    docs: list[Document] = []
    missing: list[str] = []
    for hit, parent in zip(ranked, parents, strict=True):
        if parent is None:
            missing.append(hit.parent_id)
            continue
        sensitivity = str(parent.metadata.get(md.SENSITIVITY, "public"))
        if not visible(
            sensitivity, allow_internal=allow_internal, allow_restricted=allow_restricted
        ):
            continue  # restricted: defence in depth (the query excludes their rows already)
        docs.append(parent_document(hit, parent))
        if len(docs) == k:
            break
    return docs, missing


def visible(sensitivity: str, *, allow_internal: bool, allow_restricted: bool) -> bool:
    """Whether a card of this sensitivity may be shown to the caller.

    ``public`` cards to everyone; ``internal`` ones to staff (or a caller allowed restricted
    cards); ``restricted`` ones only to a caller allowed them. An unknown value is restricted.

    Example:
        >>> [visible(s, allow_internal=False, allow_restricted=False)
        ...  for s in ("public", "internal", "restricted", "secret")]
        [True, False, False, False]
        >>> visible("internal", allow_internal=True, allow_restricted=False)
        True
    """
    if sensitivity == "public":
        return True
    if sensitivity == "internal":
        return allow_internal or allow_restricted
    return allow_restricted


def parent_document(hit: ParentHit, parent: Document) -> Document:
    """The returned parent: card text, card metadata, score and matched-child provenance.

    When the matched child carries a sentence window, the parent also carries the window's
    range and its text as ``prompt_text``: what the model reads for this card. The ranking,
    the citation and the matched passage are the same either way.
    """
    child = hit.best
    window = sentence_window_of(child.metadata, parent.page_content)
    return Document(
        id=hit.parent_id,
        page_content=parent.page_content,
        metadata={
            **parent.metadata,
            md.PARENT_ID: hit.parent_id,
            md.CHUNK_INDEX: 0,
            md.SCORE: hit.score,
            md.MATCHED_CHILD_ID: child.child_id,
            md.MATCHED_CHILD_TEXT: child.text,
            md.MATCHED_START_INDEX: child.metadata.get(md.START_INDEX),
            md.MATCHED_END_INDEX: child.metadata.get(md.END_INDEX),
            **({md.FUSED_SCORE: hit.fused} if hit.fused is not None else {}),
            **window,
        },
    )


def sentence_window_of(child: dict[str, Any], body: str) -> dict[str, Any]:
    """The matched window's range and text, from a child's metadata (empty without one)."""
    start, end = child.get(md.WINDOW_START_INDEX), child.get(md.WINDOW_END_INDEX)
    if not isinstance(start, int) or not isinstance(end, int):
        return {}
    return {
        md.MATCHED_WINDOW_START_INDEX: start,
        md.MATCHED_WINDOW_END_INDEX: end,
        md.PROMPT_TEXT: body[start:end],
    }


def row_hit(
    child_id: str, metadata: dict[str, Any], text: str, score: float, id_key: str
) -> ChildHit:
    """One row of a collection, scored, as a hit of its parent (``metadata[id_key]``)."""
    return ChildHit(
        child_id=child_id,
        parent_id=str(metadata.get(id_key, "")),
        score=score,
        text=text,
        metadata=metadata,
    )


def nearest(hits: Sequence[ChildHit], n: int) -> list[ChildHit]:
    """The ``n`` most similar hits (hits of several collections merged), best first.

    Example:
        >>> nearest([ChildHit("a::00", "a", 0.2), ChildHit("b::00", "b", 0.9)], 1)
        [ChildHit(child_id='b::00', parent_id='b', score=0.9, text='', metadata={})]
    """
    return sorted(hits, key=lambda h: -h.score)[:n]


def finish(docs: list[Document], missing: list[str]) -> list[Document]:
    """Log parents that were skipped because the docstore lacks them, return the documents."""
    if missing:
        logger.warning("parents missing from the docstore, skipped: %s", ", ".join(missing))
    return docs


def with_ids(documents: Sequence[Document], ids: Sequence[str] | None) -> list[Document]:
    """Documents with ``id`` set from ``ids`` when given."""
    if ids is None:
        return list(documents)
    if len(ids) != len(documents):
        msg = f"got {len(documents)} documents but {len(ids)} ids"
        raise ValueError(msg)
    return [
        Document(id=i, page_content=d.page_content, metadata=d.metadata)
        for d, i in zip(documents, ids, strict=True)
    ]
