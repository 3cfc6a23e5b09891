"""BM25 search over an index ingest wrote (:mod:`cardrag.retrievers.bm25`)."""

from __future__ import annotations

import pytest

from cardrag.ingest.lexical import BM25Index
from cardrag.retrievers import bm25
from cardrag.retrievers.bm25 import known_share, question_tokens, reads, search
from tests.conftest import bm25_corpus

TEXTS = [
    "Keep insulin in the fridge between 2 and 8 degrees.",
    "Take levothyroxine on an empty stomach before breakfast.",
    "Insulin pens in use can stay at room temperature.",
]


def test_search_ranks_by_bm25_and_drops_stop_words() -> None:
    index = BM25Index.build(["a::00", "b::00", "a::01"], ["a", "b", "a"], TEXTS)
    hits = search(index, "insulin in the fridge", 5)
    assert [(c, p) for c, p, _ in hits] == [("a::00", "a"), ("a::01", "a")]
    assert hits[0][2] > hits[1][2] > 0
    assert search(index, "the and of", 5) == []  # only stop words
    assert search(index, "levotiroxina", 5) == []  # no stemming, no cross-lingual magic


def test_restricted_rows_are_skipped_unless_allowed() -> None:
    index = BM25Index.build(
        ["a", "s", "x"],
        ["a", "s", "x"],
        ["allergy season", "zyrtec zyrtec staff", "zyrtec tablets"],
        [False, True, False],
    )
    assert [c for c, _, _ in search(index, "zyrtec allergy", 2)] == ["a", "x"]
    assert [c for c, _, _ in search(index, "zyrtec allergy", 2, allow_restricted=True)] == [
        "a",
        "s",
    ]


def test_the_known_share_counts_the_question_words_the_rows_hold() -> None:
    index = BM25Index.build(["a::00", "b::00", "a::01"], ["a", "b", "a"], TEXTS)
    assert known_share(index, "insulin fridge") == 1.0
    # "my", "water" and "tablet" are in no row; "and" and "the" are stop words, not counted
    assert known_share(index, "my water tablet and the fridge") == 0.25
    assert known_share(index, "fridge fridge water") == 0.5  # each word counted once
    assert known_share(index, "the and of") == 0.0  # no token
    assert known_share(BM25Index([], [], None), "insulin") == 0.0  # nothing indexed


def test_the_known_share_is_the_best_language_s() -> None:
    both = BM25Index.build(
        ["a::00", "p::00"],
        ["a", "p"],
        ["Keep insulin pens in the fridge.", "Guardar as canetas novas no frigorífico."],
        row_languages=["en", "pt"],
        stemmed=["pt"],
    )
    # the Portuguese row was stemmed: read as English the question knows none of its words
    # ("canetas" is indexed as "canet"), read as Portuguese all three
    assert known_share(both, "guardar canetas frigorífico") == 1.0
    english = BM25Index.build(["a::00"], ["a"], ["Guardar as canetas no frigorífico."])
    assert known_share(english, "guardar canetas frigorífico") == 1.0  # unstemmed, as written
    assert known_share(english, "guarda canetas frigorífico") == pytest.approx(2 / 3)


def test_a_question_surely_in_another_language_gets_no_bm25_vote() -> None:
    english = BM25Index.build(["a::00"], ["a"], ["Keep insulin pens in the fridge."])
    both = BM25Index.build(
        ["a::00", "p::00"],
        ["a", "p"],
        ["Keep insulin pens in the fridge.", "Guardar as canetas novas no frigorífico."],
        row_languages=["en", "pt"],
    )
    question = "Como devo guardar as canetas de insulin que ainda não abri?"  # "insulin"
    assert (reads(english, question), search(english, question, 5)) == (False, [])
    assert reads(both, question)
    assert [c for c, _, _ in search(both, question, 5)] == ["p::00", "a::00"]
    # too short to be sure of its language: BM25 keeps its vote
    assert [c for c, _, _ in search(english, "insulin?", 5)] == ["a::00"]
    # a card language detection cannot name: BM25 never silenced
    dutch = BM25Index.build(
        ["n::00"], ["n"], ["Bewaar insulin in de koelkast."], row_languages=["nl"]
    )
    assert [c for c, _, _ in search(dutch, question, 5)] == ["n::00"]


def test_a_search_reads_every_posting_it_needs_and_ranks_as_bm25s_does() -> None:
    child_ids, parent_ids, texts = bm25_corpus(300)
    index = BM25Index.build(child_ids, parent_ids, texts)
    question = "insulin in the fridge with milk"
    got = search(index, question, 20)
    tokens = [t for t in question_tokens(index, question) if t in index.model.vocab_dict]
    rows, scores = index.model.retrieve([tokens], k=300, show_progress=False, n_threads=1)
    want = sorted(
        ((float(s), int(r)) for r, s in zip(rows[0], scores[0], strict=True) if s > 0),
        key=lambda sr: (-sr[0], sr[1]),  # bm25s leaves ties in any order; ours: lower row
    )[:20]
    assert [c for c, _, _ in got] == [child_ids[r] for _, r in want]
    assert [s for _, _, s in got] == pytest.approx([s for s, _ in want], rel=1e-6)


def test_a_search_reads_at_most_the_deepest_postings_of_each_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    child_ids, parent_ids, texts = bm25_corpus(300)
    index = BM25Index.build(child_ids, parent_ids, texts)
    scores = index.model.scores
    fridge = index.model.vocab_dict["fridge"]
    postings = int(scores["indptr"][fridge + 1] - scores["indptr"][fridge])
    contributions = scores["data"][scores["indptr"][fridge] : scores["indptr"][fridge + 1]]
    assert postings > 20
    assert list(contributions) == sorted(contributions, reverse=True)  # impact order
    monkeypatch.setattr(bm25, "POSTINGS_PER_TOKEN", 5)
    hits = search(index, "fridge", 100)
    assert len(hits) == 5  # one token: its five highest contributions, nothing else read
    assert [s for _, _, s in hits] == pytest.approx(list(contributions[:5]), rel=1e-6)
