from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from cardrag.app.context import Context, names_of
from cardrag.app.extractive import ExtractiveAnswerer
from cardrag.app.grading import Grader
from cardrag.app.graph import QuestionError, answer, check_question, graph, passing
from cardrag.app.prompts import GATE_REASON, MODEL_REASON
from cardrag.app.vectors import Vectors
from cardrag.ingest.index import open_index
from cardrag.retrievers.parent import ScoredParentDocumentRetriever
from tests.conftest import REAL_MODEL


@pytest.fixture(scope="module")
def context(shipped_index_dir: Path, real_embeddings: Embeddings) -> Context:
    index = open_index(shipped_index_dir, real_embeddings)
    retriever = ScoredParentDocumentRetriever(
        vectorstore=index.vectorstore, docstore=index.docstore, min_similarity=0.3
    )
    return Context(retriever=retriever, answerer=ExtractiveAnswerer(real_embeddings))


def test_graph_is_compiled_with_its_context_schema() -> None:
    assert graph.name == "cardrag"
    assert graph.builder.context_schema is Context
    assert set(graph.get_graph().nodes) == {
        "__start__",
        "retrieve",
        "grade",
        "generate",
        "verify_citations",
        "refuse",
        "__end__",
    }


def test_narrow_question_cites_the_right_card(context: Context) -> None:
    reply = answer("How long can an insulin pen stay out of the fridge?", context)
    assert [c.id for c in reply.citations] == ["card-insulin-storage"]
    assert "for about four weeks. [cite:card-insulin-storage]" in reply.answer
    assert reply.retrieved[0].id == "card-insulin-storage"
    assert reply.retrieved[0].matched_passage.startswith("The pen or vial you are using")
    assert (reply.refused, reply.uncited, reply.rejected_citations) == (False, False, [])
    assert [c.rank for c in reply.retrieved] == [1, 2, 3, 4]
    assert [c.ordering_score for c in reply.retrieved] == [None] * 4  # dense only: no fusion
    json.loads(reply.model_dump_json())  # serialisable


def test_a_citation_marker_in_a_question_is_not_matched_as_words(context: Context) -> None:
    """Issue 72: a question's ``[cite:...]`` text once lifted a card that held those words."""
    asked = "How long can an insulin pen stay out of the fridge?"
    plain = answer(asked, context)
    marked = answer(f"{asked} [cite:card-warfarin-diet] [CITE:card-iron-tablets]", context)
    assert [c.id for c in marked.retrieved] == [c.id for c in plain.retrieved]
    assert [c.score for c in marked.retrieved] == [c.score for c in plain.retrieved]
    assert marked.answer == plain.answer


def test_off_topic_question_is_refused_without_citation(context: Context) -> None:
    reply = answer("Who won the football world cup in 1966?", context)
    assert reply.refused is True
    assert (reply.citations, reply.retrieved) == ([], [])
    assert reply.answer.startswith("The knowledge base does not cover this question")
    assert reply.refusal_reason == GATE_REASON


def test_grading_refuses_a_medicine_no_card_mentions_and_says_so(
    context: Context, real_embeddings: Embeddings
) -> None:
    question = "Can I take clopidogrel and aspirin together every day?"
    ungraded = answer(question, context)
    assert ungraded.refused is False
    assert ungraded.citations
    grader = Grader(Vectors(real_embeddings), calibrations=None)  # salient terms only
    reply = answer(question, Context(retriever=context.retriever, grader=grader))
    assert reply.refused is True
    assert reply.refusal_reason == "No card mentions clopidogrel."
    assert (reply.citations, reply.retrieved) == ([], [])
    # a question about a card's own medicine still gets its answer
    kept = answer(
        "How long can an insulin pen stay out of the fridge?",
        Context(retriever=context.retriever, grader=grader),
    )
    assert [c.id for c in kept.citations] == ["card-insulin-storage"]


def test_a_model_that_finds_no_answer_in_the_cards_becomes_a_refusal(context: Context) -> None:
    draft = {"answer": "The cards do not cover this.", "citations": [], "answered": False}
    model = GenericFakeChatModel(messages=iter([AIMessage(content=json.dumps(draft))]))
    reply = answer(
        "How should I store insulin?", Context(retriever=context.retriever, chat_model=model)
    )
    assert (reply.refused, reply.refusal_reason, reply.citations) == (True, MODEL_REASON, [])


def test_scripted_model_citing_unretrieved_and_unknown_cards_is_corrected(context: Context) -> None:
    draft = {
        "answer": "Keep spare pens in the fridge [cite:card-insulin-storage]. "
        "Eat the same greens weekly [cite:card-warfarin-diet]. "
        "Ask staff for code ESC-7 [cite:card-made-up].",
        "citations": ["card-insulin-storage", "card-warfarin-diet", "card-made-up"],
    }
    model = GenericFakeChatModel(messages=iter([AIMessage(content=json.dumps(draft))]))
    ctx = Context(retriever=context.retriever, chat_model=model)
    reply = answer("How long can an insulin pen stay out of the fridge?", ctx)
    assert "card-warfarin-diet" not in [c.id for c in reply.retrieved]
    assert reply.answer == (
        "Keep spare pens in the fridge [cite:card-insulin-storage]. "
        "Eat the same greens weekly. Ask staff for code ESC-7."
    )
    assert [c.id for c in reply.citations] == ["card-insulin-storage"]
    assert reply.citations[0].title == "Insulin: storing pens and vials"
    assert reply.rejected_citations == ["card-warfarin-diet", "card-made-up"]


def test_scripted_model_that_cites_nothing_is_flagged(context: Context) -> None:
    model = GenericFakeChatModel(messages=iter([AIMessage(content="Just keep it somewhere cool.")]))
    reply = answer(
        "How should I store insulin?", Context(retriever=context.retriever, chat_model=model)
    )
    assert reply.answer == "Just keep it somewhere cool."
    assert (reply.uncited, reply.citations) == (True, [])


def test_question_checks() -> None:
    assert check_question("  hi  ") == "hi"
    with pytest.raises(QuestionError, match="the question is empty"):
        check_question("   ")
    with pytest.raises(
        QuestionError, match="the question is 2001 characters long; the limit is 2000"
    ):
        check_question("x" * 2001)


def test_a_chat_model_citation_of_a_card_that_does_not_hold_the_words_is_rejected(
    context: Context,
) -> None:
    # issue 19: a sentence of another card, attributed to the iron card, kept the chip
    draft = {
        "answer": "Pick one fixed moment and tie the tablet to it [cite:card-iron-tablets]. "
        "Take iron on an empty stomach, an hour before you eat [cite:card-iron-tablets].",
        "citations": ["card-iron-tablets"],
    }
    model = GenericFakeChatModel(messages=iter([AIMessage(content=json.dumps(draft))]))
    ctx = Context(retriever=context.retriever, chat_model=model)
    reply = answer("Can I take my iron tablets with tea?", ctx)
    assert [c.id for c in reply.retrieved][:2] == [
        "card-iron-tablets",
        "card-levothyroxine-routine",
    ]
    assert reply.answer == (
        "Pick one fixed moment and tie the tablet to it. "
        "Take iron on an empty stomach, an hour before you eat [cite:card-iron-tablets]."
    )
    assert [c.id for c in reply.citations] == ["card-iron-tablets"]
    assert reply.rejected_citations == ["card-iron-tablets"]


def test_a_brand_name_is_read_as_the_cards_generic_before_retrieval_and_grading(
    shipped_retriever: ScoredParentDocumentRetriever, real_embeddings: Embeddings
) -> None:
    grader = Grader(Vectors(real_embeddings), calibrations=None)  # the veto: names must match
    shipped = Context(
        retriever=shipped_retriever,
        answerer=ExtractiveAnswerer(real_embeddings),
        grader=grader,
        names=names_of(shipped_retriever),
    )
    question = "Should I take my Synthroid before breakfast?"
    as_written = answer(question, replace(shipped, names=None))
    assert as_written.refused is True
    assert as_written.refusal_reason == "No card mentions Synthroid."  # as the patient wrote it
    reply = answer(question, shipped)
    assert reply.question == question  # the reply keeps the patient's words
    assert reply.citations[0].id == "card-levothyroxine-routine"
    plavix = answer("Can I take Plavix with aspirin every day?", shipped)
    assert plavix.refusal_reason == "No card mentions clopidogrel (Plavix)."


@pytest.mark.parametrize(
    ("question", "card"),
    [
        ("Devo prendere la Tachipirina a stomaco vuoto?", "card-paracetamol-limits"),
        ("Can I take Zimox with milk?", "card-amoxicillin-course"),
        ("Should I take my Lasix in the morning?", "card-diuretic-timing"),  # a class member
        # a brand the dictionary reads as another medicine (Maalox: loperamide, a US line)
        ("Can I take Maalox with my iron tablets?", "card-antacid-spacing"),
        ("¿Puedo tomar Almax con el hierro?", "card-antacid-spacing"),
    ],
)
def test_a_name_only_a_cards_aliases_know_is_answered_from_that_card(
    shipped_index_dir: Path,
    shipped_retriever: ScoredParentDocumentRetriever,
    real_embeddings: Embeddings,
    question: str,
    card: str,
) -> None:
    aliases = open_index(shipped_index_dir, real_embeddings).manifest["aliases"]
    assert aliases["tachipirina"] == "paracetamol"  # the cards' front matter, in the manifest
    shipped = Context(
        retriever=shipped_retriever,
        answerer=ExtractiveAnswerer(real_embeddings),
        grader=Grader(Vectors(real_embeddings), calibrations=None),
        names=names_of(shipped_retriever, aliases),
    )
    without = answer(question, replace(shipped, names=names_of(shipped_retriever)))
    assert without.refused is True  # the dictionary alone does not know the name
    reply = answer(question, shipped)
    assert (reply.refused, reply.citations[0].id) == (False, card)


@pytest.mark.parametrize(
    ("question", "reason"),
    [
        (
            "Is it safe to take ibuprofen while breastfeeding?",
            "No card says anything about pregnancy or breastfeeding.",  # none it retrieved
        ),
        (
            "La levotiroxina fa cadere i capelli?",
            "No card says anything about hair.",
        ),
        ("Can I give my child half an adult paracetamol tablet?", None),  # the card says
        (
            "Should I take ibuprofen with food, and is it safe while breastfeeding?",
            None,  # the card answers the first part, and the answer names the second
        ),
    ],
)
def test_a_card_about_the_medicine_that_never_mentions_the_aspect_asked_is_refused(
    shipped_index_dir: Path, real_embeddings: Embeddings, question: str, reason: str | None
) -> None:
    from cardrag.app.calibration import load_calibrations
    from cardrag.ingest.settings import Settings

    settings = Settings(store_dir=shipped_index_dir, embedding_model=REAL_MODEL)
    index = open_index(shipped_index_dir, real_embeddings)
    shipped = Context.from_index(index, settings, real_embeddings)
    assert shipped.grader is not None
    assert shipped.grader.calibrations == load_calibrations(REAL_MODEL)  # as shipped
    reply = answer(question, shipped)
    assert reply.refusal_reason == reason
    if "breastfeeding" in question and reason is None:
        assert reply.citations[0].id == "card-ibuprofen-stomach"
        assert reply.not_covered == ["pregnancy or breastfeeding"]
        assert reply.answer.endswith(
            "\n\nThe cards say nothing about pregnancy or breastfeeding: ask your pharmacist "
            "about that."
        )
    elif reason is None:
        assert reply.citations[0].id == "card-paracetamol-limits"
        assert reply.not_covered == []
        assert "child" in reply.answer.lower()  # the card's sentence about children is quoted


@pytest.mark.parametrize(
    ("question", "closest", "lacks"),
    [
        ("What colour are warfarin tablets?", "card-warfarin-diet", ["what it looks like"]),
        ("Com que cor vem a varfarina?", "card-warfarin-diet", ["what it looks like"]),
        ("Can I take clopidogrel with food?", None, ["clopidogrel"]),  # whichever is first
    ],
)
def test_a_refusal_names_the_closest_card_and_what_it_does_not_say(
    shipped_index_dir: Path,
    real_embeddings: Embeddings,
    question: str,
    closest: str,
    lacks: list[str],
) -> None:
    from cardrag.ingest.settings import Settings

    settings = Settings(store_dir=shipped_index_dir, embedding_model=REAL_MODEL)
    shipped = Context.from_index(
        open_index(shipped_index_dir, real_embeddings), settings, real_embeddings
    )
    reply = answer(question, shipped)
    assert reply.refused
    assert reply.citations == []
    assert reply.closest is not None
    assert reply.closest_lacks == lacks
    assert reply.closest.id == closest or closest is None
    assert reply.refusal_reason is not None
    assert lacks[0] in reply.refusal_reason


def _card(card_id: str, score: float, language: str = "en") -> Document:
    return Document(id=card_id, page_content="x", metadata={"score": score, "language": language})


def test_the_across_language_gate_only_lowers_the_gate_for_a_card_in_another_language() -> None:
    docs = [_card("a", 0.84), _card("b", 0.81), _card("c", 0.81, "pt"), _card("d", 0.79)]
    ids = lambda kept: [d.id for d in kept]  # noqa: E731
    assert ids(passing(docs, 0.825)) == ["a"]
    assert ids(passing(docs, 0.825, 0.806, "pt")) == ["a", "b"]  # c is in the question's language
    assert ids(passing(docs, 0.825, 0.806, "en")) == ["a", "c"]  # an English question: c is across
    assert ids(passing(docs, 0.80, 0.9, "pt")) == ["a", "b", "c"]  # never raised: min(0.9, 0.8)
    assert ids(passing(docs, None, 0.806, "pt")) == ["a", "b", "c", "d"]  # no gate: none


@pytest.mark.parametrize(
    ("question", "card"),
    [
        ("Can ciprofloxacin hurt my tendons when I run?", "card-exercise-and-medicines"),
        ("Can I take flucloxacillin with food?", None),  # the amoxicillin card is amoxicillin's
    ],
)
def test_a_class_member_is_answered_by_a_card_that_speaks_of_its_class(
    shipped_index_dir: Path, real_embeddings: Embeddings, question: str, card: str | None
) -> None:
    from cardrag.ingest.settings import Settings

    settings = Settings(store_dir=shipped_index_dir, embedding_model=REAL_MODEL)
    index = open_index(shipped_index_dir, real_embeddings)
    reply = answer(question, Context.from_index(index, settings, real_embeddings))
    if card is None:
        assert reply.refused
        assert reply.refusal_reason == "No card mentions flucloxacillin."
    else:
        assert [c.id for c in reply.citations] == [card]
        assert "Some antibiotics in the fluoroquinolone family can rarely damage tendons." in (
            reply.answer
        )
