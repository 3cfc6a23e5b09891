"""Exact scans over the saved row vectors (:class:`~cardrag.ingest.index.vectors.RowVectors`).

A window of the nearest rows, given rows scored, and each given parent's best row, without
asking Chroma; every score is :func:`~cardrag.retrievers.similarity.cosine_similarities`
(float64 over the stored float32 values), so a row scores here as it does read from Chroma.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cardrag.ingest.index.vectors import RowVectors
from cardrag.retrievers.similarity import cosine_similarities

ROUGH_MARGIN = 1e-4
"""How far under a parent's best float32 cosine a row may be and still be scored exactly: well
above float32's rounding of a 384-dimension cosine (about 384 x 6e-8 = 2.3e-5 at worst), so
the row the exact cosine ranks first is always among them."""


def scores_of(
    vectors: RowVectors, vector: Sequence[float], row_ids: Sequence[str]
) -> tuple[list[str], list[float]]:
    """The given rows that are saved, and each one's cosine with ``vector``.

    Example:
        >>> vectors = RowVectors(["a::00", "a::01"], np.eye(2, dtype=np.float32))
        >>> scores_of(vectors, [1.0, 0.0], ["a::01", "a::00", "b::00"])
        (['a::01', 'a::00'], [0.0, 1.0])
    """
    positions = vectors.positions
    found = [(row_id, positions[row_id]) for row_id in row_ids if row_id in positions]
    if not found:
        return [], []
    rows = vectors.matrix[np.fromiter((n for _, n in found), dtype=np.int64, count=len(found))]
    return [row_id for row_id, _ in found], cosine_similarities(vector, rows)


def nearest_ids(vectors: RowVectors, vector: Sequence[float], n: int) -> list[str]:
    """The ids of the ``n`` rows nearest ``vector`` by cosine, nearest first (an exact scan).

    One float32 product over every row: for a store of a few thousand rows it costs less
    than one vector query to Chroma, and a larger window costs no more than a smaller
    one. The ids only: :func:`scores_of` gives their cosines as every other read does.

    Example:
        >>> vectors = RowVectors(["a::00", "a::01", "b::00"],
        ...                      np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float32))
        >>> nearest_ids(vectors, [0.0, 1.0], 2)
        ['a::01', 'b::00']
    """
    ids = vectors.ids
    if not ids or n <= 0:
        return []
    query = np.asarray(vector, dtype=np.float32)
    sims = vectors.unit @ (query / (np.linalg.norm(query) or 1.0))
    n = min(n, len(ids))
    top = np.argpartition(-sims, n - 1)[:n] if n < len(ids) else np.arange(n)
    order = top[np.lexsort((top, -sims[top]))]  # nearest first, ties by position
    return [ids[int(i)] for i in order]


def best_of_parents(
    vectors: RowVectors, vector: Sequence[float], parent_ids: Sequence[str]
) -> tuple[list[str], list[float]]:
    """Each given parent's best row here and its cosine with ``vector``, parents in order.

    The scores of :func:`scores_of` (one :func:`~cardrag.retrievers.similarity.cosine_similarities`
    over every row of those parents); ties go to the lower child id, as in
    :func:`~cardrag.retrievers.child_hit.best_by_parent`. Without a loop over rows: a long
    parent's hundred rows are one slice of scores each.

    Example:
        >>> vectors = RowVectors(["a::00", "a::01", "b::00"],
        ...                      np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float32))
        >>> ids, scores = best_of_parents(vectors, [0.0, 1.0], ["a", "b", "c"])
        >>> ids, [round(s, 3) for s in scores]
        (['a::01', 'b::00'], [1.0, 0.707])
    """
    parts = [
        (p, vectors.rows_by_parent[p])
        for p in dict.fromkeys(parent_ids)
        if p in vectors.rows_by_parent
    ]
    if not parts:
        return [], []
    positions = np.concatenate([rows for _, rows in parts])
    lengths = np.array([len(rows) for _, rows in parts])
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    # a float32 product finds the few rows that can be each parent's best; only those
    # are scored exactly (a long parent's hundred rows cost one product, not a hundred
    # float64 cosines)
    # the rows' saved lengths: computing them costs more than the product
    rows32 = np.asarray(vectors.matrix[positions], dtype=np.float32)
    query = np.asarray(vector, dtype=np.float32)
    norms = vectors.norms[positions] * (np.linalg.norm(query) or 1.0)
    rough = (rows32 @ query) / np.where(norms == 0, 1.0, norms)
    ceiling = np.repeat(np.maximum.reduceat(rough, starts), lengths)
    close = np.flatnonzero(rough >= ceiling - ROUGH_MARGIN)
    exact = np.asarray(cosine_similarities(vector, vectors.matrix[positions[close]]))
    segment_of = np.repeat(np.arange(len(parts)), lengths)[close]
    # each parent's best: the first of its rows (lower child id) equal to its segment's maximum
    most = np.full(len(parts), -np.inf)
    np.maximum.at(most, segment_of, exact)
    at_best = np.flatnonzero(exact == most[segment_of])
    _, first = np.unique(segment_of[at_best], return_index=True)
    top = at_best[first]
    return [vectors.ids[int(i)] for i in positions[close[top]]], exact[top].tolist()
