from __future__ import annotations

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from cardrag.app.extractive import ExtractiveAnswerer
from cardrag.app.prompts import card_context
from cardrag.retrievers.matched import MatchedCard, window
from tests.conftest import FakeEmbeddings

BODY = "First sentence here. The matched one. A third sentence. And a fourth one at the end."


def _doc(**meta: object) -> Document:
    return Document(id="card-x", page_content=BODY, metadata={"title": "X", **meta})


def test_every_field_is_read_once_from_the_metadata() -> None:
    card = MatchedCard.from_document(
        _doc(
            score=0.8,
            fused_score=0.05,
            matched_child_id="card-x::01",
            matched_child_text="X\n\nThe matched one.",
            matched_start_index=21,
            matched_end_index=37,
            matched_window_start_index=0,
            matched_window_end_index=55,
        )
    )
    assert (card.id, card.title, card.score, card.fused_score) == ("card-x", "X", 0.8, 0.05)
    assert (card.child_id, card.passage) == ("card-x::01", "The matched one.")
    assert card.prompt_range(20) == (0, 55)  # the sentence window, whatever the budget


def test_without_a_window_the_prompt_is_cut_around_the_passage() -> None:
    card = MatchedCard.from_document(_doc(matched_start_index=21, matched_end_index=37))
    assert card.prompt_range(30) == window(BODY, 21, 37, 30)
    lo, hi = card.prompt_range(30)
    assert "The matched one." in BODY[lo:hi]


def test_a_range_outside_the_text_is_ignored_and_the_passage_falls_back() -> None:
    bad = MatchedCard.from_document(
        _doc(matched_start_index=5, matched_end_index=999, matched_child_text="child")
    )
    assert (bad.start, bad.end, bad.passage) == (None, None, "child")
    assert MatchedCard.from_document(Document(page_content="Whole.")).passage == "Whole."


def test_within_its_budget_the_extractive_answerer_reads_the_prompts_window() -> None:
    # the sentence-window chunker's window (0, 55) is far from a 30-character budget window
    doc = _doc(
        score=0.8,
        matched_start_index=21,
        matched_end_index=37,
        matched_window_start_index=38,
        matched_window_end_index=84,
    )
    shown = card_context(doc, 30)
    assert "A third sentence. And a fourth one at the end." in shown
    assert "The matched one." not in shown
    embeddings: Embeddings = FakeEmbeddings()
    draft = ExtractiveAnswerer(embeddings, read_chars=30)("matched one", [doc], 30)
    quoted = draft.answer.removesuffix(" [cite:card-x]")
    assert quoted == "A third sentence. And a fourth one at the end."  # the window's two
    # by default the answerer reads the whole (short) card: the matched sentence is there
    whole = ExtractiveAnswerer(embeddings)("matched one", [doc], 30).answer
    assert whole.startswith("The matched one.")
