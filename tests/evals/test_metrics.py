from __future__ import annotations

import math

import pytest

from cardrag.evals.metrics import evaluate, hit_rate_at_k, mean, mrr_at_k, ndcg_at_k, recall_at_k

QRELS = {"q1": {"a": 1, "c": 1}, "q2": {"x": 1}, "q3": {"z": 1}}
RUN = {
    "q1": {"a": 0.9, "b": 0.8, "c": 0.7},  # relevant at ranks 1 and 3
    "q2": {"y": 0.9, "x": 0.5},  # relevant at rank 2
    "q3": {"y": 0.4},  # relevant never retrieved
}


def test_recall() -> None:
    assert recall_at_k(QRELS, RUN, 1) == {"q1": 0.5, "q2": 0.0, "q3": 0.0}
    assert recall_at_k(QRELS, RUN, 3) == {"q1": 1.0, "q2": 1.0, "q3": 0.0}


def test_hit_rate() -> None:
    assert hit_rate_at_k(QRELS, RUN, 1) == {"q1": 1.0, "q2": 0.0, "q3": 0.0}


def test_mrr() -> None:
    assert mrr_at_k(QRELS, RUN, 10) == {"q1": 1.0, "q2": 0.5, "q3": 0.0}
    assert mrr_at_k(QRELS, RUN, 1) == {"q1": 1.0, "q2": 0.0, "q3": 0.0}


def test_ndcg_by_hand() -> None:
    got = ndcg_at_k(QRELS, RUN, 3)
    assert got["q1"] == pytest.approx((1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3)))
    assert got["q2"] == pytest.approx(1 / math.log2(3))
    assert got["q3"] == 0.0


def test_missing_query_in_run_scores_zero_and_ties_break_by_id() -> None:
    assert mrr_at_k({"q": {"b": 1}}, {}, 5) == {"q": 0.0}
    assert mrr_at_k({"q": {"b": 1}}, {"q": {"b": 0.5, "a": 0.5}}, 5) == {"q": 0.5}
    assert mean({}) == 0.0


def test_metrics_agree_with_ranx() -> None:
    ranx = pytest.importorskip("ranx")
    ours = evaluate(QRELS, RUN)
    theirs = ranx.evaluate(
        ranx.Qrels(QRELS),
        ranx.Run(RUN),
        ["recall@1", "recall@5", "mrr@10", "ndcg@10", "hit_rate@5"],
    )
    assert ours == pytest.approx(
        {
            "recall@1": theirs["recall@1"],
            "recall@5": theirs["recall@5"],
            "mrr@10": theirs["mrr@10"],
            "ndcg@10": theirs["ndcg@10"],
            "hit@5": theirs["hit_rate@5"],
        }
    )
