"""One similarity for every read: a distance in any space, or two vectors, as a cosine.

Chroma returns distances (lower is better); every hit carries a similarity instead. For
unit-length vectors:

* ``cosine``: distance = 1 - cos, so similarity = 1 - distance;
* ``ip``: distance = 1 - dot, so similarity = 1 - distance;
* ``l2``: squared L2, distance = 2 - 2 cos, so similarity = 1 - distance / 2.

Every similarity is therefore the cosine of the angle between the question and the row, in
[-1, 1], whatever space the collection declares. Embeddings that are not unit length (a model
that does not normalise, LangChain's ``DeterministicFakeEmbedding``) make those formulas wrong,
so for a question that is not unit length the rows' own vectors are read with the query and the
cosine is computed from them (:func:`query_include`, :func:`query_scores`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

SPACES = ("cosine", "ip", "l2")
"""The distance spaces a Chroma collection may declare."""


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


UNIT_TOLERANCE = 1e-3
"""How far from 1 a vector's length may be and still count as unit length (float32 rounding
and int8 models stay far inside it; an unnormalised model is far outside it)."""


def unit_length(vector: Sequence[float]) -> bool:
    """Whether a vector is unit length (within :data:`UNIT_TOLERANCE`).

    Example:
        >>> unit_length([0.6, 0.8]), unit_length([3.0, 4.0])
        (True, False)
    """
    return abs(float(np.linalg.norm(np.asarray(vector, dtype=np.float64))) - 1.0) <= UNIT_TOLERANCE


def query_include(vector: Sequence[float]) -> list[str]:
    """What a Chroma query must return to score its rows as cosines: distances, or vectors."""
    return ["distances"] if unit_length(vector) else ["distances", "embeddings"]


def query_scores(found: Any, vector: Sequence[float], space: str) -> list[float]:
    """The cosine similarity of each row of a Chroma query (``include`` of :func:`query_include`).

    From the rows' vectors where the query returned them, else from the distances.
    """
    rows = found.get("embeddings")
    if rows is not None and len(rows) and rows[0] is not None and len(rows[0]):
        return cosine_similarities(vector, rows[0])
    return [distance_to_similarity(d, space) for d in (found["distances"] or [[]])[0]]


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
    # row by row (a product, then numpy's pairwise sum of each row), not a matrix product: a
    # row's score must not depend on which rows were read with it (BLAS blocks rows, and the
    # last bit of a score then moved with the batch)
    dots = (matrix * vector).sum(axis=1)
    norms = np.sqrt((matrix * matrix).sum(axis=1)) * (np.linalg.norm(vector) or 1.0)
    return [float(x) for x in dots / np.where(norms == 0, 1.0, norms)]


def scored_query(
    store: Any, vector: Sequence[float], fetch: int, where: Any, extra: Sequence[str] = ()
) -> tuple[Any, list[float]]:
    """One Chroma vector query of ``store``: what it returned, and each row's cosine.

    It reads what scoring needs (:func:`query_include`) and ``extra`` (``metadatas``,
    ``documents``) besides.
    """
    found = store._collection.query(
        query_embeddings=np.asarray([vector], dtype=np.float32),
        n_results=fetch,
        where=where,
        include=[*query_include(vector), *extra],
    )
    return found, query_scores(found, vector, collection_space(store))


def collection_space(vectorstore: Any) -> str:
    """The distance space a Chroma collection declares (``l2`` is Chroma's default)."""
    config = vectorstore._collection.configuration or {}
    for index in ("hnsw", "spann"):
        section = config.get(index) or {}
        if section.get("space"):
            return str(section["space"])
    metadata = vectorstore._collection.metadata or {}
    return str(metadata.get("hnsw:space", "l2"))
