from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from cardrag.app.grading import (
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
    Question,
    Scored,
    auroc,
    best_answerability,
    best_threshold,
    choose_gate,
    choose_threshold,
    evaluate,
    featurise,
    fit,
    held_out_ids,
    normalised_score,
    parts,
    question_score,
    questions,
    refusal_pair,
    relation_part,
    training_rows,
)
from cardrag.evals.cases import load_golden_cases, load_names, load_translated, load_uncovered
from cardrag.evals.split import split
from cardrag.ingest.cards import load_cards
from cardrag.retrievers.parent import ScoredParentDocumentRetriever
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


def _scored(
    qid: str, answerable: bool, score: float, card: str = "c", same_language: bool = True
) -> Scored:
    feats = {name: 0.0 for names in FEATURES.values() for name in names}
    feats |= {"score": score, "same_language": float(same_language), "normalised_score": 0.0}
    feats["cross_encoder"] = math.nan  # measured for English questions in make eval only
    q = Question(qid, qid, answerable, "golden" if answerable else "uncovered", "en", "k", [card])
    return Scored(q, [(card, feats, ())])


def test_the_fit_learns_that_higher_similarity_means_answerable() -> None:
    scored = [_scored(f"g{i}", True, 0.9 + i / 100) for i in range(5)]
    scored += [_scored(f"u{i}", False, 0.7 + i / 100) for i in range(5)]
    scored += [_scored("x", False, 0.1, same_language=False)]  # the other calibration's
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
    scored = [_scored(f"t{i}", True, 0.9, same_language=False) for i in range(5)]
    scored += [_scored(f"u{i}", False, 0.70 + i / 200, same_language=False) for i in range(20)]
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
    vetoed = _scored("u", False, 0.9)
    vetoed.cards = [("c", vetoed.cards[0][1], ("apixaban",))]
    other = _scored("g", True, 0.9, card="right")
    other.cards = [("wrong", other.cards[0][1], ())]
    x, y = training_rows([vetoed, other], SAME_LANGUAGE)
    assert x.shape[0] == 0
    assert y.shape[0] == 0


def test_an_uncovered_question_teaches_the_fit_with_its_closest_cards_only() -> None:
    uncovered = _scored("u", False, 0.80)
    feats = uncovered.cards[0][1]
    uncovered.cards = [
        ("far", feats | {"score": 0.80}, ()),
        ("closest", feats | {"score": 0.90}, ()),
        ("vetoed", feats | {"score": 0.95}, ("apixaban",)),
        ("second", feats | {"score": 0.85}, ()),
    ]
    golden = _scored("g", True, 0.70)
    x, y = training_rows([uncovered, golden], SAME_LANGUAGE)
    score = FEATURES[SAME_LANGUAGE].index("score")
    assert HARD_NEGATIVES == 2
    assert x[:, score].tolist() == [0.90, 0.85, 0.70]  # not the far one, nor the vetoed one
    assert y.tolist() == [0, 0, 1]


def test_held_out_aurocs_are_given_overall_and_per_question_language() -> None:
    scored = [_scored("g-en", True, 0.9), _scored("u-en", False, 0.8)]
    scored += [_scored("g-pt", True, 0.7), _scored("u-pt", False, 0.75)]
    scored[2].question.language = scored[3].question.language = "pt"
    calibration = fit(*training_rows(scored, SAME_LANGUAGE), "fake", FEATURES[SAME_LANGUAGE])
    figures = evaluate(scored, Calibrations(calibration, calibration))
    top = "top similarity (the gate's score)"
    assert figures["auroc"][top] == 0.5  # 0.9 and 0.7 against 0.8 and 0.75: 2 of 4 pairs
    assert figures["auroc_by_language"]["en"][top] == 1.0
    assert figures["auroc_by_language"]["pt"][top] == 0.0
    assert np.isnan(figures["auroc_by_language"]["es"][top])  # no question in Spanish


def test_each_signal_is_measured_at_a_threshold_chosen_on_the_tuning_part() -> None:
    tuning = [_scored("g1", True, 0.9), _scored("g2", True, 0.8)]
    tuning += [_scored("u1", False, 0.7), _scored("u2", False, 0.85)]
    held = [_scored("g3", True, 0.74), _scored("g4", True, 0.95), _scored("u3", False, 0.76)]
    held += [_scored("u4", False, 0.7), _scored("p1", True, 0.6), _scored("p2", False, 0.9)]
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


def test_a_score_is_normalised_by_the_question_s_similarities_over_the_index() -> None:
    assert normalised_score(0.9, np.array([0.7, 0.8, 0.9])) == pytest.approx(1.224745, abs=1e-6)
    assert normalised_score(0.8, np.array([0.8, 0.8])) == 0.0  # no spread: the difference


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


def test_a_question_every_card_of_which_is_vetoed_does_not_set_the_threshold() -> None:
    scored = [_scored(f"g{i}", True, 0.9 + i / 100) for i in range(5)]
    scored += [_scored(f"u{i}", False, 0.7 + i / 100) for i in range(5)]
    x, y = training_rows(scored, SAME_LANGUAGE)
    calibration = fit(x, y, "fake", FEATURES[SAME_LANGUAGE])
    vetoed = _scored("v", True, 0.95)
    vetoed.cards = [(c, f, ("lithium",)) for c, f, _ in vetoed.cards]
    threshold = choose_threshold([vetoed, *scored], calibration, SAME_LANGUAGE)
    lowest_golden = best_answerability(scored[0], calibration)
    assert threshold == pytest.approx(lowest_golden - THRESHOLD_MARGIN)


def test_featurise_measures_without_the_gate_with_the_index_and_the_cross_encoder(
    shipped_retriever: ScoredParentDocumentRetriever, real_embeddings: Embeddings
) -> None:
    from cardrag.retrievers.rerank import load_cross_encoder

    retriever = shipped_retriever
    assert retriever.min_similarity is not None  # a gated retriever: featurise turns it off
    asked = [
        Question("g", "Should I take levothyroxine on an empty stomach?", True, "a", "en", "k"),
        Question("u", "Who won the football world cup in 1998?", False, "b", "en", "k"),
        Question("p", "Posso tomar levotiroxina com café?", True, "c", "pt", "k"),
    ]
    golden, football, portuguese = featurise(
        asked, retriever, real_embeddings, 3, load_cross_encoder(1)
    )
    assert [len(s.cards) for s in (golden, football, portuguese)] == [3, 3, 3]  # gate off
    assert retriever.invoke(asked[1].text) == []  # which the gate would have refused
    top = golden.cards[0]
    assert top[0] == "card-levothyroxine-routine"
    best_football = max(f["cross_encoder"] for _, f, _ in football.cards)
    assert top[1]["cross_encoder"] > best_football + 2 * 0.8  # LOGIT_TOLERANCE, twice
    # standard deviations above the question's mean over every row of the index
    best_normalised = max(f["normalised_score"] for _, f, _ in football.cards)
    assert top[1]["normalised_score"] > best_normalised + 0.5  # measured 2.73 and 1.79
    assert all(math.isnan(f["cross_encoder"]) for _, f, _ in portuguese.cards)  # English only


def test_the_across_language_gate_sits_under_the_lowest_answering_card_that_passes() -> None:
    n = len(FEATURES[ACROSS_LANGUAGES])
    score_only = tuple(1.0 if f == "score" else 0.0 for f in FEATURES[ACROSS_LANGUAGES])
    # logit (score - 0.8) / 0.025, threshold 0: a card passes from 0.8 up
    calibration = Calibration(
        "fake", FEATURES[ACROSS_LANGUAGES], (0.8,) * n, (0.025,) * n, score_only, 0.0, 0.0
    )
    passes = _scored("t1", True, 0.812, same_language=False)
    lower = _scored("t2", True, 0.801, same_language=False)
    fails = _scored("t3", True, 0.79, same_language=False)  # grading refuses it anyway
    vetoed = replace(lower, cards=[(c, f, ("warfarin",)) for c, f, _ in lower.cards])
    other = _scored("t4", True, 0.7, card="not-the-answer", same_language=False)
    uncovered = _scored("u1", False, 0.6, same_language=False)
    assert GATE_MARGIN == 0.2
    assert choose_gate([passes, fails, other, uncovered], calibration) == 0.807  # 0.812 - 0.005
    assert choose_gate([passes, lower, fails], calibration) == 0.796
    assert choose_gate([passes, vetoed], calibration) == 0.807  # a vetoed card never answers
    assert choose_gate([fails, uncovered], calibration) is None
