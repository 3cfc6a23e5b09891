"""Questions that name a card's medicine by a brand, answered with and without name resolution.

``cases/names.jsonl``: questions in English, Portuguese, Spanish and Italian that a card
answers but that name its medicine as a patient would (Synthroid, Glucophage, Advil,
Tachipirina), each with the cards that answer it; split tuning / held-out by language with the
evaluation's seed. ``make eval`` asks each through the app twice in the same run: as shipped
(:mod:`cardrag.app.names` reads brand names as the cards' generic names) and with the
questions read as written (the app before issue 31), and reports how many were refused and how
many answered citing a right card.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from cardrag.app.reply import Reply
from cardrag.evals.cases import load_names
from cardrag.evals.split import split


def names_checks(ask: Callable[[str], Reply]) -> dict[str, dict[str, dict[str, Any]]]:
    """Refused and answered-right counts per part (held-out, all) and language."""
    cases = load_names()
    _, held = split([c.query_id for c in cases], {c.query_id: c.language for c in cases})
    counts: dict[str, dict[str, list[int]]] = {
        "held_out": defaultdict(lambda: [0, 0, 0]),
        "all": defaultdict(lambda: [0, 0, 0]),
    }
    for case in cases:
        reply = ask(case.query)
        right = not reply.refused and any(c.id in case.must_cite_one_of for c in reply.citations)
        for part in ("all", "held_out") if case.query_id in held else ("all",):
            for key in ("names", f"names {case.language}", f"names {case.kind}"):
                row = counts[part][key]
                row[0] += 1
                row[1] += int(reply.refused)
                row[2] += int(right)
    return {
        part: {
            key: {
                "questions": n,
                "refused": r,
                "answered_right": a,
                "refused_rate": round(r / n, 3),
                "right_rate": round(a / n, 3),
            }
            for key, (n, r, a) in sorted(table.items())
        }
        for part, table in counts.items()
    }
