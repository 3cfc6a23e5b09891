"""A row read back from an index with its score, and the orders hits are kept in.

:class:`ChildHit` is what every read returns (a child chunk, a whole-card row or a sentence
row); :func:`nearest` and :func:`best_hits` order and reduce hits the same way whichever store
or scan found them, so fusion's ranks do not depend on where a row came from.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from cardrag.ingest import metadata as md
from cardrag.ingest.index.layout import RowKind

logger = logging.getLogger(__name__)


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
    complete: bool = True
    """False for a row read for its score alone: ``text`` is empty and ``metadata`` holds only
    what its id says (parent, chunk index) until :meth:`RowReader.complete` reads the rest."""

    @property
    def kind(self) -> RowKind:
        """Which kind of row this is: ``child``, ``card`` (whole-card row) or ``sentence``."""
        return cast(RowKind, md.row_kind(self.metadata.get(md.CHUNK_INDEX)))


def best_by_parent(rows: Iterable[tuple[str, str, float]]) -> dict[str, float]:
    """Each parent's best row of ``(child id, parent id, score)`` rows: ``{child id: score}``.

    Ties go to the lower child id, as in :func:`~cardrag.retrievers.fusion.best_per_parent`.

    Example:
        >>> best_by_parent([("a::00", "a", 0.5), ("a::01", "a", 0.9), ("b::00", "b", 0.7)])
        {'a::01': 0.9, 'b::00': 0.7}
    """
    best: dict[str, tuple[str, float]] = {}
    for child, parent, score in rows:
        held = best.get(parent)
        if held is None or (-score, child) < (-held[1], held[0]):
            best[parent] = (child, score)
    return dict(best.values())


def best_hits(hits: Sequence[ChildHit]) -> list[ChildHit]:
    """Each parent's best hit (:func:`best_by_parent`), in the hits' order.

    Example:
        >>> [h.child_id for h in best_hits([ChildHit("a::00", "a", 0.5),
        ...                                 ChildHit("a::01", "a", 0.9)])]
        ['a::01']
    """
    keep = best_by_parent((h.child_id, h.parent_id, h.score) for h in hits)
    return [h for h in hits if h.child_id in keep]


def nearest(hits: Sequence[ChildHit], n: int) -> list[ChildHit]:
    """The ``n`` most similar hits (hits of several collections merged), best first.

    Equal scores go to the lower child id (as in :func:`best_by_parent`): a window's order,
    and with it fusion's ranks, is then the same whichever store or scan found the rows
    (Chroma's order of equal distances is its own).

    Example:
        >>> nearest([ChildHit("a::00", "a", 0.2), ChildHit("b::00", "b", 0.9)], 1)
        [ChildHit(child_id='b::00', parent_id='b', score=0.9, text='', metadata={}, complete=True)]
    """
    return sorted(hits, key=lambda h: (-h.score, h.child_id))[:n]


def orphans(count: int, id_key: str, store: str = "the vector store") -> None:
    """Log rows skipped for lacking ``id_key`` (LangChain's retriever skips them silently)."""
    logger.warning(
        "%d row(s) of %s have no %r metadata and were skipped: rows written around the "
        "retriever (index(docs, manager, retriever.vectorstore)?) have no parent; write "
        "through the retriever (add_documents, or index(docs, manager, retriever))",
        count,
        store,
        id_key,
    )


def lean_hit(row_id: str, score: float, id_key: str) -> ChildHit | None:
    """A row known by its id and score alone (None when the id is not a child id).

    The parent and the chunk index come from the id (:func:`~cardrag.ingest.metadata.child_id`);
    the text and the rest of the metadata are read later, for the rows shown.

    Example:
        >>> lean_hit("card-a::card", 0.5, "parent_id").metadata
        {'parent_id': 'card-a', 'chunk_index': -1}
    """
    parsed = md.parse_child_id(row_id)
    if parsed is None:
        return None
    parent, chunk = parsed
    return ChildHit(row_id, parent, score, "", {id_key: parent, md.CHUNK_INDEX: chunk}, False)
