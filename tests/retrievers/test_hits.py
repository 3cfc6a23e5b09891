from __future__ import annotations

from pathlib import Path

import pytest
from langchain_chroma import Chroma
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from cardrag.ingest import metadata as md
from cardrag.ingest.index.collections import Collections, chroma_client, open_collections
from cardrag.retrievers.hits import (
    RowReader,
)


def _row(card: str, index: int, text: str, sensitivity: str = "public") -> Document:
    meta = {md.PARENT_ID: card, md.CHUNK_INDEX: index, md.SENSITIVITY: sensitivity}
    row_id = f"{card}::card" if index == md.CARD_ROW else f"{card}::{index:02d}"
    return Document(id=row_id, page_content=text, metadata=meta)


@pytest.fixture
def reader_rows(tmp_path: Path, fake_embeddings: Embeddings) -> RowReader:
    collections = open_collections(chroma_client(tmp_path), fake_embeddings)
    rows = [
        _row("iron", 0, "take iron tablets with orange juice"),
        _row("iron", 1, "tea blocks iron absorption"),
        _row("iron", md.CARD_ROW, "iron tablets whole card"),
        _row("tea", 0, "green tea and sleep"),
        _row("secret", 0, "iron tablets secret protocol", sensitivity="restricted"),
    ]
    for row in rows:
        collections.route(row.metadata).add_documents([row], ids=[row.id])
    return RowReader(collections)


def test_the_reader_searches_one_kind_of_row_and_never_restricted_ones(
    reader_rows: RowReader, fake_embeddings: Embeddings
) -> None:
    vector = fake_embeddings.embed_query("iron tablets")
    children = reader_rows.nearest(vector, 10, None, kind="child")
    cards = reader_rows.nearest(vector, 10, None, kind="card")
    allowed = RowReader(reader_rows.collections, allow_restricted=True)
    assert [h.child_id for h in children] == ["iron::00", "iron::01", "tea::00"]
    assert [h.child_id for h in cards] == ["iron::card"]
    assert [h.child_id for h in allowed.nearest(vector, 1, None, kind="child")] == ["secret::00"]
    assert children[0].score > children[1].score


def test_rows_read_by_id_score_as_the_vector_search_does(
    reader_rows: RowReader, fake_embeddings: Embeddings
) -> None:
    vector = fake_embeddings.embed_query("tea and iron")
    searched = reader_rows.nearest(vector, 10, None, kind="child")
    wanted = ["tea::00", "iron::01", "secret::00", "gone::00"]  # restricted, and no such row
    read = reader_rows.by_ids(vector, wanted, None, kind="child")
    assert [h.child_id for h in read] == [h.child_id for h in searched if h.child_id in wanted]
    for got in read:
        want = next(h for h in searched if h.child_id == got.child_id)
        assert got.score == pytest.approx(want.score, abs=1e-6)  # Chroma: float32; here float64
        assert (got.text, got.complete) == ("", False)  # the score alone, until completed
        assert got.metadata == {md.PARENT_ID: got.parent_id, md.CHUNK_INDEX: int(got.child_id[-2:])}
    full = {d.id: d for d in reader_rows.collections.children.get_by_ids(["tea::00", "iron::01"])}
    for hit in reader_rows.complete(read):
        assert (hit.text, hit.metadata, hit.complete) == (
            full[hit.child_id].page_content,
            full[hit.child_id].metadata,
            True,
        )
    only_first = {md.CHUNK_INDEX: 0}
    assert [h.child_id for h in reader_rows.by_ids(vector, wanted, only_first, kind="child")] == [
        "tea::00"
    ]
    assert [h.child_id for h in reader_rows.by_ids(vector, ["iron::card"], None, kind="card")] == [
        "iron::card"
    ]
    assert reader_rows.by_ids(vector, ["iron::card"], None, kind="child") == []
    assert reader_rows.by_ids(vector, [], None, kind="child") == []


def test_rows_with_ids_of_their_own_are_read_by_their_metadata(
    tmp_path: Path, fake_embeddings: Embeddings
) -> None:
    # a collection written by other means than cardrag's ingest (LangChain's uuid ids)
    collections = open_collections(chroma_client(tmp_path), fake_embeddings)
    meta = {md.PARENT_ID: "iron", md.CHUNK_INDEX: 0, md.SENSITIVITY: "public"}
    collections.children.add_texts(["take iron tablets"], [meta], ids=["3f2a9c1e"])
    reader = RowReader(collections)
    vector = fake_embeddings.embed_query("iron tablets")
    [hit] = reader.nearest(vector, 4, None, kind="child")
    assert (hit.child_id, hit.parent_id, hit.metadata, hit.complete) == (
        "3f2a9c1e",
        "iron",
        meta,
        False,
    )
    [done] = reader.complete([hit])
    assert (done.text, done.metadata, done.complete) == ("take iron tablets", meta, True)


def test_a_users_collection_is_read_whole_and_checked_against_the_filters(
    reader_rows: RowReader, fake_embeddings: Embeddings
) -> None:
    assert reader_rows.for_question() is reader_rows  # a collection per kind: nothing to drop
    one = Chroma(collection_name="made-by-hand", embedding_function=fake_embeddings)
    rows = [
        _row("iron", 0, "take iron tablets with orange juice"),
        _row("iron", 1, "tea blocks iron absorption"),
        _row("iron", md.CARD_ROW, "iron tablets whole card"),
        _row("tea", 0, "green tea and sleep"),
    ]
    one.add_documents(rows, ids=[r.id for r in rows])
    shared = RowReader(Collections(children=one)).for_question()
    assert (shared.checked, shared.only_children) == (True, False)
    vector = fake_embeddings.embed_query("iron tablets")
    children = ["iron::00", "iron::01", "tea::00"]

    def read(reader: RowReader) -> list[tuple[str, bool]]:
        return [(h.child_id, h.complete) for h in reader.nearest(vector, 10, None, kind="child")]

    # the card row is read: the filtered plan reads again (lean rows, text read if shown)
    assert read(shared) == [(c, False) for c in children]
    one.delete(ids=["iron::card"])
    whole = shared.nearest(vector, 10, None, kind="child")  # one query, the rows whole
    assert [(h.child_id, h.complete, h.parent_id) for h in whole] == [
        ("iron::00", True, "iron"),
        ("iron::01", True, "iron"),
        ("tea::00", True, "tea"),
    ]
    assert sorted(h.text for h in whole)[0] == "green tea and sleep"
    secret = _row("vault", 0, "iron tablets vault protocol", sensitivity="restricted")
    one.add_documents([secret], ids=[secret.id])
    assert read(shared) == [(c, False) for c in children]  # the new row is seen, kept out
    allowed = RowReader(Collections(children=one), allow_restricted=True).for_question()
    assert sorted(read(allowed)) == [(c, True) for c in sorted([*children, "vault::00"])]
    assert shared.nearest(vector, 10, {md.PARENT_ID: "tea"}, kind="child")[0].child_id == "tea::00"


def test_a_shared_collection_beside_others_is_looked_up_for_every_question(
    fake_embeddings: Embeddings,
) -> None:
    one = Chroma(collection_name="shared-children", embedding_function=fake_embeddings)
    sentences = Chroma(collection_name="shared-sentences", embedding_function=fake_embeddings)
    one.add_documents([_row("iron", 0, "take iron tablets")], ids=["iron::00"])
    shared = RowReader(Collections(children=one, sentences=sentences))
    assert (shared.for_question().only_children, shared.for_question().checked) == (True, False)
    card = _row("iron", md.CARD_ROW, "iron tablets whole card")
    one.add_documents([card], ids=[str(card.id)])
    assert not shared.for_question().only_children  # looked up again: the card row is seen
