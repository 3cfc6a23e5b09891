from __future__ import annotations

from langchain_core.documents import Document

from cardrag.app.rivals import card_leads, leads


def test_a_cards_lead_is_over_the_best_other_card_ranked_the_gate_aside() -> None:
    assert leads([0.84, 0.80, 0.79]) == [0.04, -0.04, -0.05]
    # the gate dropped a rival of 0.83: the lead is over it, not over the cards that passed
    assert leads([0.84], [0.84, 0.83, 0.79]) == [0.01]
    assert leads([0.84]) == [0.0]  # ranked alone
    assert leads([0.8, 0.8]) == [0.0, 0.0]  # a tie: neither leads


def _card(card_id: str, score: float) -> Document:
    return Document(id=card_id, page_content=card_id, metadata={"score": score})


def test_card_leads_are_in_similarity_and_in_coverage_over_every_ranked_rival() -> None:
    a, b, c = _card("a", 0.84), _card("b", 0.85), _card("c", 0.80)
    covered = {"a": 1.0, "b": 0.25, "c": 0.5}
    # c was ranked but gated: it is still a rival of a and b
    assert card_leads([a, b], [a, b, c], lambda d: covered[str(d.id)]) == [
        {"lead": -0.01, "coverage_lead": 0.5},
        {"lead": 0.01, "coverage_lead": -0.75},
    ]
    # two cards that hold as much of the question's wording: neither leads in coverage
    assert card_leads([a, c], [a, c], lambda d: 0.5) == [
        {"lead": 0.04, "coverage_lead": 0.0},
        {"lead": -0.04, "coverage_lead": 0.0},
    ]


def test_each_ranked_card_s_coverage_is_measured_once() -> None:
    a, b = _card("a", 0.84), _card("b", 0.80)
    asked: list[str] = []

    def covered(doc: Document) -> float:
        asked.append(str(doc.id))
        return 1.0

    card_leads([a], [a, b], covered)
    assert asked == ["a", "b"]  # a is both graded and a rival: measured once
