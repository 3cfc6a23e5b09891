"""The retriever's fields: what ``ParentDocumentRetriever``'s mean here, ours, and their checks.

``search_kwargs`` keeps LangChain's keys with their meaning: ``k`` (here it counts parents),
``filter`` (in the store's own form) and ``score_threshold`` (the similarity gate, as
``search_type="similarity_score_threshold"`` applies it). Anything else is refused at
construction with the reason, never accepted and ignored (house style).
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any, cast

from langchain_classic.retrievers import ParentDocumentRetriever
from langchain_classic.retrievers.multi_vector import SearchType
from langchain_core.documents import BaseDocumentCompressor
from langchain_core.stores import ByteStore
from langchain_core.vectorstores import VectorStore
from langchain_text_splitters import TextSplitter
from pydantic import Field, ValidationError, model_validator

from cardrag.ingest.index.layout import is_chroma
from cardrag.ingest.index.vectors import RowVectors
from cardrag.ingest.lexical import BM25Index
from cardrag.ingest.settings import default
from cardrag.ingest.splitter import CardSplitter
from cardrag.retrievers.stores import StoreFilter, filter_problem

if TYPE_CHECKING:
    from langchain_chroma import Chroma

    from cardrag.ingest.index.collections import Collections

SEARCH_KWARGS = ("k", "filter", "score_threshold")
"""The ``search_kwargs`` keys the retriever honours (``k`` parents, ``filter``, and the gate)."""


def field_problems(retriever: ScoredParentFields) -> list[str]:
    """Why a field of ``ParentDocumentRetriever`` or ours cannot be honoured (empty: all can).

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> from langchain_core.stores import InMemoryStore
        >>> from langchain_core.vectorstores import InMemoryVectorStore
        >>> from cardrag import ScoredParentDocumentRetriever
        >>> store = InMemoryVectorStore(DeterministicFakeEmbedding(size=4))
        >>> try:
        ...     ScoredParentDocumentRetriever(
        ...         vectorstore=store, docstore=InMemoryStore(), search_kwargs={"fetch_k": 20})
        ... except ValueError as exc:
        ...     print(str(exc)[:39])
        search_kwargs ['fetch_k'] not supported
    """
    problems: list[str] = []
    if retriever.search_type == SearchType.mmr:
        problems.append(
            "search_type='mmr' is not supported: MMR diversifies children, and this retriever "
            "already returns k distinct parents ranked by their best child; use 'similarity'"
        )
    unknown = sorted(set(retriever.search_kwargs) - set(SEARCH_KWARGS))
    if unknown:
        problems.append(
            f"search_kwargs {unknown} not supported: the retriever takes {list(SEARCH_KWARGS)} "
            "(how many children it reads is fetch_multiplier and max_fetch)"
        )
    asked_k = retriever.search_kwargs.get("k", 1)
    if isinstance(asked_k, bool) or not isinstance(asked_k, int) or asked_k < 1:
        problems.append(
            f"search_kwargs['k'] ({asked_k!r}): expected a whole number of parents, at least 1"
        )
    for where in (retriever.filter, retriever.search_kwargs.get("filter")):
        if problem := filter_problem(retriever.vectorstore, where):
            problems.append(problem)
    given = retriever.model_fields_set
    for key, field in (("k", "k"), ("score_threshold", "min_similarity")):
        asked = retriever.search_kwargs.get(key)
        if key in retriever.search_kwargs and field in given and asked != getattr(retriever, field):
            problems.append(
                f"search_kwargs[{key!r}] ({asked!r}) and {field} "
                f"({getattr(retriever, field)!r}) disagree: give one"
            )
    for field in ("card_rows_store", "restricted_store", "sentence_rows_store"):
        store = getattr(retriever, field)
        if store is not None and not is_chroma(store):
            problems.append(f"{field} must be a Chroma collection, not {type(store).__name__}")
    if not is_chroma(retriever.vectorstore):
        name = type(retriever.vectorstore).__name__
        # sentence_rows itself needs sentence_rows_store: checked below, for any store
        for field in ("card_rows", "card_rows_store", "restricted_store", "sentence_rows_store"):
            if getattr(retriever, field):
                problems.append(f"{field} needs Chroma collections; the vector store is {name}")
        splitter = retriever.child_splitter
        if isinstance(splitter, CardSplitter) and splitter.card_rows:
            problems.append(f"a CardSplitter with card_rows needs Chroma; the store is {name}")
    splitter = retriever.child_splitter
    has_store = retriever.sentence_rows_store is not None
    if isinstance(splitter, CardSplitter) and splitter.sentence_rows and not has_store:
        problems.append(
            "a CardSplitter with sentence_rows needs their own collection (sentence_rows_store)"
        )
    if retriever.sentence_rows and not has_store:
        problems.append("sentence_rows needs their own collection (sentence_rows_store)")
    return problems


def construction_problem(exc: ValidationError, name: str) -> str:
    """One line for every field pydantic refused: the field, what it was given, what is wanted.

    A misspelt field is named with the closest real one (``serach_kwargs``: did you mean
    ``search_kwargs``?); a reason the retriever gave (:func:`field_problems`) stands as it is.
    """
    fields = sorted(ScoredParentFields.model_fields)
    parts = []
    for error in exc.errors():
        field = ".".join(str(x) for x in error["loc"])
        if error["type"] == "extra_forbidden":
            close = difflib.get_close_matches(field, fields, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]}?)" if close else ""
            parts.append(f"{field} is not a field of {name}{hint}")
        elif error["type"] == "value_error" and not field:
            parts.append(str(error["msg"]).removeprefix("Value error, "))
        else:
            parts.append(f"{field}={error['input']!r}: {error['msg']}" if field else error["msg"])
    return "; ".join(parts)


BM25_PREFIX = "cardrag-bm25/"
"""Key prefix of a hybrid retriever's BM25 files in its ``bm25_store``."""


class ScoredParentFields(ParentDocumentRetriever):
    """The fields the scored retriever adds to ``ParentDocumentRetriever``'s, and their checks.

    ``ParentDocumentRetriever``'s own fields keep their meaning; the class a user builds is
    :class:`~cardrag.retrievers.parent.ScoredParentDocumentRetriever`.
    """

    vectorstore: VectorStore
    """The children's vector store: Chroma (the fast path: lean reads, whole-card rows, the
    restricted collection) or any other LangChain ``VectorStore``."""
    card_rows_store: VectorStore | None = None
    """The whole-card rows' own Chroma collection (as ``cardrag ingest`` builds it); None: card
    rows, if any, share ``vectorstore`` and a ``chunk_index`` filter tells the kinds apart."""
    restricted_store: VectorStore | None = None
    """The restricted cards' own Chroma collection, searched only with ``allow_restricted``; None:
    their rows share the other collections and a ``sensitivity`` filter in the query excludes
    them."""
    sentence_rows_store: VectorStore | None = None
    """The sentence rows' own Chroma collection (as ``cardrag ingest`` builds it); None: no sentence
    rows are written or read."""
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
    """The first search fetches ``max(k, candidate_parents) * fetch_multiplier`` children."""
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
    sentence_rows: bool = False
    """Rank the parents' sentence rows (``sentence_rows_store``) as a fourth list, from their
    own query."""
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
    max_parent_chars: int | None = Field(default=None, ge=1)
    """Each returned parent cut to at most this many characters: its best child, then its other
    children in the question's window while they fit, widened to sentences where room is left
    (the pieces' offsets in ``budget_spans``, :mod:`cardrag.retrievers.budget`). None: whole
    parents, as ``ParentDocumentRetriever`` returns them."""
    max_context_chars: int | None = Field(default=None, ge=1)
    """All returned parents together at most this many characters: the lowest-ranked parents
    are cut first, then dropped, never a higher one for a lower. None: no limit."""
    dense_weight: float = Field(default=default("dense_weight"), ge=0)
    """RRF weight of the dense best-child ranking."""
    card_weight: float = Field(default=default("card_weight"), ge=0)
    """RRF weight of the whole-card rows' ranking (used only where the index has card rows)."""
    sentence_weight: float = Field(default=default("sentence_weight"), ge=0)
    """RRF weight of the sentence rows' ranking (used only with ``sentence_rows``)."""
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
    candidate_parents: int = Field(default=default("candidate_parents"), ge=1)
    """The first window of children is sized for this many parents, or ``k`` if larger, so the
    first parents returned do not depend on ``k`` up to it (the fused order depends on the
    window); only the ``k`` returned are read from the parent store. 1: sized by ``k`` alone."""
    concurrent_reads: bool = default("concurrent_reads")
    """Make the independent reads of one question at the same time: its Chroma queries on a
    small shared thread pool while BM25 and the scans of saved vectors run in the calling
    thread (another store's reads all at once). False reads one after the other (one core
    per request, for a server that runs as many workers as cores)."""

    def __init__(self, **data: Any) -> None:
        """Validate the fields; a problem is a ``ValueError`` whose message names the field."""
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ValueError(construction_problem(exc, type(self).__name__)) from exc

    @model_validator(mode="after")
    def _check_fields(self) -> ScoredParentFields:
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
        if is_chroma(self.vectorstore):
            return BM25Index.from_collections(
                self.collections.with_children(), id_key=self.id_key, keep_texts=True
            )
        return BM25Index.build([], [], [], keep_texts=True)

    # -- retrieval ----------------------------------------------------------------------------

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
    def collections(self) -> Collections:
        """The Chroma collections this retriever reads and writes.

        Raises:
            TypeError: when the vector store is not Chroma.
        """
        if not is_chroma(self.vectorstore):
            msg = f"{type(self.vectorstore).__name__} is not Chroma: it has no collections"
            raise TypeError(msg)
        from cardrag.ingest.index.collections import Collections  # the `chroma` extra

        others = (self.card_rows_store, self.restricted_store, self.sentence_rows_store)
        return Collections(self.vectorstore, *(cast("Chroma | None", store) for store in others))
