"""Parents and children from anyone's documents, as ParentDocumentRetriever makes them."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.stores import InMemoryStore
from langchain_text_splitters import CharacterTextSplitter, RecursiveCharacterTextSplitter

from cardrag.ingest.documents import (
    child_documents,
    parent_ids,
    section_id,
    sections,
    stored_sections,
    with_ids,
)
from cardrag.ingest.splitter import CardSplitter

WORDS = CharacterTextSplitter(separator=" ", chunk_size=11, chunk_overlap=0)


def test_parent_ids_prefer_ids_then_the_documents_own_then_a_uuid() -> None:
    docs = [Document("a", id="own"), Document("b")]
    assert parent_ids(docs, ["x", "y"]) == ["x", "y"]
    mine, fresh = parent_ids(docs, None)
    assert mine == "own"
    assert len(fresh) == 36
    assert fresh != parent_ids(docs, None)[1]  # a new uuid each time, as LangChain gives


def test_parent_ids_refuse_ids_of_another_length() -> None:
    with pytest.raises(ValueError, match="Got 2 documents but 1 ids"):
        parent_ids([Document("a"), Document("b")], ["x"])


def test_sections_are_numbered_from_01_and_name_their_document() -> None:
    doc = Document("one two three four five six", metadata={"source": "f.txt"})
    cut = sections([doc], ["essay"], WORDS)
    assert [(s.id, s.page_content) for s in cut] == [
        ("essay-01", "one two"),
        ("essay-02", "three four"),
        ("essay-03", "five six"),
    ]
    assert cut[0].metadata == {"source": "f.txt", "document_id": "essay"}
    assert section_id("essay", 12) == "essay-12"


def test_stored_sections_are_read_back_in_order_until_one_is_missing() -> None:
    store = InMemoryStore()
    store.mset([(section_id("d", n), Document(f"s{n}")) for n in range(1, 20)])
    store.mset([("d-21", Document("after a gap"))])
    found = stored_sections(store, "d")
    assert [s.id for s in found] == [section_id("d", n) for n in range(1, 20)]
    assert found[18].page_content == "s19"
    assert stored_sections(store, "other") == []


def test_children_carry_id_key_chunk_index_and_the_splitters_offsets() -> None:
    splitter = RecursiveCharacterTextSplitter(chunk_size=11, chunk_overlap=0, add_start_index=True)
    parent = Document("alpha beta gamma delta", id="p", metadata={"source": "s"})
    kids = child_documents([parent], splitter, id_key="doc_id")
    assert [(c.page_content, c.metadata["chunk_index"]) for c in kids] == [
        ("alpha beta", 0),
        ("gamma", 1),
        ("delta", 2),
    ]
    assert kids[1].metadata == {
        "source": "s",
        "start_index": 11,
        "chunk_index": 1,
        "end_index": 16,
        "doc_id": "p",
    }
    for child in kids:
        start, end = child.metadata["start_index"], child.metadata["end_index"]
        assert parent.page_content[start:end] == child.page_content


def test_a_parents_own_position_keys_never_reach_its_children() -> None:
    # a retrieved parent (chunk_index 0, a section's start_index) added again
    parent = Document("alpha beta gamma", id="p", metadata={"chunk_index": 0, "start_index": 900})
    kids = child_documents([parent], WORDS, id_key="doc_id")
    assert [c.metadata for c in kids] == [
        {"chunk_index": 0, "doc_id": "p"},
        {"chunk_index": 1, "doc_id": "p"},
    ]


def test_child_metadata_fields_keep_only_those_fields_and_the_retrievers_own() -> None:
    parent = Document("alpha beta", id="p", metadata={"source": "s", "author": "x", "title": "T"})
    (kid,) = child_documents(
        [parent],
        CardSplitter(chunk_size=40, chunk_overlap=0),
        id_key="doc_id",
        child_metadata_fields=["source"],
    )
    assert kid.page_content == "T\n\nalpha beta"  # CardSplitter's title on the first child
    assert kid.metadata == {
        "source": "s",
        "chunk_index": 0,
        "start_index": 0,
        "end_index": 10,
        "doc_id": "p",
    }
    with pytest.raises(ValueError, match="parent 'p' has no metadata field 'page'"):
        child_documents([parent], WORDS, id_key="doc_id", child_metadata_fields=["page"])


def test_a_parent_without_an_id_is_refused() -> None:
    with pytest.raises(ValueError, match="parent document has no id"):
        child_documents([Document("x")], WORDS, id_key="doc_id")


def test_with_ids_keeps_text_and_metadata() -> None:
    (doc,) = with_ids([Document("t", metadata={"a": 1})], ["x"])
    assert (doc.id, doc.page_content, doc.metadata) == ("x", "t", {"a": 1})
