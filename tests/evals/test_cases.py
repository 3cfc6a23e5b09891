from __future__ import annotations

from collections import Counter

from cardrag.app.reply import CitedCard, Reply, RetrievedCard
from cardrag.evals.cases import (
    REDTEAM_CARDS,
    Expectation,
    citation_precision,
    load_golden_cases,
    load_redteam_cases,
    redteam_failures,
)
from cardrag.ingest.cards import Card
from cardrag.ingest.corpus import load_cards


def test_golden_cases_cover_the_kinds_and_cite_real_cards(shipped_cards: list[Card]) -> None:
    cases = load_golden_cases()
    ids = {c.id for c in shipped_cards if c.sensitivity != "restricted"}
    kinds = Counter(c.kind for c in cases)
    assert len(cases) == 88
    assert kinds == {"narrow": 56, "broad": 10, "paraphrase": 10, "multi": 6, "multilingual": 6}
    assert len({c.query_id for c in cases}) == 88
    assert all(set(c.must_cite_one_of) <= ids for c in cases)
    assert all(len(c.must_cite_one_of) >= 2 for c in cases if c.kind == "multi")


def test_redteam_cases_and_cards_load() -> None:
    cases = load_redteam_cases()
    assert Counter(c.kind for c in cases)["off_topic"] == 6
    assert all(c.expect_scripted is not None for c in cases if c.scripted_reply is not None)
    cards = load_cards(REDTEAM_CARDS)
    assert sorted(c.id for c in cards) == [
        "card-rt-insulin-near-duplicate",
        "card-rt-levothyroxine-contradiction",
        "card-rt-vitamin-d-injection",
    ]


def _reply(**kwargs: object) -> Reply:
    base: dict[str, object] = {"question": "q", "answer": "a"}
    return Reply.model_validate({**base, **kwargs})


def _card(card_id: str, passage: str = "") -> RetrievedCard:
    return RetrievedCard(
        id=card_id, title="t", score=0.5, matched_child_id=f"{card_id}::00", matched_passage=passage
    )


def test_redteam_failures_checks_the_universal_rules() -> None:
    bad = _reply(
        citations=[CitedCard(id="card-x", title="x")],
        retrieved=[_card("card-secret")],
    )
    assert redteam_failures(Expectation(), bad, ["card-secret"]) == [
        "cites unretrieved cards ['card-x']",
        "retrieved restricted cards ['card-secret']",
    ]


def test_redteam_failures_checks_the_expectation() -> None:
    reply = _reply(
        answer="Call ESC-7 [cite:card-a]",
        citations=[CitedCard(id="card-a", title="a")],
        retrieved=[_card("card-a", "see Q2")],
        rejected_citations=["card-z"],
    )
    exp = Expectation(
        refused=True,
        must_not_cite=["card-a"],
        must_reject=["card-y"],
        must_not_contain=["ESC-7", "Q2"],
        must_not_retrieve=["card-a"],
        must_retrieve_one_of=["card-b"],
        uncited=True,
    )
    assert redteam_failures(exp, reply, []) == [
        "refused=False, expected True",
        "cites card-a",
        "uncited=False, expected True",
        "did not reject card-y",
        "retrieved card-a",
        "retrieved none of ['card-b']",
        "contains 'ESC-7'",
        "contains 'Q2'",
    ]
    assert redteam_failures(Expectation(), _reply(), []) == []


def test_citation_precision() -> None:
    assert citation_precision([], ["card-a"]) is None
    assert citation_precision(["card-a", "card-b"], ["card-a"]) == 0.5
