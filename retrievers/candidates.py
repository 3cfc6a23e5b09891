"""Candidates for one question: how many rows to fetch, when to fetch more, BM25's parents.

The retriever asks the index for a window of rows per ranking; :func:`first_fetch` and
:func:`next_fetch` size that window (it doubles, up to ``max_fetch``, while it has not found
``k`` parents); :func:`resolve` gives parents that only BM25 found their dense rows, read by
id, so the similarity gate can judge them, and :func:`card_rows_of` their whole-card rows
(and which candidates have none); :func:`best_rows` names the rows to score where the store
gives no vectors back. Pure functions (apart from the reads they are handed),
shared by the sync and async paths.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from cardrag.ingest import metadata as md
from cardrag.retrievers.child_hit import ChildHit
from cardrag.retrievers.fusion import ParentHit
from cardrag.retrievers.reads import in_place
from cardrag.retrievers.stores import Reader, StoreFilter


def resolve(
    rows: Reader,
    vector: list[float],
    windows: set[str],
    found: Sequence[str],
    rows_of: Callable[[Sequence[str]], list[str]],
    where: StoreFilter | None,
) -> list[ChildHit]:
    """Dense hits for parents found (by BM25 or a sentence row) outside the dense windows.

    ``windows`` holds the parents the children's and the card rows' windows found.

    Every row of those parents (``rows_of``: their child ids, from the BM25 index) is read by
    id and scored against the question (``rows.by_ids``), with the same ``where``
    over the same collections, so filters and the restricted exclusion apply to BM25
    candidates too. It gives each such parent its dense similarity, the best over all its
    rows as for any other parent, for the gate. At most one BM25 window of parents is read,
    whatever the size of the store. (Their whole-card rows come with :func:`card_rows_of`.)

    Only each parent's best row is returned: fusion ranks a parent by it alone, and a long
    parent's hundred rows would otherwise each be carried through fusion.
    """
    unknown = [p for p in dict.fromkeys(found) if p not in windows]
    if not unknown:
        return []
    return rows.best_of_parents(vector, unknown, rows_of, where)


def card_rows_of(
    rows: Reader,
    vector: list[float],
    candidates: Sequence[str],
    windows: set[str],
    cards: Sequence[ChildHit],
    where: StoreFilter | None,
) -> tuple[list[ChildHit], set[str]]:
    """The whole-card rows of BM25-only parents, and the candidates that have none.

    One read by id of the card rows of every candidate parent whose card row is not among
    ``cards`` (the card-row window). The rows of parents outside both dense windows
    (``windows``: the parents with a child or a card row there), those only BM25 found, join
    the ranking as their other rows do (:func:`resolve`); for the others the read only tells
    whether the row exists: a card too long for one has none, and fusion does not hold the
    card-row ranking against it.

    Returns:
        The card-row hits of BM25-only parents, and the candidates without a card row.
    """
    have = {h.parent_id for h in cards}
    asked = [p for p in dict.fromkeys(candidates) if p not in have]
    if not asked:
        return [], set()
    found = rows.by_ids(vector, [md.child_id(p, md.CARD_ROW) for p in asked], where, kind="card")
    with_row = {h.parent_id for h in found}
    return [h for h in found if h.parent_id not in windows], set(asked) - with_row


@in_place
def no_card_rows() -> tuple[list[ChildHit], set[str]]:
    """:func:`card_rows_of` where card rows are off: none read, none missing (:func:`in_place`)."""
    return [], set()


def without_card_row(hits: Sequence[ChildHit], parents: set[str]) -> list[ChildHit]:
    """The hits, those of ``parents`` marked as having no whole-card row (for fusion).

    Example:
        >>> without_card_row([ChildHit("a::00", "a", 0.5)], {"a"})[0].metadata
        {'has_card_row': False}
    """
    return [
        replace(h, metadata={**h.metadata, md.HAS_CARD_ROW: False}) if h.parent_id in parents else h
        for h in hits
    ]


def first_fetch(parents: int, multiplier: int, max_fetch: int) -> int:
    """Children to fetch first for ``parents`` parents: ``parents * multiplier``, capped."""
    return min(parents * multiplier, max_fetch)


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


def best_rows(lexical: Sequence[ParentHit]) -> Callable[[Sequence[str]], list[str]]:
    """For a store read through its public API: each parent's best BM25 child, to be scored.

    (Chroma reads every row of those parents by id with its vector; another store's rows are
    embedded again, so only the one BM25 found best is: its similarity is a lower bound of
    the parent's best child.)
    """
    best = {p.parent_id: p.best.child_id for p in lexical}

    def rows_of(parent_ids: Sequence[str]) -> list[str]:
        return [best[p] for p in parent_ids if p in best]

    return rows_of
