from __future__ import annotations

from pathlib import Path

from langchain_core.documents import Document

from cardrag.ingest.index import open_vectorstore
from cardrag.ingest.lexical import BM25Index
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
