"""Candidates for one question: how many rows to fetch, when to fetch more, BM25's parents.

The retriever asks the index for a window of rows per ranking; :func:`first_fetch` and
:func:`next_fetch` size that window (it doubles, up to ``max_fetch``, while it has not found
``k`` parents), and :func:`resolve` gives parents that only BM25 found their dense rows, so the
similarity gate can judge them. Pure functions (apart from the reads they are handed), shared
by the sync and async paths.
"""

from __future__ import annotations

from collections.abc import Sequence

from cardrag.ingest.index.collections import Where
from cardrag.ingest.index.search import ChildHit, RowReader
from cardrag.retrievers.fusion import ParentHit


def resolve(
    rows: RowReader,
    vector: list[float],
    hits: Sequence[ChildHit],
    lexical: Sequence[ParentHit],
    where: Where | None,
    fetch: int,
    *,
    max_fetch: int,
    card_rows: bool,
) -> list[ChildHit]:
    """Dense hits for parents BM25 found but the dense window did not.

    Their rows are read by parent id and scored against the question
    (:meth:`RowReader.of_parents`), with the same ``where`` over the same collections, so
    filters and the restricted exclusion apply to BM25 candidates too; it gives their dense
    similarity for the gate.
    """
    seen = {h.parent_id for h in hits}
    unknown = [p.parent_id for p in lexical if p.parent_id not in seen]
    if not unknown:
        return []
    window = min(max_fetch, max(fetch, 4 * len(unknown)))
    found = rows.of_parents(vector, unknown, window, where, card_rows=False)
    if card_rows:
        found += rows.of_parents(vector, unknown, window, where, card_rows=True)
    return found


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
