"""The CI gate: every reason ``make eval`` must fail, from the report and ``thresholds.toml``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cardrag.evals.judge.report import judge_regressions

THRESHOLDS = Path(__file__).resolve().parent / "thresholds.toml"
"""The gate's floors and margins, each with the measurement that set it."""
GATED_METRICS = ("recall@1", "recall@5", "mrr@10", "ndcg@10")
"""The golden metrics the gate compares with the baselines and holds to floors."""
BASELINES = ("card-atomic", "children")
"""Systems ours must keep up with, measured in the same run on the same machine."""


def regressions(report: dict[str, Any], thresholds: dict[str, Any]) -> list[str]:
    """Every reason ``make eval`` must fail (empty: it passes).

    1. Against the baselines of the same run: for each metric, ours must reach the better of
       card-atomic and children minus ``baseline_margin_questions`` questions' worth
       (``thresholds.toml``). A CPU or library change moves every system together; a
       regression in our own fusion moves ours alone.
    2. Absolute floors (``[golden]``, ``[app]``), set below the lowest value measured across
       runs and machines by the margin ``thresholds.toml`` states.
    3. Every red-team case passes.
    """
    problems = []
    golden = report["systems"]
    questions = max(int(report.get("queries", 0)), 1)
    slack = thresholds.get("gate", {}).get("baseline_margin_questions", 0) / questions
    for metric in GATED_METRICS:
        present = [b for b in BASELINES if metric in golden.get(b, {})]
        if metric not in golden["ours"] or not present:
            continue
        best = max(present, key=lambda b: golden[b][metric])
        if golden["ours"][metric] < golden[best][metric] - slack - 1e-9:
            problems.append(
                f"ours {metric} {golden['ours'][metric]:.3f} < {best} "
                f"{golden[best][metric]:.3f} minus {slack:.3f}"
            )
    for metric, floor in thresholds.get("golden", {}).items():
        if golden["ours"][metric] < floor:
            problems.append(f"ours {metric} {golden['ours'][metric]:.3f} below the floor {floor}")
    for metric, floor in thresholds.get("app", {}).items():
        name, _, bound = metric.rpartition("_")
        value = report["app"][name]
        if (bound == "min" and value < floor) or (bound == "max" and value > floor):
            problems.append(f"{name} {value} outside the {bound} {floor}")
    graded = report.get("answerability", {})
    held = graded.get("refusal", {}).get("held_out", {})
    for key, bound in thresholds.get("answerability", {}).items():
        name, _, side = key.rpartition("_")
        if name == "auroc":
            value = graded.get("held_out_auroc", {}).get("combined (grading)")
        elif name == "ungrouped":
            value = graded.get("ungrouped")
        else:  # "<source>[_<language or kind>]_min|max": a held-out refusal rate
            source, _, within = name.partition("_")
            value = held.get(f"{source} {within}" if within else source, {}).get("rate")
        if value is None:
            continue
        if side == "min" and value < bound:
            problems.append(f"answerability {name} {value} below {bound}")
        if side == "max" and value > bound:
            problems.append(f"answerability {name} {value} above {bound}")
    for section, what in (("names", "brand-name questions"), ("partial", "two-part questions")):
        table = report.get(section, {}).get("held_out", {}).get(section)
        for key, bound in thresholds.get(section, {}).items() if table else ():
            name, _, side = key.rpartition("_")
            value = table[f"{name}_rate"]
            if (side == "min" and value < bound) or (side == "max" and value > bound):
                problems.append(f"{what} {name} {value} outside the {side} {bound}")
    problems += matrix_regressions(report, thresholds)
    problems += judge_regressions(report, thresholds)
    problems += [
        f"red team {r['case_id']} ({r['mode']}): {'; '.join(r['failures'])}"
        for r in report["redteam"]["results"]
        if not r["passed"]
    ]
    return problems


def matrix_regressions(report: dict[str, Any], thresholds: dict[str, Any]) -> list[str]:
    """The question-type matrix's held-out right rates below their ``[matrix]`` floors.

    A key is ``<answerable|not_covered>[_<language or type>]_min``; a key with no held-out row
    is a problem too (a floor that checks nothing cannot fail).
    """
    matrix = report.get("matrix", {}).get("held_out", {})
    problems = []
    for key, bound in thresholds.get("matrix", {}).items() if matrix else ():
        name, _, side = key.rpartition("_")
        for group in ("answerable", "not_covered"):
            if name == group or name.startswith(f"{group}_"):
                row = matrix.get(name.replace(f"{group}_", f"{group} ", 1))
                break
        else:
            row = None
        if row is None:
            problems.append(f"question-type matrix: no held-out row for {key}")
        elif side == "min" and row["rate"] < bound:
            problems.append(f"question-type matrix {name} right {row['rate']} below {bound}")
    return problems
