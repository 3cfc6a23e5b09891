"""The judge's part of ``make eval``: its table and its floors."""

import json
import tomllib

from cardrag.evals.judge.report import judge_regressions, render_judge
from cardrag.evals.regressions import THRESHOLDS
from cardrag.retrievers.judge.model import MANIFEST


def _row(auroc: float, best: float) -> dict[str, float]:
    return {"auroc": auroc, "best_is_labelled": best, "answered": 31, "not_covered": 23}


MEASURED = {
    "judge": {"held_out": _row(0.78, 0.65), "held_out pt": _row(0.70, 0.55)},
    "cosine": {"held_out": _row(0.66, 0.53), "held_out pt": _row(0.70, 0.59)},
}


def test_the_table_has_one_row_per_part_and_one_column_pair_per_scorer() -> None:
    lines = render_judge(MEASURED)
    assert lines[-4:] == [
        "| part | judge AUROC | best | cosine AUROC | best | questions |",
        "|---|---|---|---|---|---|",
        "| held_out | 0.78 | 0.65 | 0.66 | 0.53 | 31 + 23 |",
        "| held_out pt | 0.7 | 0.55 | 0.7 | 0.59 | 31 + 23 |",
    ]


def test_the_floors_hold_the_held_out_figures_per_language() -> None:
    floors = {"judge": {"auroc_min": 0.75, "auroc_pt_min": 0.72, "best_is_labelled_min": 0.6}}
    assert judge_regressions({"judge": MEASURED}, floors) == [
        "answer judge auroc (pt) 0.7 below 0.72"
    ]
    floors["judge"]["best_is_labelled_it_min"] = 0.5
    assert judge_regressions({"judge": MEASURED}, floors)[1:] == [
        "answer judge: no held-out row for best_is_labelled_it_min"
    ]
    assert judge_regressions({}, floors) == []  # a report that did not measure the judge


def test_the_shipped_judge_s_figures_pass_the_shipped_floors_with_a_margin() -> None:
    thresholds = tomllib.loads(THRESHOLDS.read_text(encoding="utf-8"))
    shipped = json.loads(MANIFEST.read_text(encoding="utf-8"))["figures"]
    assert judge_regressions({"judge": shipped}, thresholds) == []
    lowered = {row: {**v, "auroc": v["auroc"] - 0.05} for row, v in shipped["judge"].items()}
    problems = judge_regressions({"judge": {"judge": lowered}}, thresholds)
    assert len(problems) == 5  # every AUROC floor is within 0.05 of what was measured
