"""The question-type matrix: every kind of question patients ask about a card's medicine.

``cases/matrix.jsonl`` (issue 48): for each of the 35 cards patients can read (the three staff
cards are never shown to them), questions of the MedicationQA types
(:data:`~cardrag.evals.cases.QUESTION_TYPES`: dose, stopping, ingredients, overdose, ...) in
English, Portuguese, Spanish and Italian, naming the medicine as patients do, each labelled by
reading the cards: answered by this card (with the words of the sentence that answers it), by
another card, or not covered.

The split is **by card**: a third of the cards (:func:`held_out_cards`, seeded) and every
question about them are held out, so nothing chosen on the tuning part has read a held-out
card's wording. ``make eval`` asks every question through the whole graph and counts, per part,
language and type (:func:`matrix_checks`):

* a not-covered question is right when it is refused;
* an answerable one is right when it is answered, cites a card that answers it, and quotes the
  sentence that answers it (:func:`verdict`): a sentence of the right card that does not
  answer the question is a wrong answer.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from cardrag.app.reply import Reply
from cardrag.evals.cases import MatrixCase, load_matrix
from cardrag.evals.split import SEED

HELD_OUT_CARDS = 1 / 3
"""Share of the cards whose questions are held out (issue 48: a third)."""

Outcome = Literal["right", "refused", "wrong card", "wrong sentence", "answered"]
"""What a reply did with a matrix question: ``right`` (refused when not covered; answered with
a right card and its answering sentence), or how it failed."""

_SPACE = re.compile(r"\s+")


def held_out_cards(
    cards: Iterable[str], fraction: float = HELD_OUT_CARDS, seed: int = SEED
) -> frozenset[str]:
    """The cards whose questions are held out: a seeded shuffle of the sorted ids.

    Example:
        >>> sorted(held_out_cards(["card-a", "card-b", "card-c"], seed=1))
        ['card-b']
    """
    ids = sorted(set(cards))
    random.Random(seed).shuffle(ids)
    return frozenset(ids[: round(len(ids) * fraction)])


def _plain(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def verdict(case: MatrixCase, reply: Reply) -> Outcome:
    """How a reply fared on a matrix question.

    Example:
        >>> case = MatrixCase(query_id="m1", card="card-a", type="dose", language="en",
        ...     query="How much?", label="answered", must_cite_one_of=["card-a"],
        ...     answer_sentence="Take one gram")
        >>> verdict(case, Reply(question="How much?", answer="Take one gram a day. [cite:card-a]",
        ...     citations=[{"id": "card-a", "title": "A"}]))
        'right'
    """
    if case.label == "not_covered":
        return "right" if reply.refused else "answered"
    if reply.refused:
        return "refused"
    if not any(c.id in case.must_cite_one_of for c in reply.citations):
        return "wrong card"
    assert case.answer_sentence is not None  # load_matrix: every answerable case has one
    if _plain(case.answer_sentence) not in _plain(reply.answer):
        return "wrong sentence"
    return "right"


def _keys(case: MatrixCase) -> list[str]:
    side = "not_covered" if case.label == "not_covered" else "answerable"
    return [side, f"{side} {case.language}", f"{side} {case.type}"]


def matrix_checks(
    ask: Callable[[str], Reply], cases: Sequence[MatrixCase] | None = None
) -> dict[str, dict[str, dict[str, Any]]]:
    """Every matrix question asked through the app: right counts per part, language and type.

    Returns ``{part: {row: counts}}`` for the parts ``held_out``, ``tuning`` and ``all``; a row
    is ``answerable`` or ``not_covered``, alone or followed by a language or a type, and its
    counts are ``questions``, ``right``, ``rate`` and one count per way of failing
    (:data:`Outcome`).
    """
    cases = load_matrix() if cases is None else cases
    held = held_out_cards(c.card for c in cases)
    counts: dict[str, dict[str, dict[str, int]]] = {
        part: defaultdict(lambda: defaultdict(int)) for part in ("held_out", "tuning", "all")
    }
    for case in cases:
        outcome = verdict(case, ask(case.query))
        for part in ("all", "held_out" if case.card in held else "tuning"):
            for key in _keys(case):
                row = counts[part][key]
                row["questions"] += 1
                row[outcome] += 1
    return {
        part: {
            key: {
                "questions": row["questions"],
                "right": row["right"],
                "rate": round(row["right"] / row["questions"], 3),
                **{k: v for k, v in sorted(row.items()) if k not in ("questions", "right")},
            }
            for key, row in sorted(table.items())
        }
        for part, table in counts.items()
    }
