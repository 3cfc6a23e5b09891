from __future__ import annotations

from langchain_core.documents import Document

from cardrag.app.prompts import card_context
from cardrag.ingest.cards import Card
from cardrag.ingest.splitter import CardSplitter
from cardrag.retrievers.matched import window


def test_window_contains_the_passage_and_respects_the_budget() -> None:
    text = "aaaa bbbb cccc dddd eeee"
    assert window(text, 20, 24, 10) == (15, 24)  # "dddd eeee": the passage at the very end
    assert window(text, 0, 4, 10) == (0, 9)  # "aaaa bbbb"
    assert window(text, None, None, 10) == (0, 9)
    assert window(text, 0, 24, 100) == (0, 24)  # fits: the whole text


def test_card_whose_matched_sentence_is_at_its_end_reaches_the_prompt(
    shipped_cards: list[Card],
) -> None:
    card = next(c for c in shipped_cards if c.id == "card-levothyroxine-routine")
    last = CardSplitter().split_documents([card.to_document()])[-1]
    doc = Document(
        id=card.id,
        page_content=card.body,
        metadata={
            "title": card.title,
            "matched_start_index": last.metadata["start_index"],
            "matched_end_index": last.metadata["end_index"],
        },
    )
    context = card_context(doc, 600)
    header, body = context.split("\n", 1)
    assert header == "[card-levothyroxine-routine] Levothyroxine: building a daily routine"
    assert len(card.body) == 1506
    assert body.endswith("so contact your clinic as soon as you know you are pregnant.")
    assert body.startswith("…")
    assert card.body[last.metadata["start_index"] : last.metadata["end_index"]] in body
    assert len(body) <= 601
    # the blind alternative, the first 600 characters, would have missed it
    assert "pregnant" not in card.body[:600]


def test_short_card_enters_whole() -> None:
    doc = Document(id="card-x", page_content="Short text.", metadata={"title": "X"})
    assert card_context(doc, 600) == "[card-x] X\nShort text."


def test_a_sentence_window_is_the_cards_prompt_text() -> None:
    body = "First sentence here. The matched sentence. Its neighbour after. A far tail sentence."
    doc = Document(
        id="card-x",
        page_content=body,
        metadata={
            "title": "X",
            "matched_start_index": 21,
            "matched_end_index": 42,
            "matched_window_start_index": 21,
            "matched_window_end_index": 63,
            "prompt_text": body[21:63],
        },
    )
    assert card_context(doc, 600) == "[card-x] X\n…The matched sentence. Its neighbour after.…"
    # without a window the same card is cut around the passage within the budget (all of it)
    plain = Document(id="card-x", page_content=body, metadata={"title": "X"})
    assert card_context(plain, 600) == f"[card-x] X\n{body}"
