from __future__ import annotations

from pathlib import Path

import pytest

from cardrag.app.aspects import aspect_verdict, aspects_of, fold, missing_aspects
from cardrag.app.question_types import (
    QUESTION_TYPES,
    asked_types,
    folded,
    load_question_types,
    says_type,
)


@pytest.mark.parametrize(
    ("question", "language", "asked"),
    [
        ("How should I store my insulin pens?", "en", ("how to store it",)),
        ("Onde devo guardar a insulina?", "pt", ("how to store it",)),
        (
            "¿Cómo se conserva el jarabe?",
            "es",
            ("how to store it", "which forms or strengths exist"),
        ),
        ("Come si conserva l'insulina?", "it", ("how to store it",)),
        ("What if I took too much paracetamol?", "en", ("what to do after too much",)),
        ("Tomei ibuprofeno a mais, e agora?", "pt", ("what to do after too much",)),
        ("Tomé una dosis doble por error", "es", ("what to do after too much",)),
        ("Ho preso troppa tachipirina", "it", ("what to do after too much",)),
        ("What strengths does metformin come in?", "en", ("which forms or strengths exist",)),
        ("A metformina vem em xarope?", "pt", ("which forms or strengths exist",)),
        ("What colour is a levothyroxine tablet?", "en", ("what it looks like",)),
        ("¿De qué color es la pastilla?", "es", ("what it looks like",)),
        ("Does omeprazole contain lactose?", "en", ("what it contains",)),
        ("Il ferro contiene glutine?", "it", ("what it contains",)),
        ("How do I come off sertraline?", "en", ("how to stop it",)),
        ("Posso parar a sertralina de repente?", "pt", ("how to stop it",)),
        ("¿Puedo dejar de tomar el omeprazol?", "es", ("how to stop it",)),
        ("Posso smettere la statina?", "it", ("how to stop it",)),
        ("Can I take it with milk?", "en", ()),
        ("Existe aplicativo para lembrar de tomar remédio?", "pt", ()),  # "is there": any type
    ],
)
def test_a_question_asks_the_types_its_own_language_names(
    question: str, language: str, asked: tuple[str, ...]
) -> None:
    assert asked_types(folded(fold(question)), language) == asked


def test_a_language_not_served_is_read_as_english() -> None:
    assert asked_types("how should i store it", "de") == ("how to store it",)


@pytest.mark.parametrize(
    ("aspect", "said", "unsaid"),
    [
        ("how to store it", "Keep iron tablets out of the reach of children.", "Take it daily."),
        ("how to store it", "Guardar em local fresco.", "Tomar com água."),
        ("what to do after too much", "Never take a double dose.", "Take one tablet."),
        ("which forms or strengths exist", "It comes as a liquid.", "Take it at night."),
        ("what it looks like", "The tablet shell may appear in your stool.", "Take it."),
        ("what it contains", "Some liquids contain sugar.", "Take it with food."),
        ("how to stop it", "Do not stop suddenly; taper the dose.", "Take it with food."),
    ],
)
def test_a_card_says_a_type_in_its_own_words(aspect: str, said: str, unsaid: str) -> None:
    assert says_type(aspect, folded(fold(said)))
    assert not says_type(aspect, folded(fold(unsaid)))


def test_every_type_lists_the_four_languages() -> None:
    assert [t.name for t in QUESTION_TYPES] == [
        "storage",
        "overdose",
        "availability",
        "appearance",
        "ingredients",
        "stopping",
    ]
    assert all(set(t.asked) == {"en", "pt", "es", "it"} for t in QUESTION_TYPES)


WARFARIN = (
    "Warfarin slows blood clotting. Eat roughly the same amount of vitamin K every week. "
    "Never take a double dose the next day."
)


def test_a_type_is_an_aspect_a_card_must_say_something_of() -> None:
    asked = aspects_of("How should I store my warfarin tablets?", "en")
    assert asked == ("how to store it",)
    assert missing_aspects(asked, WARFARIN) == ("how to store it",)
    assert missing_aspects(aspects_of("I took too much warfarin", "en"), WARFARIN) == ()
    # a type and a named aspect together: each is checked its own way
    both = aspects_of("Can children take warfarin syrup?", "en")
    assert both == ("children", "which forms or strengths exist")
    assert missing_aspects(both, WARFARIN) == ("children", "which forms or strengths exist")


def test_a_two_part_question_keeps_the_part_the_card_answers() -> None:
    assert aspect_verdict("How do I store warfarin?", "en", WARFARIN) == (
        ("how to store it",),
        (),
    )
    assert aspect_verdict(
        "Can I eat spinach on warfarin, and how do I store the tablets?", "en", WARFARIN
    ) == ((), ("how to store it",))


def test_a_types_file_with_a_missing_language_or_a_bad_pattern_names_the_file_and_type(
    tmp_path: Path,
) -> None:
    path = tmp_path / "types.toml"
    path.write_text(
        '[[types]]\nname = "storage"\naspect = "how to store it"\nsaid = ["store"]\n'
        '[types.asked]\nen = ["store"]\npt = ["guardar"]\nes = ["guardar"]\n'
    )
    with pytest.raises(ValueError, match=r"types\.toml: type 1 \(storage\): missing field 'it'"):
        load_question_types(path)
    path.write_text(
        path.read_text().replace('said = ["store"]', 'said = ["(store"]') + 'it = ["x"]\n'
    )
    with pytest.raises(ValueError, match=r"type 1 \(storage\): a pattern does not compile"):
        load_question_types(path)
    path.write_text(path.read_text().replace('"(store"', '"store"'))
    (kind,) = load_question_types(path)
    assert (kind.name, kind.aspect, kind.said) == ("storage", "how to store it", r"\b(?:store)\b")
