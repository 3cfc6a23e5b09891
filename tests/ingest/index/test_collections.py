from __future__ import annotations

from langchain_chroma import Chroma

from cardrag.ingest import metadata as md
from cardrag.ingest.index.collections import Collections
from cardrag.ingest.index.layout import CHILD_ROWS, NOT_RESTRICTED, merge_filters
from tests.conftest import FakeEmbeddings


def test_merge_filters() -> None:
    assert merge_filters(None, {}) is None
    assert merge_filters({"a": 1}) == {"a": 1}
    assert merge_filters({"a": 1}, {"b": {"$ne": 2}}) == {"$and": [{"a": 1}, {"b": {"$ne": 2}}]}
    assert merge_filters({"a": 1, "b": 2}) == {"$and": [{"a": 1}, {"b": 2}]}
    assert merge_filters({"$or": [{"a": 1}, {"b": 2}]}, None) == {"$or": [{"a": 1}, {"b": 2}]}


def _shared(name: str, rows: list[dict[str, object]]) -> Collections:
    store = Chroma(collection_name=name, embedding_function=FakeEmbeddings())
    ids = [f"p::{n:02d}" for n in range(len(rows))]
    store.add_texts([f"text {n}" for n in range(len(rows))], metadatas=rows, ids=ids)
    return Collections(children=store)


def test_a_users_collection_of_children_is_read_without_filters() -> None:
    users = _shared("only-children", [{"parent_id": "p", "chunk_index": 0}, {"parent_id": "p"}])
    assert users.only_children()
    assert users.plan(kind="child", where=None, allow_restricted=False, only_children=True) == [
        (users.children, None)
    ]
    assert users.plan(kind="card", where=None, allow_restricted=False, only_children=True) == []
    where = {"topic": "x"}
    assert users.plan(kind="child", where=where, allow_restricted=False, only_children=True) == [
        (users.children, where)
    ]  # the caller's filter stays
    assert users.plan(kind="child", where=None, allow_restricted=False) == [
        (users.children, {"$and": [CHILD_ROWS, NOT_RESTRICTED]})
    ]  # not looked up: the filters as before


def test_a_restricted_row_or_a_card_row_keeps_the_filters() -> None:
    restricted = _shared("with-restricted", [{"parent_id": "p", "sensitivity": "restricted"}])
    card_row = _shared("with-card-row", [{"parent_id": "p", "chunk_index": md.CARD_ROW}])
    assert not restricted.only_children()
    assert not card_row.only_children()


def test_a_sentences_collection_keeps_its_restricted_filter() -> None:
    users = _shared("children-and-sentences", [{"parent_id": "p", "chunk_index": 0}])
    sentences = Chroma(collection_name="their-sentences", embedding_function=FakeEmbeddings())
    both = Collections(children=users.children, sentences=sentences)
    assert both.only_children()  # of the children collection only
    plan = both.plan(kind="sentence", where=None, allow_restricted=False, only_children=True)
    assert plan == [(sentences, NOT_RESTRICTED)]
