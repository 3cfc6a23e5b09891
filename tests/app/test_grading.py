from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.documents import Document

from cardrag.app.calibration import (
    ACROSS_LANGUAGES,
    FEATURES,
    SAME_LANGUAGE,
    Calibration,
    Calibrations,
    load_calibration,
    load_calibrations,
)
from cardrag.app.grading import Grade, Grader, card_features, grade_card, refusal_reason
from cardrag.app.terms import missing_terms, salient_terms, vocabulary
from cardrag.app.vectors import Vectors
from cardrag.ingest.models import known_models
from tests.conftest import FakeEmbeddings


def _score_alone(relation: str, threshold: float = 0.0) -> Calibration:
    n = len(FEATURES[relation])
    return Calibration(
        model="fake",
        features=FEATURES[relation],
        mean=(0.0,) * n,
        scale=(1.0,) * n,
        weights=(10.0,) + (0.0,) * (n - 1),  # the score alone
        bias=-5.0,
        threshold=threshold,
    )


CALIBRATION = Calibrations(_score_alone(SAME_LANGUAGE), _score_alone(ACROSS_LANGUAGES, 2.0))
"""Logit 10 x score - 5; threshold 0 in one language, 2 across languages."""
EVERY_FEATURE = {name for names in FEATURES.values() for name in names} | {"same_language"}


def test_a_card_lacking_a_medical_term_fails_whatever_it_scores() -> None:
    feats = dict.fromkeys(EVERY_FEATURE, 1.0)
    assert grade_card(feats, ("apixaban",), "card-w", CALIBRATION, same_language=True) == Grade(
        "card-w", False, None, ("apixaban",)
    )
    assert grade_card(feats, (), "card-w", CALIBRATION, same_language=True) == Grade(
        "card-w", True, 5.0, ()
    )
    low = {**feats, "score": 0.4}
    assert grade_card(low, (), "card-w", CALIBRATION, same_language=True).answerable is False
    assert (
        grade_card(low, (), "card-w", None, same_language=True).answerable is True
    )  # no calibration: veto only


def test_a_card_in_another_language_is_graded_by_the_across_languages_calibration() -> None:
    same = {**dict.fromkeys(EVERY_FEATURE, 1.0), "score": 0.6}  # logit 1.0
    across = {**same, "same_language": 0.0}
    assert grade_card(same, (), "card-w", CALIBRATION, same_language=True) == Grade(
        "card-w", True, 1.0, ()
    )
    assert grade_card(across, (), "card-w", CALIBRATION, same_language=False) == Grade(
        "card-w", False, -1.0, (), same_language=False
    )


def test_a_card_about_what_a_broad_question_names_answers_whatever_it_scores() -> None:
    across = {**dict.fromkeys(EVERY_FEATURE, 1.0), "score": 0.6, "same_language": 0.0}
    assert grade_card(across, (), "card-m", CALIBRATION, same_language=False, about=True) == (
        Grade("card-m", True, -1.0, (), same_language=False)  # the margin is kept, and shown
    )
    # a missing medicine still vetoes it
    assert grade_card(across, ("x",), "card-m", CALIBRATION, same_language=False, about=True) == (
        Grade("card-m", False, None, ("x",), same_language=False)
    )


def test_the_grader_reads_a_broad_question_as_about_the_card_its_title_names() -> None:
    metformin = Document(
        id="card-metformin",
        page_content="Take it with meals to settle the stomach.",
        metadata={"title": "Metformin: taking it with meals", "score": 0.2, "language": "en"},
    )
    other = Document(
        id="card-iron",
        page_content="Metformin and iron can be taken on the same day.",
        metadata={"title": "Iron tablets", "score": 0.2, "language": "en"},
    )
    strict = Calibrations(_score_alone(SAME_LANGUAGE, 9.0), _score_alone(ACROSS_LANGUAGES, 9.0))
    grader = Grader(Vectors(FakeEmbeddings()), strict)  # no score passes its thresholds
    broad = grader("Cosa devo sapere sulla metformina?", [metformin, other])
    assert [g.answerable for g in broad] == [True, False]  # the title names it; the text only
    narrow = grader("La metformina fa venire sonno?", [metformin, other])
    assert [g.answerable for g in narrow] == [False, False]


def test_the_refusal_says_what_no_card_mentions_or_which_card_falls_short() -> None:
    titles = {"a": "Warfarin", "b": "Statins"}
    both = [Grade("a", False, None, ("apixaban",)), Grade("b", False, None, ("apixaban",))]
    assert refusal_reason(both, titles) == "No card mentions apixaban."
    weak = [Grade("a", False, -3.0, ()), Grade("b", False, None, ("apixaban",))]
    assert refusal_reason(weak, titles) == (
        'The closest card, "Warfarin", does not answer this question.'
    )


def _entry(features: tuple[str, ...], threshold: float) -> dict[str, object]:
    n = len(features)
    return {
        "features": list(features),
        "mean": [0.0] * n,
        "scale": [1.0] * n,
        "weights": [1.0] * n,
        "bias": -1.0,
        "threshold": threshold,
    }


def test_calibrations_are_per_model(tmp_path: Path) -> None:
    path = tmp_path / "models.json"
    entry = {relation: _entry(names, 0.5) for relation, names in FEATURES.items()}
    entry[ACROSS_LANGUAGES]["threshold"] = 1.5
    listed = {"backend": "sentence-transformers", "min_similarity": 0.3}
    path.write_text(json.dumps({"m": {**listed, "grading": entry}, "n": listed}), "utf-8")
    loaded = load_calibrations("m", path)
    assert loaded is not None
    assert (loaded.same_language.threshold, loaded.across_languages.threshold) == (0.5, 1.5)
    ones = dict.fromkeys(EVERY_FEATURE, 1.0)
    assert loaded.of(True).answerability(ones) == len(FEATURES[SAME_LANGUAGE]) - 1.0
    assert loaded.of(False).margin(ones) == len(FEATURES[ACROSS_LANGUAGES]) - 1.0 - 1.5
    assert load_calibrations("n", path) is None  # listed, not fitted
    assert load_calibrations("other", path) is None
    assert load_calibrations("m", tmp_path / "missing.json") is None


def test_a_calibration_fitted_for_other_features_is_refused_the_other_still_loads(
    tmp_path: Path,
) -> None:
    path = tmp_path / "models.json"
    entry = {relation: _entry(names, 0.5) for relation, names in FEATURES.items()}
    stale = [f for f in FEATURES[ACROSS_LANGUAGES] if f != "coverage_lead"]
    entry[ACROSS_LANGUAGES]["features"] = stale
    listed = {"backend": "sentence-transformers", "min_similarity": 0.3}
    path.write_text(json.dumps({"m": {**listed, "grading": entry}}), "utf-8")
    same = load_calibration("m", SAME_LANGUAGE, path)
    assert same is not None
    assert same.features == FEATURES[SAME_LANGUAGE]
    with pytest.raises(ValueError, match=r"m\.grading\.across_languages\.features is \[") as err:
        load_calibrations("m", path)
    assert str(path) in str(err.value)
    assert "--write" in str(err.value)


@pytest.mark.parametrize("model", sorted(known_models()))
def test_every_model_with_a_calibrated_gate_has_a_grading_calibration(model: str) -> None:
    calibrations = load_calibrations(model)
    assert calibrations is not None
    similarities = {"score", "sentence", "mean_sentence", "masked_sentence", "masked_mean_sentence"}
    for calibration in (calibrations.same_language, calibrations.across_languages):
        assert calibration.model == model
        # more similar: more answerable (one standard deviation more on every similarity; a
        # single weight may be negative where the similarities move together, as USE's score)
        weights = dict(zip(calibration.features, calibration.weights, strict=True))
        assert sum(w for name, w in weights.items() if name in similarities) > 0


def test_the_grader_keeps_the_card_that_names_the_medicine() -> None:
    docs = [
        Document(id="card-w", page_content="Warfarin and vitamin K.", metadata={"score": 0.9}),
        Document(id="card-s", page_content="Statins at night.", metadata={"score": 0.8}),
    ]
    grader = Grader(Vectors(FakeEmbeddings()), calibrations=None)
    assert [
        (g.card_id, g.answerable, g.missing) for g in grader("Warfarin and spinach?", docs)
    ] == [
        ("card-w", True, ()),
        ("card-s", False, ("warfarin",)),  # the statin card never mentions warfarin
    ]
    grades = grader("Can I take apixaban with spinach?", docs)
    assert [(g.answerable, g.missing) for g in grades] == [
        (False, ("apixaban",)),
        (False, ("apixaban",)),
    ]
    assert missing_terms(["apixaban"], vocabulary("apixaban")) == ()


def test_a_card_that_never_mentions_what_is_asked_about_fails_and_says_so() -> None:
    from tests.conftest import CountingEmbeddings

    model = CountingEmbeddings()
    docs = [
        Document(id="card-i", page_content="Ibuprofen: take it with food.", metadata={}),
        Document(id="card-p", page_content="Paracetamol is fine in pregnancy.", metadata={}),
    ]
    grader = Grader(Vectors(model), CALIBRATION)
    grades = grader("Posso tomar ibuprofeno durante a amamentação?", docs)
    assert [(g.answerable, g.missing_aspects) for g in grades] == [
        (False, ("pregnancy or breastfeeding",)),
        (False, ()),  # it mentions pregnancy, but not ibuprofen: the veto
    ]
    assert model.documents == []  # neither is scored: no sentence embedded
    titles = {"card-i": "Ibuprofen", "card-p": "Paracetamol"}
    assert refusal_reason(grades, titles) == (
        'The closest card, "Ibuprofen", says nothing about pregnancy or breastfeeding.'
    )
    nowhere = [Grade("card-i", False, None, (), True, ("hair",))] * 2
    assert refusal_reason(nowhere, titles) == "No card says anything about hair."


def test_a_card_without_a_language_field_is_graded_in_its_own_language() -> None:
    from cardrag.app.terms import text_language

    card = Document(
        id="card-pt",
        page_content="A levotiroxina deve ser tomada em jejum, com um copo de água, trinta "
        "minutos antes do café da manhã.",
        metadata={"score": 0.9},
    )
    assert text_language(card.page_content) == "pt"
    question = "Posso tomar levotiroxina com café da manhã?"
    features, missing = card_features(
        question, salient_terms(question), "pt", card.page_content, "pt", 0.9, [0.9]
    )
    assert missing == ()
    assert features["same_language"] == 1.0
    assert features["coverage"] > 0.5  # same-language words are compared


def test_a_vetoed_card_costs_no_sentence_embedding() -> None:
    from tests.conftest import CountingEmbeddings

    model = CountingEmbeddings()
    docs = [
        Document(id="card-w", page_content="Warfarin and vitamin K. Eat greens.", metadata={}),
        Document(id="card-s", page_content="Statins at night. Avoid grapefruit.", metadata={}),
    ]
    grader = Grader(Vectors(model), CALIBRATION)
    grades = grader("Can warfarin be taken with spinach?", docs)
    assert [g.missing for g in grades] == [(), ("warfarin",)]
    assert model.documents == ["Warfarin and vitamin K.", "Eat greens."]  # the statin card: none


def test_the_sentence_features_are_the_best_and_the_mean_sentence() -> None:
    question = "Can I take it with food?"
    features, _ = card_features(question, [], "en", "Take it with food.", "en", 0.8, [0.9, 0.6])
    assert features["sentence"] == 0.9
    assert features["mean_sentence"] == pytest.approx(0.75)
    empty, _ = card_features(question, [], "en", "", "en", 0.8, [])
    assert (empty["sentence"], empty["mean_sentence"]) == (0.0, 0.0)


def test_a_calibration_for_other_features_is_refused_with_the_file_named(tmp_path: Path) -> None:
    path = tmp_path / "models.json"
    # the single calibration of before: one set of features for every card
    old = _entry((*FEATURES[SAME_LANGUAGE], "same_language"), 0.5)
    entry = {"backend": "sentence-transformers", "min_similarity": 0.3, "grading": old}
    path.write_text(json.dumps({"m": entry}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"models\.json: m\.grading\.same_language\.features"):
        load_calibrations("m", path)


def test_a_rare_word_of_another_language_is_a_soft_miss_not_a_veto() -> None:
    question = "Porque devo bochechar a boca depois de usar o inalador preventivo?"
    card = "Inhaler technique\nRinse your mouth and spit after the preventer inhaler."
    terms = salient_terms(question)
    assert terms == ["bochechar", "inalador"]
    across, missing = card_features(question, terms, "pt", card, "en", 0.85, [0.85])
    assert (missing, across["soft_missing"], across["same_language"]) == ((), 1.0, 0.0)
    _, missing = card_features(question, terms, "pt", card, "pt", 0.85, [0.85])
    assert missing == ("bochechar", "inalador")  # in one language, a rare word is a name


def test_a_refusal_across_languages_says_the_card_is_in_another_language() -> None:
    grades = [Grade("a", False, -0.4, (), same_language=False)]
    assert refusal_reason(grades, {"a": "Warfarin"}) == (
        'The closest card, "Warfarin", is written in another language than the question '
        "and does not clearly answer it."
    )


def test_the_masked_features_fall_back_to_the_whole_question_without_a_masked_one() -> None:
    question = "Can I take it with food?"
    whole, _ = card_features(question, [], "en", "Take it. With food.", "en", 0.8, [0.9, 0.5])
    assert (whole["masked_sentence"], whole["masked_mean_sentence"]) == (0.9, 0.7)
    masked, _ = card_features(
        question, [], "pt", "Take it. With food.", "en", 0.8, [0.9, 0.5], [0.4, 0.2]
    )
    assert (masked["masked_sentence"], masked["masked_mean_sentence"]) == (0.4, pytest.approx(0.3))


def test_only_a_card_in_another_language_costs_the_question_without_its_names() -> None:
    from tests.conftest import CountingEmbeddings

    model = CountingEmbeddings()
    english = Document(
        id="card-i",
        page_content="Ibuprofen eases pain. Take it with food.",
        metadata={"title": "Ibuprofen", "score": 0.9, "language": "en"},
    )
    grader = Grader(Vectors(model), CALIBRATION)
    grader("Can I take ibuprofen with coffee?", [english])
    assert model.queries == ["Can I take ibuprofen with coffee?"]  # same language
    grader("¿Es seguro tomar ibuprofeno con café?", [english, english])
    assert model.queries[1:] == [
        "¿Es seguro tomar ibuprofeno con café?",
        "¿Es seguro tomar  con café?",  # once for both cards (cached)
    ]


def _lead_alone(feature: str = "lead") -> Calibration:
    n = len(FEATURES[ACROSS_LANGUAGES])
    weights = tuple(10.0 if f == feature else 0.0 for f in FEATURES[ACROSS_LANGUAGES])
    return Calibration(
        "fake", FEATURES[ACROSS_LANGUAGES], (0.0,) * n, (1.0,) * n, weights, 0.0, 0.0
    )


def test_the_grader_scores_a_card_across_languages_by_its_lead_over_the_ranked_rivals() -> None:
    english = Document(
        id="card-i",
        page_content="Iron is absorbed best on an empty stomach.",
        metadata={"title": "Iron tablets", "score": 0.82, "language": "en"},
    )
    grader = Grader(
        Vectors(FakeEmbeddings()), Calibrations(_score_alone(SAME_LANGUAGE), _lead_alone())
    )
    question = "Devo tomar o ferro em jejum?"
    alone = grader(question, [english])
    assert (alone[0].answerable, alone[0].answerability) == (True, 0.0)  # lead 0 -> logit 0
    behind = grader(question, [english, *_rivals(0.85, 0.80)])  # a gated rival ahead
    assert (behind[0].answerable, behind[0].answerability) == (False, pytest.approx(-0.3))
    ahead = grader(question, [english], ranked=[english, *_rivals(0.80)])
    assert (ahead[0].answerable, ahead[0].answerability) == (True, pytest.approx(0.2))


def _rivals(*scores: float, text: str = "Paracetamol eases pain.") -> list[Document]:
    return [
        Document(id=f"card-{i}", page_content=text, metadata={"score": s, "language": "en"})
        for i, s in enumerate(scores)
    ]


def test_the_grader_scores_a_card_across_languages_by_its_lead_in_glossed_words() -> None:
    english = Document(
        id="card-s",
        page_content="A bathroom cabinet is a poor place to keep medicines.",
        metadata={"title": "Where to keep medicines", "score": 0.82, "language": "en"},
    )
    grader = Grader(
        Vectors(FakeEmbeddings()),
        Calibrations(_score_alone(SAME_LANGUAGE), _lead_alone("coverage_lead")),
    )
    # the question's gloss: cabinet, bathroom, medicine; the rivals hold "medicine" alone
    question = "L'armadietto del bagno va bene per i medicinali? (en: cabinet; bathroom; medicine)"
    rivals = _rivals(0.83, 0.81, text="Take the medicine with food.")
    graded = grader(question, [english, *rivals])
    # gloss coverage 1.0 against 0.281 ("medicine" weighs 0.281 of the three words)
    assert [g.answerable for g in graded] == [True, False, False]
    assert [g.answerability for g in graded] == pytest.approx([7.19, -7.19, -7.19], abs=0.01)
    # the same card among rivals holding every glossed word leads by nothing
    level = grader(question, [english], ranked=[english, *_rivals(0.83, text=english.page_content)])
    assert (level[0].answerable, level[0].answerability) == (True, 0.0)


def test_the_question_without_its_names_is_embedded_ahead() -> None:
    from cardrag.app.vectors import ahead_pool
    from tests.conftest import CountingEmbeddings

    model = CountingEmbeddings()
    grader = Grader(Vectors(model), CALIBRATION)
    glossed = "Posso tomar ibuprofeno com leite? (en: milk)"
    grader.prefetch(glossed)
    ahead_pool().submit(lambda: None).result()
    assert model.queries == ["Posso tomar  com leite? (en: milk)"]
    doc = Document(id="card-i", page_content="Ibuprofen: take it with milk or food.", metadata={})
    grader(glossed, [doc])  # the question itself, then nothing again: the masked one is kept
    assert model.queries == ["Posso tomar  com leite? (en: milk)", glossed]
    # in the cards' language too (the extractive answerer reads it); no name or no
    # calibration: nothing
    grader.prefetch("Can I take ibuprofen with milk?")
    grader.prefetch("Posso tomar com leite? (en: milk)")
    Grader(Vectors(model), calibrations=None).prefetch("Posso tomar varfarina? (en: take)")
    ahead_pool().submit(lambda: None).result()
    assert model.queries[2:] == ["Can I take  with milk?"]
