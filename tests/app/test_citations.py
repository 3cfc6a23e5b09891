from __future__ import annotations

from cardrag.app.citations import (
    Segment,
    drop_markers,
    extract_citations,
    misattributed,
    segments,
    verify_citations,
)


def test_extract_citations_in_order_without_repeats() -> None:
    text = "A [cite:card-b]. B [cite:card-a] and [cite: card-b ]. Bad [cite:not a card]."
    assert extract_citations(text) == ["card-b", "card-a", "not a card"]


def test_unretrieved_and_unknown_ids_are_removed_and_reported() -> None:
    v = verify_citations(
        "Keep it cool [cite:card-insulin-storage] [cite:card-warfarin-diet]. "
        "Never freeze [cite:card-nope].",
        ["card-insulin-storage", "card-also-nope"],
        ["card-insulin-storage", "card-storage-heat-humidity"],
    )
    assert v.answer == "Keep it cool [cite:card-insulin-storage]. Never freeze."
    assert v.citations == ["card-insulin-storage"]
    assert v.rejected == ["card-warfarin-diet", "card-nope", "card-also-nope"]
    assert v.uncited is False


def test_answer_citing_nothing_while_cards_were_retrieved_is_flagged() -> None:
    v = verify_citations("Drink water.", [], ["card-a"])
    assert (v.answer, v.citations, v.rejected, v.uncited) == ("Drink water.", [], [], True)
    assert verify_citations("Nothing retrieved.", [], []).uncited is False


def test_markers_inside_card_text_are_removed_cleanly() -> None:
    from cardrag.app.citations import neutralise

    assert neutralise("A [cite:card-a]. B [cite: card-b ][cite:x] and C.") == "A. B and C."
    assert neutralise("No markers here.") == "No markers here."
    # issue 72: a card's "[Cite:card-x]" was quoted verbatim in an answer
    assert neutralise("A [Cite:card-a]. B [CITE: card-b ] and C.") == "A. B and C."
    assert extract_citations("Keep cool [Cite:card-a].") == ["card-a"]


def test_segments_pair_each_run_of_markers_with_the_words_before_it() -> None:
    answer = "Keep it cold [cite:card-a]. Ask first [cite:card-b] [cite:card-c][cite:card-b]. Bye."
    assert segments(answer) == [
        Segment("Keep it cold", ["card-a"]),
        Segment("Ask first", ["card-b", "card-c"]),
    ]


def test_a_stretch_citing_n_cards_must_cite_n_of_the_n_closest() -> None:
    support = {"card-a": 0.90, "card-b": 0.85, "card-c": 0.80}
    assert misattributed(["card-a"], support) == []
    assert misattributed(["card-c"], support) == ["card-c"]
    assert misattributed(["card-b", "card-a"], support) == []
    assert misattributed(["card-a", "card-c"], support) == ["card-c"]
    assert misattributed(["card-zz"], support) == []  # not retrieved: the other check's job


def test_drop_markers_removes_only_the_rejected_ones_of_each_run() -> None:
    answer = "A [cite:card-x] [cite:card-y]. B [cite:card-y]."
    assert drop_markers(answer, [["card-y"], []]) == "A [cite:card-x]. B [cite:card-y]."
    assert drop_markers(answer, [["card-x", "card-y"], ["card-y"]]) == "A. B."
