from __future__ import annotations

from pathlib import Path

from langchain_core.documents import Document

from cardrag.ingest.index import open_vectorstore
from cardrag.ingest.lexical import BM25Index, analyse
from tests.conftest import FakeEmbeddings

TEXTS = [
    "Keep insulin in the fridge between 2 and 8 degrees.",
    "Take levothyroxine on an empty stomach before breakfast.",
    "Insulin pens in use can stay at room temperature.",
]


def test_search_ranks_by_bm25_and_drops_stop_words() -> None:
    index = BM25Index.build(["a::00", "b::00", "a::01"], ["a", "b", "a"], TEXTS)
    hits = index.search("insulin in the fridge", 5)
    assert [(c, p) for c, p, _ in hits] == [("a::00", "a"), ("a::01", "a")]
    assert hits[0][2] > hits[1][2] > 0
    assert index.search("the and of", 5) == []  # only stop words
    assert index.search("levotiroxina", 5) == []  # no stemming, no cross-lingual magic


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    index = BM25Index.build(["a::00", "b::00", "a::01"], ["a", "b", "a"], TEXTS)
    index.save(tmp_path / "bm25")
    again = BM25Index.load(tmp_path / "bm25")
    assert again.search("empty stomach", 3) == index.search("empty stomach", 3)
    assert again.search("empty stomach", 3)[0][:2] == ("b::00", "b")


def test_empty_index_finds_nothing(tmp_path: Path) -> None:
    index = BM25Index.build([], [], [])
    index.save(tmp_path / "bm25")
    assert BM25Index.load(tmp_path / "bm25").search("insulin", 5) == []


def test_rebuilt_from_collections_without_card_rows(tmp_path: Path) -> None:
    store = open_vectorstore(tmp_path, FakeEmbeddings())
    docs = [
        Document(page_content=TEXTS[0], metadata={"parent_id": "a", "chunk_index": 0}),
        Document(page_content="insulin card row", metadata={"parent_id": "a", "chunk_index": -1}),
    ]
    store.add_documents(docs, ids=["a::00", "a::card"])
    index = BM25Index.from_collections([store])
    assert index.child_ids == ["a::00"]


def test_restricted_rows_are_skipped_unless_allowed() -> None:
    index = BM25Index.build(
        ["a", "s", "x"],
        ["a", "s", "x"],
        ["allergy season", "zyrtec zyrtec staff", "zyrtec tablets"],
        [False, True, False],
    )
    assert [c for c, _, _ in index.search("zyrtec allergy", 2)] == ["a", "x"]
    assert [c for c, _, _ in index.search("zyrtec allergy", 2, allow_restricted=True)] == ["a", "s"]


def test_english_without_stemming_tokenizes_exactly_as_bm25s() -> None:
    # the shipped default's analysis is unchanged by per-card languages
    import bm25s

    texts = [*TEXTS, "Don't take it with tea; it's 2x weaker. Über-dose? ünïcode."]
    expected = bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)
    assert [analyse(t, "en", stem=False) for t in texts] == expected


def test_each_card_is_analysed_in_its_own_language() -> None:
    texts = ["Tome o comprimido em jejum com água", "Take the tablet with water"]
    rows = [
        ("pt::00", texts[0], {"parent_id": "pt", "chunk_index": 0, "language": "pt"}),
        ("en::00", texts[1], {"parent_id": "en", "chunk_index": 0, "language": "en"}),
    ]
    plain = BM25Index.from_rows(rows)
    stemmed = BM25Index.from_rows(rows, stemmed=("pt", "en"))
    assert (plain.languages, stemmed.stemmed) == (("en", "pt"), ("pt", "en"))
    # "com" is a Portuguese stop word, not an English one: never matched in the pt card
    assert plain.search("com", 5) == []
    # inflections meet only with stemming: "tomando" / "tome", "comprimidos" / "comprimido"
    assert plain.search("tomando comprimidos", 5) == []
    assert [c for c, _, _ in stemmed.search("tomando comprimidos", 5)] == ["pt::00"]
    assert [c for c, _, _ in stemmed.search("taking tablets", 5)] == ["en::00"]


def test_a_row_without_a_language_is_detected_and_the_analysis_survives_a_reload(
    tmp_path: Path,
) -> None:
    rows = [
        ("it::00", "Conservare le compresse al riparo dalla luce", {"parent_id": "it"}),
        ("en::00", "Keep the tablets away from light", {"parent_id": "en"}),
    ]
    index = BM25Index.from_rows(rows, stemmed=("it",))
    index.save(tmp_path / "bm25")
    again = BM25Index.load(tmp_path / "bm25")
    assert (again.languages, again.stemmed) == (("en", "it"), ("it",))
    assert again.tokens("compressa") == ["compressa", "compress"]
    assert [c for c, _, _ in again.search("compressa", 5)] == ["it::00"]


def test_a_question_surely_in_another_language_gets_no_bm25_vote() -> None:
    english = BM25Index.build(["a::00"], ["a"], ["Keep insulin pens in the fridge."])
    both = BM25Index.build(
        ["a::00", "p::00"],
        ["a", "p"],
        ["Keep insulin pens in the fridge.", "Guardar as canetas novas no frigorífico."],
        row_languages=["en", "pt"],
    )
    question = "Como devo guardar as canetas de insulin que ainda não abri?"  # "insulin"
    assert (english.reads(question), english.search(question, 5)) == (False, [])
    assert both.reads(question)
    assert [c for c, _, _ in both.search(question, 5)] == ["p::00", "a::00"]
    # too short to be sure of its language: BM25 keeps its vote
    assert [c for c, _, _ in english.search("insulin?", 5)] == ["a::00"]
    # a card language detection cannot name: BM25 never silenced
    dutch = BM25Index.build(
        ["n::00"], ["n"], ["Bewaar insulin in de koelkast."], row_languages=["nl"]
    )
    assert [c for c, _, _ in dutch.search(question, 5)] == ["n::00"]
