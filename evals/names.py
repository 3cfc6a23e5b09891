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
from collections.abc import Callable, Sequence
from typing import Any

from cardrag.app.reply import Reply
from cardrag.evals.cases import load_names
from cardrag.evals.split import split


def names_checks(ask: Callable[[str], Reply]) -> dict[str, dict[str, dict[str, Any]]]:
    """Refused and answered-right counts per part (held-out, all), language and kind."""
    return answer_checks(
        load_names(), ask, lambda c: ["names", f"names {c.language}", f"names {c.kind}"]
    )


def answer_checks(
    cases: Sequence[Any],
    ask: Callable[[str], Reply],
    keys: Callable[[Any], list[str]],
    said: Callable[[Reply], bool] | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Answerable cases asked through the app: refused and answered-right counts and rates.

    A case has ``query_id``, ``query``, ``language`` and ``must_cite_one_of``
    (:class:`~cardrag.evals.cases.NamesCase`, :class:`~cardrag.evals.cases.PartialCase`).
    Split tuning / held-out by language with the evaluation's seed; each case counts in each
    of its ``keys`` (a table row). With ``said``, the rows also count the right answers for
    which it holds (``said_not_covered``).
    """
    _, held = split([c.query_id for c in cases], {c.query_id: c.language for c in cases})
    counts: dict[str, dict[str, list[int]]] = {
        "held_out": defaultdict(lambda: [0, 0, 0, 0]),
        "all": defaultdict(lambda: [0, 0, 0, 0]),
    }
    for case in cases:
        reply = ask(case.query)
        right = not reply.refused and any(c.id in case.must_cite_one_of for c in reply.citations)
        for part in ("all", "held_out") if case.query_id in held else ("all",):
            for key in keys(case):
                row = counts[part][key]
                row[0] += 1
                row[1] += int(reply.refused)
                row[2] += int(right)
                row[3] += int(right and said is not None and said(reply))
    return {
        part: {
            key: {
                "questions": n,
                "refused": r,
                "answered_right": a,
                **({"said_not_covered": c} if said is not None else {}),
                "refused_rate": round(r / n, 3),
                "right_rate": round(a / n, 3),
            }
            for key, (n, r, a, c) in sorted(table.items())
        }
        for part, table in counts.items()
    }
