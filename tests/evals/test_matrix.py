from collections import Counter

import pytest

from cardrag.app.reply import CitedCard, Reply
from cardrag.evals.cases import QUESTION_TYPES, MatrixCase, load_matrix
from cardrag.evals.matrix import held_out_cards, matrix_checks, verdict
from cardrag.ingest.corpus import load_cards
from cardrag.ingest.settings import Settings


@pytest.fixture(scope="module")
def cases() -> list[MatrixCase]:
    return load_matrix()


def test_the_matrix_has_issue_48s_size_every_type_and_language(cases):
    assert len(cases) == 616
    by_type = Counter(c.type for c in cases)
    assert set(by_type) == set(QUESTION_TYPES)
    assert min(by_type.values()) == 26  # at least 20 per type (issue 48)
    assert Counter(c.language for c in cases) == {"en": 154, "pt": 153, "es": 155, "it": 154}
    assert Counter(c.label for c in cases) == {
        "answered": 332,
        "not_covered": 279,
        "other_card": 5,
    }
    assert len({c.query_id for c in cases}) == len({c.query for c in cases}) == 616


def test_every_answer_sentence_is_in_the_card_that_answers(cases):
    shipped = load_cards(Settings().cards_dir)
    bodies = {c.id: " ".join(c.body.split()) for c in shipped}
    patients = {c.id for c in shipped if c.sensitivity == "public"}
    assert {c.card for c in cases} == patients  # every card patients can read, no staff card
    for case in cases:
        for card in case.must_cite_one_of:
            assert case.answer_sentence in bodies[card], case.query_id
        if case.label == "answered":
            assert case.must_cite_one_of == [case.card]
        if case.label == "other_card":
            assert case.card not in case.must_cite_one_of


def test_the_split_holds_out_a_third_of_the_cards_and_every_question_about_them(cases):
    held = held_out_cards(c.card for c in cases)
    assert len(held) == 12  # round(35 / 3)
    assert held == held_out_cards(reversed([c.card for c in cases]))  # order does not matter
    assert "card-paracetamol-limits" in held
    assert "card-metformin-with-meals" not in held
    assert sum(c.card in held for c in cases) == 210


def test_a_label_without_its_sentence_is_refused_naming_the_file_and_case(tmp_path):
    path = tmp_path / "matrix.jsonl"
    path.write_text(
        '{"query_id": "m9", "card": "card-a", "type": "dose", "language": "en", '
        '"query": "How much?", "label": "answered", "must_cite_one_of": ["card-a"]}\n',
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match=r"matrix.jsonl: m9: label 'answered' needs"):
        load_matrix(path)


def _case(label: str, **extra) -> MatrixCase:
    answerable = label != "not_covered"
    return MatrixCase(
        query_id=extra.pop("query_id", "m1"),
        card="card-a",
        type=extra.pop("type", "dose"),
        language=extra.pop("language", "en"),
        query="How much?",
        label=label,
        must_cite_one_of=["card-a"] if answerable else [],
        answer_sentence="Take one gram" if answerable else None,
    )


def _reply(answer: str = "", cited: tuple[str, ...] = (), refused: bool = False) -> Reply:
    return Reply(
        question="How much?",
        answer=answer,
        refused=refused,
        citations=[CitedCard(id=c, title=c) for c in cited],
    )


def test_an_answer_is_right_only_with_a_right_card_and_the_sentence_that_answers():
    answerable = _case("answered")
    assert verdict(answerable, _reply("Take one\ngram a day. [cite:card-a]", ("card-a",))) == (
        "right"
    )
    assert verdict(answerable, _reply("It lowers sugar. [cite:card-a]", ("card-a",))) == (
        "wrong sentence"
    )
    assert verdict(answerable, _reply("Take one gram. [cite:card-b]", ("card-b",))) == (
        "wrong card"
    )
    assert verdict(answerable, _reply(refused=True)) == "refused"
    uncovered = _case("not_covered")
    assert verdict(uncovered, _reply(refused=True)) == "right"
    assert verdict(uncovered, _reply("Take one gram. [cite:card-a]", ("card-a",))) == "answered"


def test_the_checks_count_each_part_language_and_type():
    cases = [
        _case("answered", query_id="m1", language="pt"),
        _case("not_covered", query_id="m2", type="storage"),
        _case("not_covered", query_id="m3", type="storage"),
    ]
    replies = iter([_reply("Take one gram. [cite:card-a]", ("card-a",)), _reply(refused=True)])
    tables = matrix_checks(lambda _: next(replies, _reply("Take it.", ("card-a",))), cases)
    assert set(tables["held_out"]) == set()  # one card: round(1 / 3) = 0 held out
    assert tables["all"]["answerable pt"] == {"questions": 1, "right": 1, "rate": 1.0}
    assert tables["tuning"]["not_covered storage"] == {
        "questions": 2,
        "right": 1,
        "rate": 0.5,
        "answered": 1,
    }
