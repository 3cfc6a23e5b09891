from __future__ import annotations

from cardrag.app.reply import Reply
from cardrag.evals.cases import load_offtopic
from cardrag.evals.gate import offtopic_parts, offtopic_refusals


def test_offtopic_cases_are_split_by_language_and_never_overlap() -> None:
    cases = load_offtopic()
    tuning, held = offtopic_parts(cases)
    assert (len(cases), len(tuning), len(held)) == (30, 21, 9)
    assert tuning.isdisjoint(held)
    by_language = {c.language for c in cases if c.query_id in held}
    assert by_language == {"pt", "es", "it"}


def test_offtopic_refusals_count_per_part_and_language() -> None:
    def ask(text: str) -> Reply:
        # refuse everything but one Spanish question
        refused = not text.startswith("¿Quién escribió")
        return Reply(question=text, answer="" if refused else "x", refused=refused)

    table = offtopic_refusals(ask)
    assert table["all"]["offtopic"] == {"questions": 30, "refused": 29, "rate": 0.967}
    assert table["all"]["offtopic es"] == {"questions": 10, "refused": 9, "rate": 0.9}
    assert table["held_out"]["offtopic"]["questions"] == 9
