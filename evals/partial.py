"""Questions in two parts, a card answering one: answered from that card, the other part named.

``cases/partial.jsonl``: ten questions in each of English, Portuguese, Spanish and Italian
("Should I take ibuprofen with food, and is it safe while breastfeeding?"), each with the card
that answers one part, that part, and the part no card answers; split tuning / held-out by
language with the evaluation's seed. ``make eval`` asks each through the app and counts, per
part and language, the questions refused (a refusal fails the patient: a card answers a part),
answered citing the right card, and answered saying what the cards do not cover
(:attr:`cardrag.app.reply.Reply.not_covered`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from cardrag.app.reply import Reply
from cardrag.evals.cases import load_partial
from cardrag.evals.split import split


def partial_checks(ask: Callable[[str], Reply]) -> dict[str, dict[str, dict[str, Any]]]:
    """Refused, answered-right and said-not-covered counts per part (held-out, all) and language."""
    cases = load_partial()
    _, held = split([c.query_id for c in cases], {c.query_id: c.language for c in cases})
    counts: dict[str, dict[str, list[int]]] = {
        "held_out": defaultdict(lambda: [0, 0, 0, 0]),
        "all": defaultdict(lambda: [0, 0, 0, 0]),
    }
    for case in cases:
        reply = ask(case.query)
        right = not reply.refused and any(c.id in case.must_cite_one_of for c in reply.citations)
        for part in ("all", "held_out") if case.query_id in held else ("all",):
            for key in ("partial", f"partial {case.language}"):
                row = counts[part][key]
                row[0] += 1
                row[1] += int(reply.refused)
                row[2] += int(right)
                row[3] += int(right and bool(reply.not_covered))
    return {
        part: {
            key: {
                "questions": n,
                "refused": r,
                "answered_right": a,
                "said_not_covered": c,
                "refused_rate": round(r / n, 3),
                "right_rate": round(a / n, 3),
            }
            for key, (n, r, a, c) in sorted(table.items())
        }
        for part, table in counts.items()
    }
