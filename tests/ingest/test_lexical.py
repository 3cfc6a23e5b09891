from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from langchain_classic.storage import LocalFileStore
from langchain_core.documents import Document
from langchain_core.stores import InMemoryByteStore

from cardrag.ingest.analysis import analyse
from cardrag.ingest.index import open_vectorstore
from cardrag.ingest.lexical import CHILD_IDS, BM25Index
from cardrag.retrievers.bm25 import question_tokens, search
from tests.conftest import FakeEmbeddings, bm25_corpus

TEXTS = [
    "Keep insulin in the fridge between 2 and 8 degrees.",
    "Take levothyroxine on an empty stomach before breakfast.",
    "Insulin pens in use can stay at room temperature.",
]


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    index = BM25Index.build(["a::00", "b::00", "a::01"], ["a", "b", "a"], TEXTS)
    index.save(tmp_path / "bm25")
    again = BM25Index.load(tmp_path / "bm25")
    assert search(again, "empty stomach", 3) == search(index, "empty stomach", 3)
    assert search(again, "empty stomach", 3)[0][:2] == ("b::00", "b")


def test_empty_index_finds_nothing(tmp_path: Path) -> None:
    index = BM25Index.build([], [], [])
    index.save(tmp_path / "bm25")
    assert search(BM25Index.load(tmp_path / "bm25"), "insulin", 5) == []


def test_rebuilt_from_collections_without_card_rows(tmp_path: Path) -> None:
    store = open_vectorstore(tmp_path, FakeEmbeddings())
    docs = [
        Document(page_content=TEXTS[0], metadata={"parent_id": "a", "chunk_index": 0}),
        Document(page_content="insulin card row", metadata={"parent_id": "a", "chunk_index": -1}),
    ]
    store.add_documents(docs, ids=["a::00", "a::card"])
    index = BM25Index.from_collections([store])
    assert index.child_ids == ["a::00"]


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
    assert search(plain, "com", 5) == []
    # inflections meet only with stemming: "tomando" / "tome", "comprimidos" / "comprimido"
    assert search(plain, "tomando comprimidos", 5) == []
    assert [c for c, _, _ in search(stemmed, "tomando comprimidos", 5)] == ["pt::00"]
    assert [c for c, _, _ in search(stemmed, "taking tablets", 5)] == ["en::00"]


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
    assert question_tokens(again, "compressa") == ["compressa", "compress"]
    assert [c for c, _, _ in search(again, "compressa", 5)] == ["it::00"]


def test_an_index_saved_before_impact_order_is_ordered_on_loading(tmp_path: Path) -> None:
    child_ids, parent_ids, texts = bm25_corpus(60)
    index = BM25Index.build(child_ids, parent_ids, texts)
    index.save(tmp_path / "bm25")
    rows = json.loads((tmp_path / "bm25" / CHILD_IDS).read_text(encoding="utf-8"))
    del rows["impact_ordered"]
    (tmp_path / "bm25" / CHILD_IDS).write_text(json.dumps(rows), encoding="utf-8")
    shuffled = dict(index.model.scores)
    order = np.random.default_rng(0).permutation(len(shuffled["data"]))
    # a permutation within each token's postings: sort the shuffled order by token
    token = np.repeat(np.arange(len(shuffled["indptr"]) - 1), np.diff(shuffled["indptr"]))
    order = order[np.argsort(token[order], kind="stable")]
    np.save(tmp_path / "bm25" / "data.csc.index.npy", shuffled["data"][order])
    np.save(tmp_path / "bm25" / "indices.csc.index.npy", shuffled["indices"][order])
    again = BM25Index.load(tmp_path / "bm25")
    assert np.array_equal(again.model.scores["indices"], index.model.scores["indices"])
    assert search(again, "insulin fridge", 10) == search(index, "insulin fridge", 10)


def test_an_index_round_trips_through_a_byte_store(tmp_path: Path) -> None:
    index = BM25Index.build(["a::00", "b::00", "a::01"], ["a", "b", "a"], TEXTS, stemmed=("en",))
    assert BM25Index.load_from(InMemoryByteStore()) is None
    for store in (InMemoryByteStore(), LocalFileStore(tmp_path / "files")):
        store.mset([("other", b"not bm25")])
        index.save_to(store)
        again = BM25Index.load_from(store)
        assert again is not None
        assert search(again, "insulin pens", 3) == search(index, "insulin pens", 3)
        assert (again.stemmed, again.child_ids) == (("en",), index.child_ids)


ROWS = [
    ("a::00", "Keep insulin in the fridge.", {"doc_id": "a"}),
    ("a::01", "Never freeze insulin pens.", {"doc_id": "a"}),
    ("b::00", "Tomar o comprimido com leite.", {"doc_id": "b", "language": "pt"}),
    ("c::00", "Iron tablets and tea do not mix.", {"doc_id": "c"}),
]


def test_an_updated_index_searches_as_one_built_from_its_rows() -> None:
    index = BM25Index.from_rows(ROWS[:3], id_key="doc_id", keep_texts=True, stemmed=("pt",))
    index = index.updated(
        ["a"], [ROWS[3], ("a::00", "Insulin may travel warm.", {"doc_id": "a"})], id_key="doc_id"
    )
    fresh = BM25Index.from_rows(
        [ROWS[2], ROWS[3], ("a::00", "Insulin may travel warm.", {"doc_id": "a"})],
        id_key="doc_id",
        stemmed=("pt",),
    )
    assert index.child_ids == ["b::00", "c::00", "a::00"]
    assert index.parent_ids == ["b", "c", "a"]
    for query in ("insulin fridge", "tea iron", "comprimidos", "travel"):
        assert search(index, query, 3) == search(fresh, query, 3)
    assert search(index, "freeze pens", 3) == []  # a::01 went with its parent


def test_only_an_index_that_kept_its_texts_can_be_updated(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="did not keep its texts"):
        BM25Index.from_rows(ROWS, id_key="doc_id").updated([], [])
    kept = BM25Index.from_rows(ROWS, id_key="doc_id", keep_texts=True)
    store = LocalFileStore(tmp_path)
    kept.save_to(store, "cardrag-bm25/")
    again = BM25Index.load_from(store, "cardrag-bm25/")
    assert again is not None
    assert (again.texts, again.row_languages) == (kept.texts, kept.row_languages)
    assert again.updated(["c"], []).child_ids == ["a::00", "a::01", "b::00"]
    empty = BM25Index.build([], [], [], keep_texts=True)
    empty.save_to(store, "cardrag-bm25/")  # an emptied index replaces the files it had
    reloaded = BM25Index.load_from(store, "cardrag-bm25/")
    assert reloaded is not None
    assert (reloaded.child_ids, reloaded.texts) == ([], [])
