"""Grading's calibration from the tuning part (:mod:`cardrag.evals.answerability.fitting`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cardrag.app.calibration import (
    ACROSS_LANGUAGES,
    FEATURES,
    SAME_LANGUAGE,
    Calibration,
    Calibrations,
)
from cardrag.evals.answerability import (
    ACROSS_REFUSAL_TARGET,
    GATE_MARGIN,
    HARD_NEGATIVES,
    THRESHOLD_MARGIN,
    best_answerability,
    choose_gate,
    choose_threshold,
    fit,
    question_score,
    relation_part,
    training_rows,
)
from tests.evals.answerability.scored import scored_question


def test_the_fit_learns_that_higher_similarity_means_answerable() -> None:
    scored = [scored_question(f"g{i}", True, 0.9 + i / 100) for i in range(5)]
    scored += [scored_question(f"u{i}", False, 0.7 + i / 100) for i in range(5)]
    scored += [scored_question("x", False, 0.1, same_language=False)]  # the other calibration's
    x, y = training_rows(scored, SAME_LANGUAGE)
    assert x.shape == (10, len(FEATURES[SAME_LANGUAGE]))
    assert y.tolist() == [1] * 5 + [0] * 5
    calibration = fit(x, y, "fake", FEATURES[SAME_LANGUAGE])
    assert calibration.weights[FEATURES[SAME_LANGUAGE].index("score")] > 0
    part = relation_part(scored, SAME_LANGUAGE)
    assert len(part) == 10
    threshold = choose_threshold(part, calibration, SAME_LANGUAGE)
    lowest_golden = best_answerability(scored[0], calibration)
    assert threshold == pytest.approx(lowest_golden - THRESHOLD_MARGIN)  # 2% of 5: none refused


def test_across_languages_the_threshold_refuses_the_target_share_of_uncovered() -> None:
    scored = [scored_question(f"t{i}", True, 0.9, same_language=False) for i in range(5)]
    scored += [
        scored_question(f"u{i}", False, 0.70 + i / 200, same_language=False) for i in range(20)
    ]
    x, y = training_rows(scored, ACROSS_LANGUAGES)
    assert x.shape == (25, len(FEATURES[ACROSS_LANGUAGES]))
    calibration = fit(x, y, "fake", FEATURES[ACROSS_LANGUAGES])
    threshold = choose_threshold(scored, calibration, ACROSS_LANGUAGES)
    assert ACROSS_REFUSAL_TARGET == 0.9
    nineteenth = best_answerability(scored[5 + 18], calibration)  # int(0.9 x 20) = 18
    assert threshold == pytest.approx(nineteenth + THRESHOLD_MARGIN)
    across = replace(calibration, threshold=threshold)
    calibrations = Calibrations(across, across)
    refused = [question_score(s, calibrations) < 0 for s in scored]
    assert refused == [False] * 5 + [True] * 19 + [False]  # 19 of 20 uncovered: >= 90 %


def test_cards_lacking_a_medical_term_and_other_golden_cards_are_not_trained_on() -> None:
    vetoed = scored_question("u", False, 0.9)
    vetoed.cards = [("c", vetoed.cards[0][1], ("apixaban",))]
    other = scored_question("g", True, 0.9, card="right")
    other.cards = [("wrong", other.cards[0][1], ())]
    x, y = training_rows([vetoed, other], SAME_LANGUAGE)
    assert x.shape[0] == 0
    assert y.shape[0] == 0


def test_an_uncovered_question_teaches_the_fit_with_its_closest_cards_only() -> None:
    uncovered = scored_question("u", False, 0.80)
    feats = uncovered.cards[0][1]
    uncovered.cards = [
        ("far", feats | {"score": 0.80}, ()),
        ("closest", feats | {"score": 0.90}, ()),
        ("vetoed", feats | {"score": 0.95}, ("apixaban",)),
        ("second", feats | {"score": 0.85}, ()),
    ]
    golden = scored_question("g", True, 0.70)
    x, y = training_rows([uncovered, golden], SAME_LANGUAGE)
    score = FEATURES[SAME_LANGUAGE].index("score")
    assert HARD_NEGATIVES == 2
    assert x[:, score].tolist() == [0.90, 0.85, 0.70]  # not the far one, nor the vetoed one
    assert y.tolist() == [0, 0, 1]


def test_a_question_every_card_of_which_is_vetoed_does_not_set_the_threshold() -> None:
    scored = [scored_question(f"g{i}", True, 0.9 + i / 100) for i in range(5)]
    scored += [scored_question(f"u{i}", False, 0.7 + i / 100) for i in range(5)]
    x, y = training_rows(scored, SAME_LANGUAGE)
    calibration = fit(x, y, "fake", FEATURES[SAME_LANGUAGE])
    vetoed = scored_question("v", True, 0.95)
    vetoed.cards = [(c, f, ("lithium",)) for c, f, _ in vetoed.cards]
    threshold = choose_threshold([vetoed, *scored], calibration, SAME_LANGUAGE)
    lowest_golden = best_answerability(scored[0], calibration)
    assert threshold == pytest.approx(lowest_golden - THRESHOLD_MARGIN)


def test_the_across_language_gate_sits_under_the_lowest_answering_card_that_passes() -> None:
    n = len(FEATURES[ACROSS_LANGUAGES])
    score_only = tuple(1.0 if f == "score" else 0.0 for f in FEATURES[ACROSS_LANGUAGES])
    # logit (score - 0.8) / 0.025, threshold 0: a card passes from 0.8 up
    calibration = Calibration(
        "fake", FEATURES[ACROSS_LANGUAGES], (0.8,) * n, (0.025,) * n, score_only, 0.0, 0.0
    )
    passes = scored_question("t1", True, 0.812, same_language=False)
    lower = scored_question("t2", True, 0.801, same_language=False)
    fails = scored_question("t3", True, 0.79, same_language=False)  # grading refuses it anyway
    vetoed = replace(lower, cards=[(c, f, ("warfarin",)) for c, f, _ in lower.cards])
    other = scored_question("t4", True, 0.7, card="not-the-answer", same_language=False)
    uncovered = scored_question("u1", False, 0.6, same_language=False)
    assert GATE_MARGIN == 0.2
    assert choose_gate([passes, fails, other, uncovered], calibration) == 0.807  # 0.812 - 0.005
    assert choose_gate([passes, lower, fails], calibration) == 0.796
    assert choose_gate([passes, vetoed], calibration) == 0.807  # a vetoed card never answers
    assert choose_gate([fails, uncovered], calibration) is None


def test_refitting_one_calibration_keeps_the_other_as_stored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cardrag.evals.answerability import fitting

    scored = [
        scored_question(f"{kind}{i}", kind == "a", score, same_language=same)
        for i in range(12)
        for kind, score in (("a", 0.8 + i / 100), ("u", 0.7 + i / 100))
        for same in (True, False)
    ]
    n = len(FEATURES[SAME_LANGUAGE])
    ones = (1.0,) * n
    stored = Calibration("m", FEATURES[SAME_LANGUAGE], (0.0,) * n, ones, ones, 0.5, 0.25)
    monkeypatch.setattr(fitting, "featurise", lambda *args, **kwargs: scored)
    monkeypatch.setattr(
        fitting, "load_calibration", lambda model, relation: {SAME_LANGUAGE: stored}[relation]
    )
    calibrations, _ = fitting.calibrate([], None, None, "m", 4, refit=[ACROSS_LANGUAGES])  # type: ignore[arg-type]
    assert calibrations.same_language == stored  # as stored: not refitted
    across = calibrations.across_languages
    assert (across.model, across.features) == ("m", FEATURES[ACROSS_LANGUAGES])
    assert across.weights[across.features.index("score")] > 0  # refitted on the scored questions
