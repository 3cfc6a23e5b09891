from __future__ import annotations

from typing import Any

from evals.run import gate


def _report(
    ours: dict[str, float], atomic: dict[str, float], *, rt_ok: bool = True
) -> dict[str, Any]:
    return {
        "systems": {"ours": ours, "card-atomic": atomic},
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


def test_gate_passes_when_ours_is_at_least_card_atomic_and_floors_hold() -> None:
    report = _report({"recall@5": 0.9, "mrr@10": 0.8}, {"recall@5": 0.9, "mrr@10": 0.7})
    thresholds = {
        "golden": {"recall@5": 0.85},
        "app": {"citation_precision_min": 0.75, "false_refusal_rate_max": 0.1},
    }
    assert gate(report, thresholds) == []


def test_gate_fails_on_each_kind_of_regression() -> None:
    report = _report(
        {"recall@5": 0.8, "mrr@10": 0.8}, {"recall@5": 0.9, "mrr@10": 0.7}, rt_ok=False
    )
    thresholds = {
        "golden": {"mrr@10": 0.85},
        "app": {"citation_precision_min": 0.9, "false_refusal_rate_max": 0.01},
    }
    assert gate(report, thresholds) == [
        "ours recall@5 0.800 < card-atomic 0.900",
        "ours mrr@10 0.800 below the floor 0.85",
        "citation_precision 0.8 outside the min 0.9",
        "false_refusal_rate 0.05 outside the max 0.01",
        "red team rt01 (offline): cites x",
    ]
