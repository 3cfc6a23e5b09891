from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from cardrag.app.grading import FEATURES
from cardrag.evals.answerability import (
    THRESHOLD_MARGIN,
    Question,
    Scored,
    auroc,
    choose_threshold,
    fit,
    parts,
    question_score,
    questions,
    training_rows,
)
from cardrag.evals.cases import load_uncovered
from cardrag.ingest.cards import load_cards
from tests.conftest import CARDS_DIR


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


def test_questions_without_shared_are_golden_and_uncovered(tmp_path: Path) -> None:
    qs = questions(pubmed=tmp_path)  # an empty folder: no PubMedQA
    assert Counter(q.source for q in qs) == {"golden": 88, "uncovered": 160}
    assert all(q.answerable == (q.source == "golden") for q in qs)


def _scored(qid: str, answerable: bool, score: float, card: str = "c") -> Scored:
    feats = dict.fromkeys(FEATURES, 0.0) | {"score": score}
    q = Question(qid, qid, answerable, "golden" if answerable else "uncovered", "en", "k", [card])
    return Scored(q, [(card, feats, ())])


def test_the_fit_learns_that_higher_similarity_means_answerable() -> None:
    scored = [_scored(f"g{i}", True, 0.9 + i / 100) for i in range(5)]
    scored += [_scored(f"u{i}", False, 0.7 + i / 100) for i in range(5)]
    x, y = training_rows(scored)
    assert x.shape == (10, len(FEATURES))
    assert y.tolist() == [1] * 5 + [0] * 5
    calibration = fit(x, y, "fake")
    assert calibration.weights[FEATURES.index("score")] > 0
    threshold = choose_threshold(scored, calibration)
    lowest_golden = question_score(scored[0], calibration)
    assert threshold == pytest.approx(lowest_golden - THRESHOLD_MARGIN)  # 2% of 5: none refused


def test_cards_lacking_a_medical_term_and_other_golden_cards_are_not_trained_on() -> None:
    vetoed = _scored("u", False, 0.9)
    vetoed.cards = [("c", vetoed.cards[0][1], ("apixaban",))]
    other = _scored("g", True, 0.9, card="right")
    other.cards = [("wrong", other.cards[0][1], ())]
    x, y = training_rows([vetoed, other])
    assert x.shape[0] == 0
    assert y.shape[0] == 0


def test_auroc_counts_pairs_and_half_ties() -> None:
    assert auroc([0.9, 0.8], [0.1, 0.8]) == pytest.approx(0.875)
    assert np.isnan(auroc([], [0.1]))


def test_the_split_is_stratified_and_reproducible() -> None:
    scored = [_scored(f"g{i:02d}", True, 0.9) for i in range(10)]
    scored += [_scored(f"u{i:02d}", False, 0.7) for i in range(10)]
    tuning, held_out = parts(scored)
    assert (len(tuning), len(held_out)) == (14, 6)
    assert sum(s.question.answerable for s in held_out) == 3  # each stratum 30 %
    assert [s.question.qid for s in parts(scored)[1]] == [s.question.qid for s in held_out]
