"""The held-out figures (:mod:`cardrag.evals.answerability.figures`)."""

from __future__ import annotations

import numpy as np
import pytest

from cardrag.app.calibration import FEATURES, SAME_LANGUAGE, Calibrations
from cardrag.evals.answerability import (
    auroc,
    best_threshold,
    evaluate,
    fit,
    refusal_pair,
    training_rows,
)
from tests.evals.answerability.scored import scored_question


def test_held_out_aurocs_are_given_overall_and_per_question_language() -> None:
    scored = [scored_question("g-en", True, 0.9), scored_question("u-en", False, 0.8)]
    scored += [scored_question("g-pt", True, 0.7), scored_question("u-pt", False, 0.75)]
    scored[2].question.language = scored[3].question.language = "pt"
    calibration = fit(*training_rows(scored, SAME_LANGUAGE), "fake", FEATURES[SAME_LANGUAGE])
    figures = evaluate(scored, Calibrations(calibration, calibration))
    top = "top similarity (the gate's score)"
    assert figures["auroc"][top] == 0.5  # 0.9 and 0.7 against 0.8 and 0.75: 2 of 4 pairs
    assert figures["auroc_by_language"]["en"][top] == 1.0
    assert figures["auroc_by_language"]["pt"][top] == 0.0
    assert np.isnan(figures["auroc_by_language"]["es"][top])  # no question in Spanish


def test_each_signal_is_measured_at_a_threshold_chosen_on_the_tuning_part() -> None:
    tuning = [scored_question("g1", True, 0.9), scored_question("g2", True, 0.8)]
    tuning += [scored_question("u1", False, 0.7), scored_question("u2", False, 0.85)]
    held = [
        scored_question("g3", True, 0.74),
        scored_question("g4", True, 0.95),
        scored_question("u3", False, 0.76),
    ]
    held += [
        scored_question("u4", False, 0.7),
        scored_question("p1", True, 0.6),
        scored_question("p2", False, 0.9),
    ]
    held[4].question.language = held[5].question.language = "pt"
    calibration = fit(*training_rows(tuning, SAME_LANGUAGE), "fake", FEATURES[SAME_LANGUAGE])
    figures = evaluate(held, Calibrations(calibration, calibration), tuning)
    top = figures["signal_pairs"]["top similarity (the gate's score)"]
    assert top["threshold"] == 0.75  # tuning: 0.8 kept, 0.7 refused; 0.85 cannot be split off
    assert top["en"] == {"unanswerable": 2, "refused": 0.5, "answerable": 2, "false_refused": 0.5}
    assert top["pt"] == {"unanswerable": 1, "refused": 0.0, "answerable": 1, "false_refused": 1.0}
    every = {"unanswerable": 3, "refused": 0.333, "answerable": 3, "false_refused": 0.667}
    assert top["all"] == every
    assert top["es"] == {"unanswerable": 0, "refused": None, "answerable": 0, "false_refused": None}
    # measured only where it was: the cross-encoder is NaN in these fake features
    assert "cross-encoder (English questions only)" not in figures["signal_pairs"]
    assert evaluate(held, Calibrations(calibration, calibration)).get("signal_pairs") is None


def test_the_best_threshold_maximises_refused_unanswerable_less_refused_answerable() -> None:
    assert best_threshold([(0.9, True), (0.8, True), (0.7, False), (0.85, False)]) == 0.75
    assert best_threshold([(0.5, True), (0.5, False)]) == -0.5  # nothing separates: refuse none
    assert best_threshold([(1.0, False), (0.0, True)]) == -1.0  # reversed: refusing helps none
    assert refusal_pair([(0.2, False), (0.9, True), (0.4, True)], 0.5) == {
        "unanswerable": 1,
        "refused": 1.0,
        "answerable": 2,
        "false_refused": 0.5,
    }


def test_auroc_counts_pairs_and_half_ties() -> None:
    assert auroc([0.9, 0.8], [0.1, 0.8]) == pytest.approx(0.875)
    assert np.isnan(auroc([], [0.1]))
