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
BLOCK_ROWS = 32
"""Rows from which a parent's block of the matrix is read as a slice rather than gathered
with the others' rows: 32 long parents' 3,400 rows of 413,000 cost 0.35 ms as slices against
0.67 gathered; 91 short parents' 716 rows of 180,000 cost 0.27 ms as slices against 0.12
gathered (Intel Xeon, warm)."""


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
    parents = [p for p in dict.fromkeys(parent_ids) if p in vectors.rows_by_parent]
    if not parents:
        return [], []
    # a float32 product finds the few rows that can be each parent's best; only those
    # are scored exactly (a long parent's hundred rows cost one product, not a hundred
    # float64 cosines)
    query = np.asarray(vector, dtype=np.float32)
    rows, lengths, products = _products(vectors, query, parents)
    # the rows' saved lengths: computing them costs more than the product
    norms = vectors.norms[rows] * (np.linalg.norm(query) or 1.0)
    rough = products / np.where(norms == 0, 1.0, norms)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    ceiling = np.repeat(np.maximum.reduceat(rough, starts), lengths)
    close = np.flatnonzero(rough >= ceiling - ROUGH_MARGIN)
    exact = np.asarray(cosine_similarities(vector, vectors.matrix[rows[close]]))
    segment_of = np.repeat(np.arange(len(parents)), lengths)[close]
    most = np.full(len(parents), -np.inf)
    np.maximum.at(most, segment_of, exact)
    # each parent's best: of its rows equal to its maximum, the lower child id
    at_best = np.flatnonzero(exact == most[segment_of])
    segments, first, counts = np.unique(segment_of[at_best], return_index=True, return_counts=True)
    best = rows[close[at_best[first]]].tolist()
    for n in np.flatnonzero(counts > 1).tolist():  # a tie (rare): rows of one block are not
        tied = rows[close[at_best[segment_of[at_best] == segments[n]]]].tolist()
        best[n] = min(tied, key=vectors.ids.__getitem__)  # in child-id order
    return [vectors.ids[n] for n in best], exact[at_best[first]].tolist()


def _products(
    vectors: RowVectors, query: np.ndarray, parents: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each parent's row positions in turn, their counts, and each row's product with ``query``.

    A parent of at least :data:`BLOCK_ROWS` rows in one block of the matrix
    (:attr:`RowVectors.spans`) is read as a slice, in place; the other rows are gathered
    together. A block's positions are in the matrix's order, not its child ids'.
    """
    matrix = vectors.matrix
    any_long = vectors.longest >= BLOCK_ROWS  # else no span is looked up
    spans = [vectors.spans.get(p) if any_long else None for p in parents]
    block = np.array([s is not None and s[1] - s[0] >= BLOCK_ROWS for s in spans], dtype=bool)
    positions = [
        np.arange(*s) if is_block and s is not None else vectors.rows_by_parent[p]
        for p, s, is_block in zip(parents, spans, block.tolist(), strict=True)
    ]
    rows = np.concatenate(positions)
    lengths = np.array([len(p) for p in positions])
    if not block.any():
        return rows, lengths, matrix[rows] @ query
    products = np.empty(len(rows), dtype=np.float32)
    gathered = np.repeat(~block, lengths)
    products[gathered] = matrix[rows[gathered]] @ query
    ends = np.cumsum(lengths)[block]
    for start, stop in zip((ends - lengths[block]).tolist(), ends.tolist(), strict=True):
        products[start:stop] = matrix[rows[start] : rows[stop - 1] + 1] @ query
    return rows, lengths, products
