"""A user's collection read whole in one query, and checked against the children's filters."""

from __future__ import annotations

import logging

import pytest
from langchain_chroma import Chroma
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from cardrag.ingest import metadata as md
from cardrag.retrievers.checked import checked_nearest


def test_rows_come_whole_unless_one_is_a_row_the_filters_drop(
    fake_embeddings: Embeddings, caplog: pytest.LogCaptureFixture
) -> None:
    store = Chroma(collection_name="checked-rows", embedding_function=fake_embeddings)
    rows = [
        Document("take iron tablets", metadata={md.PARENT_ID: "iron", md.CHUNK_INDEX: 0}),
        Document("tea blocks iron", metadata={md.PARENT_ID: "iron", md.CHUNK_INDEX: 1}),
        Document("iron tablets, a note", metadata={"source": "written around the retriever"}),
    ]
    store.add_documents(rows, ids=["iron::00", "iron::01", "stray-uuid"])
    vector = fake_embeddings.embed_query("iron tablets")
    with caplog.at_level(logging.WARNING):
        hits = checked_nearest(store, vector, 10, None, md.PARENT_ID, allow_restricted=False)
    assert hits is not None
    assert sorted((h.child_id, h.parent_id, h.text, h.complete) for h in hits) == [
        ("iron::00", "iron", "take iron tablets", True),
        ("iron::01", "iron", "tea blocks iron", True),
    ]
    assert "1 row(s) of checked-rows have no 'parent_id'" in caplog.text  # skipped, said
    secret = {md.PARENT_ID: "vault", md.CHUNK_INDEX: 0, md.SENSITIVITY: "restricted"}
    store.add_documents([Document("iron tablets vault", metadata=secret)], ids=["vault::00"])
    assert checked_nearest(store, vector, 10, None, md.PARENT_ID, allow_restricted=False) is None
    allowed = checked_nearest(store, vector, 10, None, md.PARENT_ID, allow_restricted=True)
    assert allowed is not None
    assert sorted(h.child_id for h in allowed) == ["iron::00", "iron::01", "vault::00"]
    card = {md.PARENT_ID: "iron", md.CHUNK_INDEX: md.CARD_ROW}
    store.add_documents([Document("iron tablets card", metadata=card)], ids=["iron::card"])
    assert checked_nearest(store, vector, 10, None, md.PARENT_ID, allow_restricted=True) is None
    only_tea = {md.PARENT_ID: {"$eq": "tea"}}  # a filter of the caller's: no row passes it
    assert checked_nearest(store, vector, 10, only_tea, md.PARENT_ID, allow_restricted=True) == []
