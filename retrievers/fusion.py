"""Grouping children into parents: best score per parent, deterministic ties."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ChildHit:
    """One child chunk returned by the vector store, with its similarity."""

    child_id: str
    """``{card_id}::{NN}``."""
    parent_id: str
    """Card id the child belongs to."""
    score: float
    """Similarity to the question (higher is better)."""
    text: str = ""
    """The child's text as embedded."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """The child's metadata row."""


@dataclass(frozen=True)
class ParentHit:
    """A parent ranked by its best child."""

    parent_id: str
    """Card id."""
    score: float
    """The best similarity among the parent's children."""
    best: ChildHit
    """The child that gave the parent its score."""


def best_per_parent(hits: Iterable[ChildHit]) -> list[ParentHit]:
    """Group children by parent, keep each parent's best child, rank parents by it.

    Ties are broken deterministically: higher score first, then parent id, then child id.

    Example:
        >>> hits = [ChildHit("a::00", "a", 0.5), ChildHit("b::00", "b", 0.7),
        ...         ChildHit("a::01", "a", 0.9)]
        >>> [(p.parent_id, p.score, p.best.child_id) for p in best_per_parent(hits)]
        [('a', 0.9, 'a::01'), ('b', 0.7, 'b::00')]
    """
    best: dict[str, ChildHit] = {}
    for hit in hits:
        current = best.get(hit.parent_id)
        if current is None or (-hit.score, hit.child_id) < (-current.score, current.child_id):
            best[hit.parent_id] = hit
    ranked = sorted(best.values(), key=lambda h: (-h.score, h.parent_id, h.child_id))
    return [ParentHit(parent_id=h.parent_id, score=h.score, best=h) for h in ranked]
