"""Exact scans over saved row vectors (:mod:`cardrag.retrievers.scan`)."""

from __future__ import annotations

import numpy as np
import pytest

from cardrag.ingest.index.vectors import RowVectors
from cardrag.retrievers import scan
from cardrag.retrievers.scan import best_of_parents, scores_of


@pytest.mark.parametrize("block_rows", [1, 32])  # rows read as a slice of the matrix, or gathered
def test_each_parents_best_row_ties_to_the_lower_child_id(
    block_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scan, "BLOCK_ROWS", block_rows)
    same = np.array([[0.6, 0.8], [1, 0], [0.6, 0.8], [0.6, 0.8]], dtype=np.float32)
    vectors = RowVectors(["a::10", "a::02", "a::09", "b::00"], same)
    assert best_of_parents(vectors, [0.6, 0.8], ["b", "a", "z"])[0] == ["b::00", "a::09"]


def test_a_parents_best_row_is_chosen_by_its_exact_cosine_where_float32_ties() -> None:
    # both rows round to a cosine of 1.0 in float32; only the second is exactly 1.0
    matrix = np.array([[1.0, 1e-4], [1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    vectors = RowVectors(["a::00", "a::01", "b::00"], matrix)
    ids, scores = best_of_parents(vectors, [1.0, 0.0], ["a", "b"])
    assert ids == ["a::01", "b::00"]
    assert scores == [1.0, 0.0]
    assert scores_of(vectors, [1.0, 0.0], ["a::00"])[1][0] < 1.0  # the first is below, exactly


def test_a_parents_best_row_is_the_nearest_in_angle_not_the_longest() -> None:
    # a::00 has the larger dot product (6.0 against 0.1); a::01 points the question's way
    matrix = np.array([[10.0, 0.0], [0.06, 0.08], [0.0, 0.0]], dtype=np.float32)
    vectors = RowVectors(["a::00", "a::01", "b::00"], matrix)
    ids, scores = best_of_parents(vectors, [0.6, 0.8], ["a", "b"])
    assert ids == ["a::01", "b::00"]  # a zero row scores 0, not a division by zero
    assert [round(s, 6) for s in scores] == [1.0, 0.0]


@pytest.mark.parametrize("block_rows", [1, 32])
def test_a_parent_in_one_block_scores_as_a_parent_whose_rows_are_apart(
    block_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scan, "BLOCK_ROWS", block_rows)
    rows = {"a::00": [1.0, 0.0], "a::01": [0.6, 0.8], "b::00": [0.0, 1.0], "b::01": [0.8, 0.6]}
    apart = ["a::00", "b::00", "a::01", "b::01"]
    together = ["a::00", "a::01", "b::00", "b::01"]
    read = []
    for order in (apart, together):
        vectors = RowVectors(order, np.array([rows[i] for i in order], dtype=np.float32))
        read.append((sorted(vectors.spans), best_of_parents(vectors, [0.0, 1.0], ["b", "a"])))
    assert [spans for spans, _ in read] == [[], ["a", "b"]]
    for _, (ids, scores) in read:
        assert ids == ["b::00", "a::01"]
        assert [round(s, 6) for s in scores] == [1.0, 0.8]


def test_long_parents_read_as_slices_keep_the_order_of_the_parents_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(scan, "BLOCK_ROWS", 3)
    ids = ["a::00", "b::00", "b::01", "b::02", "c::00"]
    matrix = np.array([[1, 0], [1, 0], [0, 1], [1, 1], [0, 1]], dtype=np.float32)
    vectors = RowVectors(ids, matrix)
    got, scores = best_of_parents(vectors, [0.0, 1.0], ["c", "b", "a"])  # b: one slice
    assert got == ["c::00", "b::01", "a::00"]
    assert [round(s, 6) for s in scores] == [1.0, 1.0, 0.0]
