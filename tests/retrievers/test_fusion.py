from __future__ import annotations

from retrievers.fusion import ChildHit, best_per_parent


def test_best_per_parent_keeps_each_parents_best_child() -> None:
    hits = [
        ChildHit("a::00", "a", 0.40),
        ChildHit("b::00", "b", 0.70),
        ChildHit("a::01", "a", 0.90),
        ChildHit("c::02", "c", 0.65),
        ChildHit("b::01", "b", 0.20),
        ChildHit("c::00", "c", 0.10),
    ]
    ranked = best_per_parent(hits)
    assert [(p.parent_id, p.score, p.best.child_id) for p in ranked] == [
        ("a", 0.90, "a::01"),
        ("b", 0.70, "b::00"),
        ("c", 0.65, "c::02"),
    ]


def test_best_per_parent_breaks_ties_by_parent_then_child_id() -> None:
    hits = [
        ChildHit("z::01", "z", 0.5),
        ChildHit("a::03", "a", 0.5),
        ChildHit("a::01", "a", 0.5),
        ChildHit("m::00", "m", 0.5),
    ]
    ranked = best_per_parent(hits)
    assert [(p.parent_id, p.best.child_id) for p in ranked] == [
        ("a", "a::01"),
        ("m", "m::00"),
        ("z", "z::01"),
    ]
    assert best_per_parent(list(reversed(hits))) == ranked


def test_best_per_parent_of_nothing_is_empty() -> None:
    assert best_per_parent([]) == []
