"""Reading rows back: the nearest rows of one kind, and the rows of given parents, scored.

The retriever's narrow view of an index (:class:`RowReader`): it asks for rows of a kind
(children or whole-card rows) and gets scored hits; which collections hold them and which
metadata filters tell them apart stays in the row plan (:meth:`Collections.plan`).

Chroma returns distances (lower is better); every hit carries a similarity instead. For
unit-length vectors:

* ``cosine``: distance = 1 - cos, so similarity = 1 - distance;
* ``ip``: distance = 1 - dot, so similarity = 1 - distance;
* ``l2``: squared L2, distance = 2 - 2 cos, so similarity = 1 - distance / 2.

Every similarity is therefore the cosine of the angle between the question and the row, in
[-1, 1], whatever space the collection declares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from langchain_chroma import Chroma

from cardrag.ingest import metadata as md
from cardrag.ingest.index.collections import Collections, Where, merge_filters

SPACES = ("cosine", "ip", "l2")


@dataclass(frozen=True)
class ChildHit:
    """One row read back from the index (a child chunk or a whole-card row), with its score."""

    child_id: str
    """``{card_id}::{NN}``."""
    parent_id: str
    """Card id the row belongs to."""
    score: float
    """Similarity to the question (higher is better)."""
    text: str = ""
    """The row's text as embedded."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """The row's metadata."""

    @property
    def is_card_row(self) -> bool:
        """True for the whole-card row (``chunk_index == CARD_ROW``), not a real child."""
        return self.metadata.get(md.CHUNK_INDEX) == md.CARD_ROW


@dataclass(frozen=True)
class RowReader:
    """Scored rows of one index, as one caller may see them.

    Example:
        >>> reader = RowReader(collections, allow_restricted=False)   # doctest: +SKIP
        >>> reader.nearest(vector, 8, None, card_rows=False)[0].parent_id
        'card-iron-tablets'
    """

    collections: Collections
    """The index's collections (and with them the row plan)."""
    allow_restricted: bool = False
    """Read restricted cards' rows too (otherwise they are outside every read)."""
    id_key: str = md.PARENT_ID
    """Row metadata key holding the parent's id."""

    def nearest(
        self, vector: Sequence[float], fetch: int, where: Where | None, *, card_rows: bool
    ) -> list[ChildHit]:
        """The ``fetch`` rows of one kind nearest the question, over every collection of it."""
        hits = [
            hit
            for store, only in self._plan(card_rows, where)
            for hit in self._query(store, vector, fetch, only)
        ]
        return nearest(hits, fetch)

    def of_parents(
        self,
        vector: Sequence[float],
        parent_ids: Sequence[str],
        window: int,
        where: Where | None,
        *,
        card_rows: bool,
    ) -> list[ChildHit]:
        """The ``window`` rows of one kind of the given parents nearest the question.

        Read by parent id (``get``, an indexed lookup) and scored here: a vector query
        restricted to a few parents costs Chroma far more than an unrestricted one (30 ms
        against 4 ms at 40,000 children).
        """
        only = merge_filters(where, {self.id_key: {"$in": list(parent_ids)}})
        hits: list[ChildHit] = []
        for store, plan_filter in self._plan(card_rows, only):
            rows = store.get(where=plan_filter, include=["embeddings", "metadatas", "documents"])
            scores = cosine_similarities(vector, rows["embeddings"])
            hits += [
                ChildHit(str(i), str((m or {}).get(self.id_key, "")), s, t or "", m or {})
                for i, m, t, s in zip(
                    rows["ids"], rows["metadatas"], rows["documents"], scores, strict=True
                )
            ]
        return nearest(hits, window)

    def _query(
        self, store: Chroma, vector: Sequence[float], fetch: int, where: Where | None
    ) -> list[ChildHit]:
        """One vector query: the ``fetch`` nearest rows of ``store``, scored."""
        space = collection_space(self.collections.children)
        found = store.similarity_search_by_vector_with_relevance_scores(
            list(vector), k=fetch, filter=where
        )
        return [
            row_hit(str(doc.id), doc.metadata, doc.page_content, distance, space, self.id_key)
            for doc, distance in found
        ]

    def _plan(self, card_rows: bool, where: Where | None) -> list[tuple[Chroma, Where | None]]:
        return self.collections.plan(
            card_rows=card_rows, where=where, allow_restricted=self.allow_restricted
        )


def row_hit(
    row_id: str, metadata: dict[str, Any], text: str, distance: float, space: str, id_key: str
) -> ChildHit:
    """One row of a vector query as a hit of its parent (``metadata[id_key]``)."""
    return ChildHit(
        child_id=row_id,
        parent_id=str(metadata.get(id_key, "")),
        score=distance_to_similarity(distance, space),
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


def distance_to_similarity(distance: float, space: str) -> float:
    """Convert a distance in ``space`` to a cosine similarity (higher is better).

    Example:
        >>> distance_to_similarity(0.25, "cosine")
        0.75
        >>> distance_to_similarity(0.5, "l2")
        0.75
    """
    if space in ("cosine", "ip"):
        return 1.0 - distance
    if space == "l2":
        return 1.0 - distance / 2.0
    msg = f"unknown distance space {space!r}; expected one of {', '.join(SPACES)}"
    raise ValueError(msg)


def cosine_similarities(query: Sequence[float], rows: Any) -> list[float]:
    """The cosine similarity of the question to each row vector (for rows read with ``get``).

    Equal to :func:`distance_to_similarity` of the row's distance in any space for unit-length
    vectors, and computed without a vector search.

    Example:
        >>> [round(s, 3) for s in cosine_similarities([1.0, 0.0], [[1.0, 0.0], [0.0, 2.0]])]
        [1.0, 0.0]
    """
    matrix = np.asarray(rows, dtype=np.float64).reshape(-1, len(query))
    vector = np.asarray(query, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(vector) or 1.0)
    return [float(x) for x in (matrix @ vector) / np.where(norms == 0, 1.0, norms)]


def collection_space(vectorstore: Any) -> str:
    """The distance space a Chroma collection declares (``l2`` is Chroma's default)."""
    config = vectorstore._collection.configuration or {}
    for index in ("hnsw", "spann"):
        section = config.get(index) or {}
        if section.get("space"):
            return str(section["space"])
    metadata = vectorstore._collection.metadata or {}
    return str(metadata.get("hnsw:space", "l2"))
