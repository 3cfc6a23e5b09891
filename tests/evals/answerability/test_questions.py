"""The answerability questions and their split (:mod:`cardrag.evals.answerability.questions`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from cardrag.evals.answerability import (
    held_out_ids,
    parts,
    questions,
)
from cardrag.evals.cases import load_golden_cases, load_names, load_translated, load_uncovered
from cardrag.evals.split import split
from cardrag.ingest.corpus import load_cards
from tests.conftest import CARDS_DIR
from tests.evals.answerability.scored import scored_question


def test_the_uncovered_set_is_what_issue_17_asks_for() -> None:
    cases = load_uncovered()
    assert len(cases) >= 160
    languages = Counter(c.language for c in cases)
    assert set(languages) == {"en", "pt", "es", "it"}
    assert min(languages.values()) >= 35
    assert set(Counter(c.kind for c in cases)) == {
        "other_medicine",
        "same_class",
        "card_other_question",
        "condition",
        "research",
    }
    ids = {c.id for c in load_cards(CARDS_DIR)}
    assert {c.closest_card for c in cases} <= ids
    assert len({c.query for c in cases}) == len(cases)


def test_the_translated_set_asks_golden_questions_in_our_other_languages() -> None:
    golden = {c.query_id: c for c in load_golden_cases()}
    cases = load_translated()
    assert len(cases) == 130
    assert Counter(c.language for c in cases) == {"pt": 44, "es": 43, "it": 43}
    for case in cases:
        assert case.must_cite_one_of == golden[case.translates].must_cite_one_of
        assert case.kind == golden[case.translates].kind
    assert len({c.query for c in cases}) == len(cases)
    assert len({(c.language, c.translates) for c in cases}) == len(cases)


def test_questions_without_shared_are_golden_translated_names_and_uncovered(
    tmp_path: Path,
) -> None:
    qs = questions(pubmed=tmp_path)  # an empty folder: no PubMedQA
    counts = {"golden": 88, "translated": 130, "uncovered": 160, "names": 128}
    assert Counter(q.source for q in qs) == counts
    assert all(q.answerable == (q.source != "uncovered") for q in qs)


def test_the_split_is_stratified_and_reproducible() -> None:
    scored = [scored_question(f"g{i:02d}", True, 0.9) for i in range(10)]
    scored += [scored_question(f"u{i:02d}", False, 0.7) for i in range(10)]
    tuning, held_out = parts(scored)
    assert (len(tuning), len(held_out)) == (14, 6)
    assert sum(s.question.answerable for s in held_out) == 3  # each stratum 30 %
    assert [s.question.qid for s in parts(scored)[1]] == [s.question.qid for s in held_out]


def test_adding_the_translated_questions_moved_no_other_question_between_parts(
    tmp_path: Path,
) -> None:
    qs = questions(pubmed=tmp_path)
    without = [q for q in qs if q.source != "translated"]
    held = held_out_ids(qs)
    assert held_out_ids(without) == {qid for qid in held if not qid.startswith("translated:")}
    translated = [qid for qid in held if qid.startswith("translated:")]
    assert len(translated) == 39  # 30 % of each language and kind


def test_the_names_questions_are_split_as_their_own_evaluation_splits_them(
    tmp_path: Path,
) -> None:
    qs = questions(pubmed=tmp_path)
    held = held_out_ids(qs)
    cases = load_names()
    _, names_held = split([c.query_id for c in cases], {c.query_id: c.language for c in cases})
    assert {qid for qid in held if qid.startswith("names:")} == {f"names:{q}" for q in names_held}
    assert len(names_held) == 40
    without = [q for q in qs if q.source != "names"]
    assert held_out_ids(without) == {qid for qid in held if not qid.startswith("names:")}
