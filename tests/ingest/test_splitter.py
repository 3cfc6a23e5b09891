from __future__ import annotations

import statistics

import pytest
from langchain_core.documents import Document

from ingest.cards import Card
from ingest.splitter import CardSplitter, overlap_start


def test_median_card_gets_three_to_four_chunks(shipped_cards: list[Card]) -> None:
    splitter = CardSplitter()  # the defaults: 400 characters, overlap 60
    counts = sorted(len(splitter.split_spans(c.body)) for c in shipped_cards)
    by_length = sorted(shipped_cards, key=lambda c: len(c.body))
    median_cards = by_length[len(by_length) // 2 - 1 : len(by_length) // 2 + 1]
    assert [len(splitter.split_spans(c.body)) for c in median_cards] == [4, 4]
    assert statistics.median(counts) == 4
    assert (counts[0], counts[-1]) == (3, 7)


def test_paragraph_break_preferred_over_sentence_break() -> None:
    text = "Aa aa. Bb bb.\n\nCc cc. Dd dd."
    # both paragraphs fit alone, so the cut is at the paragraph, not after "Aa aa."
    assert CardSplitter(chunk_size=16, chunk_overlap=0).split_text(text) == [
        "Aa aa. Bb bb.",
        "Cc cc. Dd dd.",
    ]


def test_sentence_break_keeps_punctuation_with_its_sentence() -> None:
    text = "First one here. Second one here! Third one here?"
    assert CardSplitter(chunk_size=20, chunk_overlap=0).split_text(text) == [
        "First one here.",
        "Second one here!",
        "Third one here?",
    ]


def test_greedy_repacking_fills_up_to_the_budget() -> None:
    # pieces are "One. " "Two. " "Three. " "Four. " "Five." (their trailing space counts)
    text = "One. Two. Three. Four. Five."
    assert CardSplitter(chunk_size=12, chunk_overlap=0).split_text(text) == [
        "One. Two.",
        "Three.",
        "Four. Five.",
    ]


def test_overlap_is_word_aligned_and_prepended_after_the_first() -> None:
    text = "alpha beta gamma delta.\n\nepsilon zeta eta theta."
    splitter = CardSplitter(chunk_size=30, chunk_overlap=9)
    # the last 9 chars of chunk 1 are "ta delta." -> trimmed forward to the word "delta."
    assert splitter.split_text(text) == [
        "alpha beta gamma delta.",
        "delta.\n\nepsilon zeta eta theta.",
    ]


def test_overlap_start_trims_to_next_word_or_nothing() -> None:
    assert overlap_start("alpha beta gamma", 0, 16, 8) == 11  # "ta gamma" -> "gamma"
    assert overlap_start("alpha beta gamma", 0, 16, 6) == 11  # " gamma" -> "gamma"
    assert overlap_start("abcdefghij", 0, 10, 4) == 10  # one long word: no overlap
    assert overlap_start("alpha beta", 0, 10, 0) == 10


def test_hard_split_when_no_separator_fits() -> None:
    assert CardSplitter(chunk_size=10, chunk_overlap=0).split_text("x" * 25) == [
        "x" * 10,
        "x" * 10,
        "x" * 5,
    ]


def test_title_on_first_chunk_only() -> None:
    doc = Document(
        page_content="One two.\n\nThree four.", metadata={"title": "T", "parent_id": "card-t"}
    )
    children = CardSplitter(chunk_size=12, chunk_overlap=0).split_documents([doc])
    assert [c.page_content for c in children] == ["T\n\nOne two.", "Three four."]
    assert [c.metadata["chunk_index"] for c in children] == [0, 1]
    assert [(c.metadata["start_index"], c.metadata["end_index"]) for c in children] == [
        (0, 8),
        (10, 21),
    ]
    assert all(c.metadata["parent_id"] == "card-t" for c in children)


def test_overlap_larger_than_chunk_is_rejected() -> None:
    with pytest.raises(
        ValueError, match=r"Got a larger chunk overlap \(50\) than chunk size \(40\)"
    ):
        CardSplitter(chunk_size=40, chunk_overlap=50)


def test_every_shipped_chunk_traces_back_to_its_body(shipped_cards: list[Card]) -> None:
    splitter = CardSplitter()
    checked = 0
    for card in shipped_cards:
        children = splitter.split_documents([card.to_document()])
        previous_start = 0
        for child in children:
            start, end = child.metadata["start_index"], child.metadata["end_index"]
            own = card.body[start:end]
            text = child.page_content
            assert text.endswith(own)
            prefix = text[: len(text) - len(own)]
            if child.metadata["chunk_index"] == 0:
                assert prefix == f"{card.title}\n\n"
            else:  # the overlap: a contiguous, word-aligned tail of the previous chunk
                assert prefix == card.body[start - len(prefix) : start]
                assert prefix == "" or card.body[start - len(prefix) - 1].isspace()
                assert start - len(prefix) >= previous_start
                assert len(prefix.rstrip()) <= splitter.overlap
            previous_start = start
            checked += 1
    assert checked == 164


def test_card_row_only_for_cards_the_model_can_read_whole() -> None:
    splitter = CardSplitter(chunk_size=12, chunk_overlap=0, card_row=True, card_row_max_chars=25)
    short = Document(
        page_content="One two.\n\nThree four.", metadata={"title": "S", "parent_id": "s"}
    )
    long = Document(
        page_content="One two.\n\nThree four.\n\nFive six.", metadata={"parent_id": "l"}
    )
    rows = splitter.split_documents([short, long])
    assert [
        (r.metadata["parent_id"], r.metadata["chunk_index"], r.metadata["has_card_row"])
        for r in rows
        if r.metadata["chunk_index"] >= 0
    ] == [("s", 0, True), ("s", 1, True), ("l", 0, False), ("l", 1, False), ("l", 2, False)]
    cards = [r for r in rows if r.metadata["chunk_index"] == -1]
    assert [
        (c.page_content, c.metadata["start_index"], c.metadata["end_index"]) for c in cards
    ] == [("S\n\nOne two.\n\nThree four.", 0, 21)]
