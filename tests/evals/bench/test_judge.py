"""The answer judge's cost in ``make bench``: the sentences each question is scored against."""

from cardrag.evals.bench.judge import SENTENCES, judge_section, sentences_for
from cardrag.evals.judge.data import card_sentences
from cardrag.ingest.corpus import load_cards
from cardrag.ingest.settings import Settings


def test_a_question_reads_its_own_card_first_then_the_next_cards_up_to_20_sentences() -> None:
    cards = load_cards(Settings().cards_dir)
    first = cards[5]
    chosen = sentences_for([first.id], cards)
    own = card_sentences(first)
    assert len(chosen) == SENTENCES == 20
    assert chosen[: len(own)] == list(own)
    assert chosen[len(own)] == card_sentences(cards[6])[0]


def test_the_section_says_both_medians_and_nothing_when_not_measured() -> None:
    cost = {
        "threads": 2,
        "sentences": 20,
        "questions": 88,
        "warm": {"p50_ms": 16.2, "p95_ms": 20.8},
        "cold": {"p50_ms": 402.5, "p95_ms": 499.8},
    }
    assert judge_section({}) == []
    api = {"judge": cost, "golden": {"judge_added_p50_ms": 17.1}, "translated": {}}
    assert (
        judge_section(api)[-1]
        == "The answer judge adds 17.1 ms (golden) to the median `/ask` (grading on)."
    )
    assert judge_section(api)[1] == (
        "Answer judge (numpy, 2 BLAS threads): one question against 20 card sentences, 88 "
        "golden questions: p50 16.2 ms (p95 20.8) with the sentences' side kept, as the app "
        "keeps it; p50 402.5 ms (p95 499.8) with every sentence read afresh."
    )
