"""Brand names read as the cards' generic names (the dictionary inside the pinned wheel)."""

from __future__ import annotations

import pytest

from cardrag.app.names import Names, medicines_of

CARD_WORDS = ["levothyroxine", "metformin", "ibuprofen", "paracetamol", "antidepressants", "copy"]


@pytest.fixture(scope="module")
def names() -> Names:
    return Names.of_words([*CARD_WORDS, "breakfast", "tablets"])


def test_only_medicine_names_of_the_cards_are_known(names: Names) -> None:
    assert sorted(names.cards.values()) == sorted(CARD_WORDS)  # breakfast, tablets are no names


@pytest.mark.parametrize(
    ("question", "read"),
    [
        (
            "Should I take my Synthroid before breakfast?",
            "Should I take my levothyroxine before breakfast?",
        ),
        (
            "O Glucophage deve ser tomado com as refeições?",
            "O metformin deve ser tomado com as refeições?",
        ),
        ("Can I take Advil and Tylenol?", "Can I take ibuprofen and paracetamol?"),
        (
            "Is my antidepressant working?",
            "Is my antidepressant working?",
        ),  # the cards' word, inflected
        ("Can I copy my prescription?", "Can I copy my prescription?"),  # an ordinary word
        (
            "Can I take Plavix with aspirin?",
            "Can I take Plavix with aspirin?",
        ),  # no card's medicine
        (
            "Levotiroxina em jejum?",
            "Levotiroxina em jejum?",
        ),  # the cards' medicine, another spelling
    ],
)
def test_a_question_is_read_with_the_cards_names(names: Names, question: str, read: str) -> None:
    assert names.rewrite(question) == read


def test_a_missing_medicine_is_described_by_its_generic_and_the_patients_word(
    names: Names,
) -> None:
    assert names.describe("plavix", "Plavix") == "clopidogrel (Plavix)"
    assert names.describe("clopidogrel", "clopidogrel") == "clopidogrel"
    assert names.describe("bochechar", "bochechar") == "bochechar"
    assert medicines_of("Coumadin") == frozenset({"warfarin"})


ALIASES = {
    "water tablet": "diuretics",
    "furosemide": "diuretics",
    "rosuvastatin": "statins",
    "tachipirina": "paracetamol",
    "comprimido para dormir": "sleeping tablets",
}


@pytest.mark.parametrize(
    ("question", "read"),
    [
        ("My WATER  tablets keep me up", "My diuretics keep me up"),  # any case, spacing, plural
        ("Posso prendere la Tachipirina?", "Posso prendere la paracetamol?"),
        ("Quando tomo o comprimido para dormir?", "Quando tomo o sleeping tablets?"),
        ("When do I take Crestor?", "When do I take statins?"),  # dictionary, then the alias
        ("Is Lasix a water tablet?", "Is diuretics a diuretics?"),
        ("Is watermelon a tablet?", "Is watermelon a tablet?"),  # whole words only
    ],
)
def test_a_cards_aliases_are_read_as_its_words(question: str, read: str) -> None:
    assert Names.of_words(CARD_WORDS, ALIASES).rewrite(question) == read
