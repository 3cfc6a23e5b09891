"""Distances and vectors as cosines (:mod:`cardrag.retrievers.similarity`)."""

from __future__ import annotations

import pytest

from cardrag.retrievers.similarity import cosine_similarities, distance_to_similarity


@pytest.mark.parametrize(
    ("distance", "space", "similarity"),
    [
        (0.0, "cosine", 1.0),
        (0.25, "cosine", 0.75),
        (1.5, "cosine", -0.5),
        (0.5, "l2", 0.75),
        (4.0, "l2", -1.0),
        (0.2, "ip", 0.8),
    ],
)
def test_distance_to_similarity(distance: float, space: str, similarity: float) -> None:
    assert distance_to_similarity(distance, space) == pytest.approx(similarity)


def test_unknown_space_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown distance space 'dot'"):
        distance_to_similarity(0.1, "dot")


def test_cosine_similarities_of_rows_read_without_a_search() -> None:
    rows = [[3.0, 4.0], [0.0, 2.0], [-1.0, 0.0], [0.0, 0.0]]
    assert cosine_similarities([1.0, 0.0], rows) == [0.6, 0.0, -1.0, 0.0]
    assert cosine_similarities([1.0, 0.0], []) == []


def test_a_query_is_scored_from_its_rows_vectors_when_the_question_is_not_unit_length() -> None:
    from cardrag.retrievers.similarity import query_include, query_scores

    assert query_include([0.6, 0.8]) == ["distances"]
    assert query_include([3.0, 4.0]) == ["distances", "embeddings"]
    # squared l2 of (3, 4) and (4, 3) is 2; read as unit vectors that would be a cosine of 0
    found = {"distances": [[2.0]], "embeddings": [[[4.0, 3.0]]]}
    assert query_scores(found, [3.0, 4.0], "l2") == [24.0 / 25.0]
    assert query_scores({"distances": [[0.5]], "embeddings": None}, [0.6, 0.8], "l2") == [0.75]
