from __future__ import annotations

import pytest

from cardrag.retrievers.child_hit import ChildHit
from cardrag.retrievers.fusion import (
    LEAD_GAIN_BM25,
    FusionWeights,
    ParentHit,
    agreed_first,
    at_least,
    best_per_parent,
    card_rows_apply,
    lead,
    lead_weight,
    rank_parents,
    reciprocal_rank_fusion,
)


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


def test_reciprocal_rank_fusion_by_hand() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "a"]], weights=[1.0, 0.5], c=60)
    assert [d for d, _ in fused] == ["a", "c", "b"]
    assert dict(fused) == pytest.approx(
        {"a": 1 / 61 + 0.5 / 62, "c": 1 / 63 + 0.5 / 61, "b": 1 / 62}
    )


def test_reciprocal_rank_fusion_rejects_mismatched_weights() -> None:
    with pytest.raises(ValueError, match="got 2 rankings but 1 weights"):
        reciprocal_rank_fusion([["a"], ["b"]], weights=[1.0])


def _hit(child: str, score: float, chunk_index: int = 0) -> ChildHit:
    return ChildHit(child, child.split("::")[0], score, metadata={"chunk_index": chunk_index})


def test_rank_parents_with_one_ranking_is_best_per_parent() -> None:
    hits = [_hit("a::00", 0.5), _hit("b::01", 0.7), _hit("a::02", 0.9)]
    ranked = rank_parents(hits)
    assert [(p.parent_id, p.score, p.best.child_id, p.fused) for p in ranked] == [
        ("a", 0.9, "a::02", None),
        ("b", 0.7, "b::01", None),
    ]


def test_rank_parents_fuses_dense_card_and_bm25_and_gates_on_dense() -> None:
    hits = [
        _hit("a::00", 0.60),
        _hit("b::00", 0.55),
        _hit("c::00", 0.20),  # below the gate: BM25 cannot rescue it
        _hit("b::card", 0.70, chunk_index=-1),
    ]
    lexical = best_per_parent([ChildHit("c::00", "c", 9.0), ChildHit("b::00", "b", 5.0)])
    ranked = rank_parents(
        hits, lexical, min_similarity=0.3, weights=FusionWeights(1, 1, 1), c=60, adaptive=False
    )
    assert [p.parent_id for p in ranked] == ["b", "a"]
    b = ranked[0]
    assert b.score == 0.70  # the card row's similarity is b's best dense score
    assert b.best.child_id == "b::00"  # but the matched passage is a real child
    # c is ranked (first by BM25) before the gate drops it: b is second there, not first
    assert b.fused == pytest.approx((1 / 62 + 1 / 61 + 1 / 62) / 3)  # averaged over 3 weights
    assert ranked[1].fused == pytest.approx((1 / 61) / 3)


def test_the_gate_filters_the_ranking_and_never_reorders_what_passes() -> None:
    # c leads BM25 but is below the gate. Ranking only the passing parents would move b up
    # BM25 (second -> first) and ahead of d: the gate would reorder what passes.
    hits = [_hit("d::00", 0.90), _hit("b::00", 0.85), _hit("a::00", 0.80), _hit("c::00", 0.50)]
    lexical = best_per_parent(
        [ChildHit("c::00", "c", 9.0), ChildHit("b::00", "b", 8.0), ChildHit("d::00", "d", 7.0)]
    )
    weights = FusionWeights(1, 0, 1)
    ungated = rank_parents(hits, lexical, weights=weights, c=1, adaptive=False)
    gated = rank_parents(hits, lexical, min_similarity=0.6, weights=weights, c=1, adaptive=False)
    assert [p.parent_id for p in ungated] == ["d", "c", "b", "a"]
    assert [p.parent_id for p in gated] == ["d", "b", "a"]
    assert [p.fused for p in gated] == [ungated[0].fused, *(p.fused for p in ungated[2:])]
    assert gated[0].fused == pytest.approx((1 / 2 + 1 / 4) / 2)  # d: dense 1st, BM25 3rd


def test_rank_parents_zero_weight_leaves_a_ranking_out() -> None:
    hits = [_hit("a::00", 0.6), _hit("b::00", 0.5)]
    lexical = best_per_parent([ChildHit("b::00", "b", 3.0)])
    ranked = rank_parents(hits, lexical, weights=FusionWeights(bm25=0.0))
    assert [(p.parent_id, p.fused) for p in ranked] == [("a", None), ("b", None)]


def test_a_card_without_a_card_row_is_not_penalised_by_that_ranking() -> None:
    long = ChildHit("long::00", "long", 0.80, metadata={"chunk_index": 0, "has_card_row": False})
    short = ChildHit("short::00", "short", 0.70, metadata={"chunk_index": 0, "has_card_row": True})
    short_row = ChildHit("short::card", "short", 0.60, metadata={"chunk_index": -1})
    ranked = rank_parents(
        [long, short, short_row], weights=FusionWeights(1, 1, 1), c=60, adaptive=False
    )
    # long: first of the dense list, the card list does not apply -> (1/61) / 1
    # short: second of the dense list, first of the card list -> (1/62 + 1/61) / 2
    assert [(p.parent_id, p.fused) for p in ranked] == [
        ("long", pytest.approx(1 / 61)),
        ("short", pytest.approx((1 / 62 + 1 / 61) / 2)),
    ]


def test_the_floor_applies_to_the_best_per_parent_score() -> None:
    def parent(pid: str, score: float) -> ParentHit:
        return ParentHit(pid, score, ChildHit(f"{pid}::00", pid, score))

    ranked = [parent("strong", 0.62), parent("edge", 0.30), parent("weak", 0.29)]
    assert [p.parent_id for p in at_least(ranked, 0.30)] == ["strong", "edge"]
    assert [p.parent_id for p in at_least(ranked, 0.9)] == []
    assert [p.parent_id for p in at_least(ranked, None)] == ["strong", "edge", "weak"]


def test_the_card_row_ranking_sits_out_where_most_parents_have_no_card_row() -> None:
    def child(pid: str, score: float, row: bool) -> ChildHit:
        return ChildHit(f"{pid}::00", pid, score, metadata={"chunk_index": 0, "has_card_row": row})

    # three long articles without a card row, one short one with: the short one's card row
    # would head its own ranking whatever the question
    hits = [
        child("a", 0.80, False),
        child("b", 0.78, False),
        child("short", 0.70, True),
        child("c", 0.60, False),
        ChildHit("short::card", "short", 0.65, metadata={"chunk_index": -1}),
    ]
    lexical = best_per_parent([ChildHit("b::00", "b", 9.0), ChildHit("a::00", "a", 5.0)])
    ranked = rank_parents(hits, lexical, weights=FusionWeights(1, 1, 1), c=1, adaptive=False)
    # children and BM25 only: b (2nd, 1st), a (1st, 2nd) tie and the id decides
    assert [p.parent_id for p in ranked] == ["a", "b", "short", "c"]
    assert ranked[0].fused == pytest.approx((1 / 2 + 1 / 3) / 2)
    assert ranked[2].fused == pytest.approx((1 / 4) / 2)  # not (1/4 + 1/2) / 3


def test_card_rows_apply_where_at_least_half_the_ranked_parents_have_one() -> None:
    assert card_rows_apply(without_row=0, ranked=0)
    assert card_rows_apply(without_row=5, ranked=10)
    assert not card_rows_apply(without_row=6, ranked=10)


def test_a_ranking_sure_of_its_first_parent_counts_for_more() -> None:
    # dense: a and b a hair apart; BM25: b twice a's score
    hits = [_hit("a::00", 0.81), _hit("b::00", 0.80)]
    lexical = best_per_parent([ChildHit("b::00", "b", 10.0), ChildHit("a::00", "a", 5.0)])
    weights = FusionWeights(1, 0, 0.75)
    plain = rank_parents(hits, lexical, weights=weights, c=1, adaptive=False)
    adaptive = rank_parents(hits, lexical, weights=weights, c=1)
    assert [p.parent_id for p in plain] == ["a", "b"]
    assert [p.parent_id for p in adaptive] == ["b", "a"]
    dense = 1 + 40 * (0.01 / 0.81)  # lead 1.2 %, gain 40
    bm25 = 0.75 * (1 + 4)  # lead 50 %, gain 10: capped at 1 + 4
    assert lead_weight(0.75, 0.5, LEAD_GAIN_BM25) == pytest.approx(bm25)
    assert adaptive[0].fused == pytest.approx((dense / 3 + bm25 / 2) / (dense + bm25))
    assert adaptive[1].fused == pytest.approx((dense / 2 + bm25 / 3) / (dense + bm25))


def test_the_parent_bm25_and_a_dense_ranking_put_first_goes_first() -> None:
    # children and BM25 put a first; the card rows, sure of b, would out-vote them
    hits = [
        _hit("a::00", 0.800),
        _hit("b::00", 0.799),
        _hit("b::card", 0.800, chunk_index=-1),
        _hit("a::card", 0.400, chunk_index=-1),
    ]
    lexical = best_per_parent([ChildHit("a::00", "a", 10.0), ChildHit("b::00", "b", 9.9)])
    ranked = rank_parents(hits, lexical, weights=FusionWeights(1, 1, 0.75), c=1)
    assert [p.parent_id for p in ranked] == ["a", "b"]
    children = 1 + 40 * (0.001 / 0.8)
    cards = 1 + 4  # lead 50 %: capped
    bm25 = 0.75 * (1 + 10 * 0.01)
    total = children + cards + bm25
    b = (children / 3 + cards / 2 + bm25 / 3) / total
    # without the agreement the card rows' lead alone would have put b first: a takes b's score
    assert b > (children / 2 + cards / 3 + bm25 / 2) / total
    assert [p.fused for p in ranked] == [pytest.approx(b), pytest.approx(b)]


def test_the_two_dense_rankings_alone_do_not_count_as_agreement() -> None:
    assert agreed_first([["a", "b"], ["b", "a"]], ["b", "a"]) == "b"
    assert agreed_first([["a"], ["a"]], ["b"]) is None  # the same model twice
    assert agreed_first([["a"], []], []) is None
    assert agreed_first([[]], ["a"]) is None


def test_lead_is_relative_to_the_first_score() -> None:
    assert lead([0.5, 0.25]) == pytest.approx(0.5)
    assert lead([8.0, 4.0, 1.0]) == pytest.approx(0.5)
    assert lead([0.9]) == 0.0
    assert lead([-0.1, -0.2]) == 0.0


def test_sentence_rows_are_a_ranking_of_their_own_that_never_sets_score_or_provenance() -> None:
    def row(child: str, score: float, chunk: int) -> ChildHit:
        return ChildHit(child, child.split("::")[0], score, metadata={"chunk_index": chunk})

    hits = [
        row("a::00", 0.80, 0),
        row("b::00", 0.78, 0),
        row("d::00", 0.76, 0),
        row("b::s03", 0.90, -5),  # b's sentence: the best row of all, on a shorter text
        row("d::s00", 0.85, -2),
        row("a::s00", 0.70, -2),
        row("c::s01", 0.95, -3),  # c: found by a sentence row alone
    ]
    weights = FusionWeights(dense=1, card=1, bm25=1, sentence=1)
    ranked = rank_parents(hits, weights=weights, c=1, adaptive=False)
    # children: a, b, d; sentences: (c,) b, d, a. c has no child's score: the gate could not
    # judge it, so it is not ranked (the retriever reads its children first)
    assert [(p.parent_id, p.score, p.best.child_id) for p in ranked] == [
        ("b", 0.78, "b::00"),
        ("a", 0.80, "a::00"),
        ("d", 0.76, "d::00"),
    ]
    assert [p.fused for p in ranked] == pytest.approx(
        [(1 / 3 + 1 / 2) / 2, (1 / 2 + 1 / 4) / 2, (1 / 4 + 1 / 3) / 2]
    )
    # weight 0: the children's order alone, as without sentence rows
    plain = rank_parents(hits, weights=FusionWeights(1, 1, 1, sentence=0), c=1, adaptive=False)
    assert [(p.parent_id, p.fused) for p in plain] == [("a", None), ("b", None), ("d", None)]
