"""Hits and their orders (:mod:`cardrag.retrievers.child_hit`)."""

from __future__ import annotations

from cardrag.ingest import metadata as md
from cardrag.retrievers.child_hit import ChildHit, best_by_parent, best_hits, nearest


def test_equal_scores_go_to_the_lower_child_id_whatever_order_they_came_in() -> None:
    hits = [ChildHit("b::00", "b", 0.5), ChildHit("a::01", "a", 0.5), ChildHit("a::00", "a", 0.9)]
    assert [h.child_id for h in nearest(hits, 3)] == ["a::00", "a::01", "b::00"]
    assert [h.child_id for h in nearest(list(reversed(hits)), 2)] == ["a::00", "a::01"]
    assert best_by_parent([("a::02", "a", 0.5), ("a::01", "a", 0.5)]) == {"a::01": 0.5}
    assert [h.child_id for h in best_hits(hits)] == ["b::00", "a::00"]  # the hits' own order


def test_a_hit_knows_its_kind_from_its_chunk_index() -> None:
    def kind(index: int | None) -> str:
        return ChildHit("a::x", "a", 0.1, metadata={md.CHUNK_INDEX: index}).kind

    assert [kind(0), kind(None), kind(md.CARD_ROW), kind(md.sentence_row(2))] == [
        "child",
        "child",
        "card",
        "sentence",
    ]
