from __future__ import annotations

from app.citations import extract_citations, verify_citations


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
    from app.citations import neutralise

    assert neutralise("A [cite:card-a]. B [cite: card-b ][cite:x] and C.") == "A. B and C."
    assert neutralise("No markers here.") == "No markers here."
