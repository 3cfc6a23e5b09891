from __future__ import annotations

import pytest

from cardrag.retrievers.fusion import ChildHit, ParentHit
from cardrag.retrievers.scoring import at_least, cosine_similarities, distance_to_similarity


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


def _parent(pid: str, score: float) -> ParentHit:
    return ParentHit(pid, score, ChildHit(f"{pid}::00", pid, score))


def test_gate_applies_to_best_per_parent_score() -> None:
    ranked = [_parent("strong", 0.62), _parent("edge", 0.30), _parent("weak", 0.29)]
    assert [p.parent_id for p in at_least(ranked, 0.30)] == ["strong", "edge"]
    assert [p.parent_id for p in at_least(ranked, 0.9)] == []
    assert [p.parent_id for p in at_least(ranked, None)] == ["strong", "edge", "weak"]


def test_cosine_similarities_of_rows_read_without_a_search() -> None:
    rows = [[3.0, 4.0], [0.0, 2.0], [-1.0, 0.0], [0.0, 0.0]]
    assert cosine_similarities([1.0, 0.0], rows) == [0.6, 0.0, -1.0, 0.0]
    assert cosine_similarities([1.0, 0.0], []) == []
