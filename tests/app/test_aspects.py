"""What a question asks about, in four languages, and whether a card mentions it."""

from __future__ import annotations

import pytest

from cardrag.app.aspects import ASPECTS, aspects_of, missing_aspects

PREGNANCY = "pregnancy or breastfeeding"


@pytest.mark.parametrize(
    ("question", "language", "asked"),
    [
        ("Is it safe to take ibuprofen while breastfeeding?", "en", (PREGNANCY,)),
        ("A varfarina pode ser usada na gravidez?", "pt", (PREGNANCY,)),
        ("¿Es seguro tomar ibuprofeno durante la lactancia?", "es", (PREGNANCY,)),
        ("Posso prendere l'ibuprofene durante l'allattamento?", "it", (PREGNANCY,)),
        ("¿La levotiroxina hace caer el pelo?", "es", ("hair",)),
        ("Fui indicado pelo médico, posso tomar com café?", "pt", ()),  # "pelo": "by the"
        ("Si mi marido bebe alcohol, ¿pasa algo?", "es", ()),  # "bebe": drinks, no baby
        ("Questo rimedio va preso a stomaco vuoto?", "it", ()),  # "rimedio" is not "rene"
        ("What is the maximum daily dose for a child?", "en", ("children", "the maximum dose")),
        ("Can I take it with milk?", "en", ()),
        ("Can I take it with milk?", "fr", ()),  # a language we do not serve reads as English
    ],
)
def test_the_aspects_a_question_asks_about(question: str, language: str, asked: tuple) -> None:
    assert aspects_of(question, language) == asked


def test_a_card_covers_an_aspect_in_any_of_the_languages_words() -> None:
    english = "Avoid ibuprofen in the last months of pregnancy."
    portuguese = "Não use durante a gravidez sem falar com o médico."
    assert missing_aspects([PREGNANCY], english) == ()
    assert missing_aspects([PREGNANCY], portuguese) == ()  # a Portuguese corpus answers too
    assert missing_aspects([PREGNANCY, "hair"], english) == ("hair",)
    assert missing_aspects([], english) == ()


def test_every_aspect_has_words_in_every_language_we_serve() -> None:
    assert {lang for words in ASPECTS.values() for lang in words} == {"en", "pt", "es", "it"}
    assert all(set(words) == {"en", "pt", "es", "it"} for words in ASPECTS.values())


@pytest.mark.parametrize(
    ("question", "language", "verdict"),
    [
        ("Is ibuprofen safe while breastfeeding?", "en", ((PREGNANCY,), ())),
        (
            "Do I take ibuprofen with food, and is it safe while breastfeeding?",
            "en",
            ((), (PREGNANCY,)),  # the card answers the first part
        ),
        ("Tomo ibuprofeno com comida? É seguro na gravidez?", "pt", ((), (PREGNANCY,))),
        ("Is ibuprofen safe in pregnancy, and why?", "en", ((PREGNANCY,), ())),  # "why" alone
        (
            "¿Es seguro en el embarazo y durante la lactancia?",
            "es",
            ((PREGNANCY,), ()),  # both parts ask what the card never mentions
        ),
        ("Do I take ibuprofen with food?", "en", ((), ())),
    ],
)
def test_a_card_is_vetoed_only_when_it_answers_no_part_of_the_question(
    question: str, language: str, verdict: tuple
) -> None:
    from cardrag.app.aspects import aspect_verdict

    assert aspect_verdict(question, language, "Take ibuprofen with food.") == verdict
