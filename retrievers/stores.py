"""Reading children from any LangChain vector store, through its public API.

Chroma is the fast path (:class:`~cardrag.retrievers.hits.RowReader`: lean reads, separate
collections, rows read by id with their vectors). Every other ``VectorStore`` is read by
:class:`StoreReader`, with the same three calls, so the retriever's loop (over-fetch, best
child per parent, k distinct parents, fusion, the gate) is the same for both.

Scores are similarities, higher is better. Where the store says which space it searches, it is
the cosine similarity of the question and the child, whatever the embeddings' length:

* ``InMemoryVectorStore`` returns the cosine similarity itself;
* FAISS (``langchain_community``) returns a squared L2 distance (cosine = 1 - d / 2) or, with
  ``MAX_INNER_PRODUCT``, the inner product (the cosine), for unit-length vectors; for others
  the cosine is computed from the rows' vectors in the index;
* Chroma, in any declared space, likewise (:mod:`cardrag.retrievers.similarity`);
* any other store: LangChain's relevance score (``_select_relevance_score_fn``), the number
  ``search_type="similarity_score_threshold"`` compares, or its raw score where it has none.

What needs Chroma: whole-card rows and the restricted collection (``card_rows``,
``card_rows_store``, ``restricted_store``), and BM25 with a per-call ``filter`` (another store's
filter cannot be applied to BM25's candidates, so a filtered call there ranks dense only).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore

from cardrag.ingest.index.layout import RowKind, is_chroma
from cardrag.retrievers.child_hit import ChildHit, best_hits, nearest, orphans
from cardrag.retrievers.similarity import cosine_similarities, unit_length

logger = logging.getLogger(__name__)

StoreFilter = dict[str, Any] | Callable[..., bool]
"""A filter in the store's own form: a Chroma or FAISS ``dict``, or a callable."""


class Reader(Protocol):
    """What the retriever's loop reads: Chroma's :class:`RowReader` or a :class:`StoreReader`."""

    def nearest(
        self, vector: Sequence[float], fetch: int, where: Any, *, kind: RowKind
    ) -> list[ChildHit]:
        """The ``fetch`` rows of one kind nearest the question."""
        ...

    def by_ids(
        self, vector: Sequence[float], row_ids: Sequence[str], where: Any, *, kind: RowKind
    ) -> list[ChildHit]:
        """The given rows, scored, best first."""
        ...

    def best_of(
        self, vector: Sequence[float], row_ids: Sequence[str], where: Any
    ) -> list[ChildHit]:
        """Each parent's best child among the given rows, scored (as :func:`best_per_parent`)."""
        ...

    def best_of_parents(
        self,
        vector: Sequence[float],
        parent_ids: Sequence[str],
        rows_of: Callable[[Sequence[str]], list[str]],
        where: Any,
    ) -> list[ChildHit]:
        """Each given parent's best child among its rows (``rows_of``: their child ids)."""
        ...

    def complete(self, hits: Sequence[ChildHit]) -> list[ChildHit]:
        """The hits with their text and metadata."""
        ...


@dataclass(frozen=True)
class StoreReader:
    """Scored children of one LangChain vector store for one question.

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> store = InMemoryVectorStore(DeterministicFakeEmbedding(size=8))
        >>> _ = store.add_documents([Document("a", id="p::00", metadata={"doc_id": "p"})])
        >>> reader = StoreReader(store, store.embeddings, "doc_id", "a")
        >>> [h.parent_id for h in reader.nearest(store.embeddings.embed_query("a"), 4, None,
        ...                                      kind="child")]
        ['p']
    """

    store: VectorStore
    """The children's store."""
    embeddings: Embeddings
    """The store's embedding model (scores rows read by id)."""
    id_key: str
    """Child metadata key holding the parent's id (rows without it are skipped, as LangChain's
    retriever skips them)."""
    query: str
    """The question (for stores that search by text only)."""

    def nearest(
        self, vector: Sequence[float], fetch: int, where: StoreFilter | None, *, kind: RowKind
    ) -> list[ChildHit]:
        """The ``fetch`` children nearest the question (no card rows outside Chroma)."""
        if kind == "card":
            return []
        pairs = scored_search(self.store, self.query, vector, fetch, where)
        hits = [h for doc, s in pairs if (h := self._hit(doc, s))]
        if len(hits) < len(pairs):
            orphans(len(pairs) - len(hits), self.id_key)
        return nearest(hits, fetch)

    def by_ids(
        self,
        vector: Sequence[float],
        row_ids: Sequence[str],
        where: StoreFilter | None,
        *,
        kind: RowKind,
    ) -> list[ChildHit]:
        """The given children, scored against the question (their texts embedded here).

        A store's public API gives no vectors back, so these rows (one per parent only BM25
        found) are embedded again: the same model and text, so the same vector.
        """
        if kind == "card" or not row_ids or where is not None:
            return []
        docs = self.store.get_by_ids(list(row_ids))
        if not docs:
            return []
        scores = cosine_similarities(
            vector, self.embeddings.embed_documents([d.page_content for d in docs])
        )
        return nearest(
            [h for d, s in zip(docs, scores, strict=True) if (h := self._hit(d, s))], len(docs)
        )

    def best_of(
        self, vector: Sequence[float], row_ids: Sequence[str], where: StoreFilter | None
    ) -> list[ChildHit]:
        """Each parent's best child among the given rows (:meth:`by_ids`, one per parent)."""
        return best_hits(self.by_ids(vector, row_ids, where, kind="child"))

    def best_of_parents(
        self,
        vector: Sequence[float],
        parent_ids: Sequence[str],
        rows_of: Callable[[Sequence[str]], list[str]],
        where: StoreFilter | None,
    ) -> list[ChildHit]:
        """:meth:`best_of` over the rows ``rows_of`` names for those parents."""
        return self.best_of(vector, rows_of(parent_ids), where)

    def complete(self, hits: Sequence[ChildHit]) -> list[ChildHit]:
        """The hits with their text and metadata: a search returns them, BM25's are read by id."""
        missing = [h.child_id for h in hits if not h.complete]
        if not missing:
            return list(hits)
        read = {str(d.id): d for d in self.store.get_by_ids(list(dict.fromkeys(missing)))}
        return [
            replace(h, text=d.page_content, metadata=dict(d.metadata), complete=True)
            if not h.complete and (d := read.get(h.child_id)) is not None
            else h
            for h in hits
        ]

    def _hit(self, doc: Document, score: float) -> ChildHit | None:
        parent = doc.metadata.get(self.id_key)
        if parent is None:
            return None
        return ChildHit(
            str(doc.id or ""), str(parent), float(score), doc.page_content, dict(doc.metadata)
        )


def scored_search(
    store: VectorStore,
    query: str,
    vector: Sequence[float],
    fetch: int,
    where: StoreFilter | None,
) -> list[tuple[Document, float]]:
    """The ``fetch`` nearest children with similarities (higher is better), best first."""
    options: dict[str, Any] = {} if where is None else {"filter": where}
    if isinstance(store, InMemoryVectorStore):
        return store.similarity_search_with_score_by_vector(list(vector), k=fetch, **options)
    if type(store).__name__ == "FAISS":
        return _faiss(store, vector, fetch, options)
    pairs = store.similarity_search_with_score(query, k=fetch, **options)
    return [(d, relevance(store)(s)) for d, s in pairs]


def _faiss(
    store: Any, vector: Sequence[float], fetch: int, options: dict[str, Any]
) -> list[tuple[Document, float]]:
    """FAISS's nearest rows as cosine similarities (a filter reads 4 times the window)."""
    if options:
        options["fetch_k"] = max(20, 4 * fetch)
    pairs = store.similarity_search_with_score_by_vector(list(vector), k=fetch, **options)
    if not unit_length(vector):  # the formulas below hold for unit vectors only
        return list(zip((d for d, _ in pairs), _faiss_cosines(store, vector, pairs), strict=True))
    strategy = str(getattr(store.distance_strategy, "value", store.distance_strategy))
    if strategy == "EUCLIDEAN_DISTANCE":  # squared L2: 2 - 2 cos for unit vectors
        return [(d, 1.0 - float(s) / 2.0) for d, s in pairs]
    if strategy == "MAX_INNER_PRODUCT":
        return [(d, float(s)) for d, s in pairs]
    return [(d, relevance(store)(float(s))) for d, s in pairs]


def _faiss_cosines(
    store: Any, vector: Sequence[float], pairs: Sequence[tuple[Document, float]]
) -> list[float]:
    """The cosine of the question and each found row, from the row's vector in the index."""
    position = {doc_id: i for i, doc_id in store.index_to_docstore_id.items()}
    rows = [store.index.reconstruct(position[str(d.id)]) for d, _ in pairs]
    return cosine_similarities(vector, rows) if rows else []


def relevance(store: VectorStore) -> Callable[[float], float]:
    """The store's relevance function (LangChain's), or the raw score where it has none."""
    try:
        return store._select_relevance_score_fn()
    except NotImplementedError:
        return float


def filter_problem(store: VectorStore, where: StoreFilter | None) -> str | None:
    """Why a filter is not in the form ``store`` takes (None: it is, or no filter is given).

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> store = InMemoryVectorStore(DeterministicFakeEmbedding(size=4))
        >>> filter_problem(store, {"topic": "iron"})
        'InMemoryVectorStore takes a callable as filter (Document -> bool), not a dict'
        >>> filter_problem(store, lambda d: True) is None
        True
    """
    if where is None:
        return None
    name = type(store).__name__
    if isinstance(store, InMemoryVectorStore) and not callable(where):
        return f"{name} takes a callable as filter (Document -> bool), not a {type(where).__name__}"
    if is_chroma(store) and not isinstance(where, dict):
        return f"Chroma takes a `where` dict as filter, not a {_kind(where)}"
    if name == "FAISS" and not (isinstance(where, dict) or callable(where)):
        return f"FAISS takes a dict or a callable as filter, not a {_kind(where)}"
    return None


def _kind(where: object) -> str:
    return "callable" if callable(where) else type(where).__name__


def combine_filters(*filters: StoreFilter | None) -> StoreFilter | None:
    """Filters in another store's form, all applied: callables and-ed, dicts merged.

    Raises:
        ValueError: when two dicts set one key differently, or dicts and callables mix.

    Example:
        >>> combine_filters({"a": 1}, None, {"b": 2})
        {'a': 1, 'b': 2}
        >>> both = combine_filters(lambda d: d.id != "x", lambda d: d.id != "y")
        >>> [both(Document("", id=i)) for i in ("x", "y", "z")]
        [False, False, True]
    """
    given = [f for f in filters if f]
    if len(given) <= 1:
        return given[0] if given else None
    if all(callable(f) for f in given):
        calls = [f for f in given if callable(f)]
        return lambda *args, **kwargs: all(f(*args, **kwargs) for f in calls)
    dicts = [f for f in given if isinstance(f, dict)]
    if len(dicts) != len(given):
        msg = "cannot combine a callable filter with a dict filter: give filters of one kind"
        raise ValueError(msg)
    merged: dict[str, Any] = {}
    for where in dicts:
        for key, value in where.items():
            if key in merged and merged[key] != value:
                msg = f"filters disagree on {key!r}: {merged[key]!r} and {value!r}"
                raise ValueError(msg)
            merged[key] = value
    return merged


def store_embeddings(store: VectorStore) -> Embeddings:
    """The embedding model a store was made with.

    Raises:
        ValueError: when the store exposes none (LangChain's ``VectorStore.embeddings``).
    """
    embeddings = store.embeddings
    if embeddings is None:
        msg = (
            f"{type(store).__name__} exposes no embedding model (its `embeddings` is None): "
            "make it with an embedding function"
        )
        raise ValueError(msg)
    return embeddings
