"""The CI gate (:mod:`cardrag.evals.regressions`)."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from cardrag.evals.regressions import THRESHOLDS, regressions


def _report(
    ours: dict[str, float],
    atomic: dict[str, float],
    children: dict[str, float] | None = None,
    *,
    rt_ok: bool = True,
    queries: int = 88,
) -> dict[str, Any]:
    return {
        "queries": queries,
        "systems": {"ours": ours, "card-atomic": atomic, "children": children or {}},
        "app": {"citation_precision": 0.8, "false_refusal_rate": 0.05},
        "redteam": {
            "results": [
                {
                    "case_id": "rt01",
                    "mode": "offline",
                    "passed": rt_ok,
                    "failures": [] if rt_ok else ["cites x"],
                }
            ]
        },
    }


ONE_QUESTION = {"gate": {"baseline_margin_questions": 1}}


def test_gate_passes_when_ours_is_at_least_the_better_baseline_and_floors_hold() -> None:
    report = _report({"recall@5": 0.9, "mrr@10": 0.8}, {"recall@5": 0.9, "mrr@10": 0.7})
    thresholds = {
        "golden": {"recall@5": 0.85},
        "app": {"citation_precision_min": 0.75, "false_refusal_rate_max": 0.1},
    }
    assert regressions(report, thresholds) == []


def test_one_question_below_the_better_baseline_passes_two_fail() -> None:
    # 88 questions: one question is 0.0114 of a metric
    atomic = {"recall@1": 0.896}
    assert regressions(_report({"recall@1": 0.896 - 1 / 88}, atomic), ONE_QUESTION) == []
    assert regressions(_report({"recall@1": 0.896 - 2 / 88}, atomic), ONE_QUESTION) == [
        "ours recall@1 0.873 < card-atomic 0.896 minus 0.011"
    ]


def test_the_better_of_the_two_baselines_is_the_bar() -> None:
    report = _report({"mrr@10": 0.93}, {"mrr@10": 0.90}, {"mrr@10": 0.95})
    assert regressions(report, {}) == ["ours mrr@10 0.930 < children 0.950 minus 0.000"]


def test_gate_fails_on_each_kind_of_regression() -> None:
    report = _report(
        {"recall@5": 0.8, "mrr@10": 0.8}, {"recall@5": 0.9, "mrr@10": 0.7}, rt_ok=False
    )
    thresholds = {
        "golden": {"mrr@10": 0.85},
        "app": {"citation_precision_min": 0.9, "false_refusal_rate_max": 0.01},
    }
    assert regressions(report, thresholds) == [
        "ours recall@5 0.800 < card-atomic 0.900 minus 0.000",
        "ours mrr@10 0.800 below the floor 0.85",
        "citation_precision 0.8 outside the min 0.9",
        "false_refusal_rate 0.05 outside the max 0.01",
        "red team rt01 (offline): cites x",
    ]


# Golden figures measured on one machine (AMD EPYC, 2026-11-30): the shipped defaults, and the
# two real regressions issue 16 asks the gate to catch. Each line: R@1, R@5, MRR@10, nDCG@10.
MEASURED = {
    "card-atomic": (0.896, 0.994, 0.970, 0.975),
    "children": (0.867, 0.977, 0.938, 0.952),
    "ours": (0.902, 0.994, 0.975, 0.978),
    "ours, card rows off": (0.879, 1.000, 0.959, 0.965),
    "ours, BM25 off": (0.873, 0.994, 0.958, 0.967),
}
NAMES = ("recall@1", "recall@5", "mrr@10", "ndcg@10")


def _measured(ours: str) -> dict[str, Any]:
    report = _report(
        dict(zip(NAMES, MEASURED[ours], strict=True)),
        dict(zip(NAMES, MEASURED["card-atomic"], strict=True)),
        dict(zip(NAMES, MEASURED["children"], strict=True)),
    )
    report["app"] = {
        "citation_precision": 0.914,
        "false_refusal_rate": 0.011,
        "uncited_rate": 0.0,
        "multi_card": 12,
        "ungrouped": 0,
    }
    return report


def test_the_shipped_thresholds_pass_the_shipped_defaults() -> None:
    thresholds = tomllib.loads(THRESHOLDS.read_text(encoding="utf-8"))
    assert regressions(_measured("ours"), thresholds) == []


@pytest.mark.parametrize("regression", ["ours, card rows off", "ours, BM25 off"])
def test_the_shipped_thresholds_fail_a_real_regression(regression: str) -> None:
    thresholds = tomllib.loads(THRESHOLDS.read_text(encoding="utf-8"))
    problems = regressions(_measured(regression), thresholds)
    # caught by the same-run comparison (CPU-proof) and by the floors alike
    assert "ours recall@1" in problems[0]
    assert "< card-atomic 0.896 minus 0.011" in problems[0]
    assert any("below the floor" in p for p in problems)


def test_refusal_rates_are_held_to_floors_and_false_refusals_to_ceilings() -> None:
    report = _report({}, {})
    report["answerability"] = {
        "held_out_auroc": {"combined (grading)": 0.93},
        "refusal": {
            "held_out": {
                "uncovered": {"rate": 0.85},
                "uncovered en": {"rate": 0.6},
                "translated": {"rate": 0.51},
            }
        },
    }
    thresholds = {
        "answerability": {
            "auroc_min": 0.95,
            "uncovered_min": 0.8,
            "uncovered_en_min": 0.7,
            "translated_max": 0.5,
            "uncovered_pt_min": 0.9,  # not measured: not gated
        }
    }
    assert regressions(report, thresholds) == [
        "answerability auroc 0.93 below 0.95",
        "answerability uncovered_en 0.6 below 0.7",
        "answerability translated 0.51 above 0.5",
    ]


def test_an_answer_that_mixes_cards_fails_the_gate() -> None:
    thresholds = tomllib.loads(THRESHOLDS.read_text(encoding="utf-8"))
    report = _measured("ours")
    report["app"]["ungrouped"] = 1
    report["answerability"] = {"ungrouped": 2}
    problems = regressions(report, thresholds)
    assert "ungrouped 1 outside the max 0" in problems
    assert "answerability ungrouped 2 above 0" in problems


def test_brand_name_questions_are_held_to_their_bounds() -> None:
    thresholds = tomllib.loads(THRESHOLDS.read_text(encoding="utf-8"))
    report = _measured("ours")
    report["names"] = {"held_out": {"names": {"refused_rate": 0.5, "right_rate": 0.5}}}
    problems = regressions(report, thresholds)
    assert "brand-name questions refused 0.5 outside the max 0.1" in problems
    assert "brand-name questions right 0.5 outside the min 0.9" in problems
    report["names"]["held_out"]["names"] = {"refused_rate": 0.075, "right_rate": 0.925}
    assert regressions(report, thresholds) == []


def test_two_part_questions_are_held_to_their_bounds() -> None:
    thresholds = tomllib.loads(THRESHOLDS.read_text(encoding="utf-8"))
    report = _measured("ours")
    report["partial"] = {"held_out": {"partial": {"refused_rate": 0.333, "right_rate": 0.667}}}
    assert regressions(report, thresholds) == [
        "two-part questions refused 0.333 outside the max 0.17",
        "two-part questions right 0.667 outside the min 0.83",
    ]
    report["partial"]["held_out"]["partial"] = {"refused_rate": 0.083, "right_rate": 0.917}
    assert regressions(report, thresholds) == []


def test_the_matrix_floors_gate_its_held_out_rates() -> None:
    report = _measured("ours")
    report["matrix"] = {
        "held_out": {
            "answerable": {"questions": 114, "right": 45, "rate": 0.395},
            "not_covered": {"questions": 96, "right": 15, "rate": 0.156},
        }
    }
    thresholds = {
        "matrix": {"answerable_min": 0.35, "not_covered_min": 0.17, "answerable_pt_min": 0.3}
    }
    assert regressions(report, thresholds) == [
        "question-type matrix not_covered right 0.156 below 0.17",
        "question-type matrix: no held-out row for answerable_pt_min",
    ]
