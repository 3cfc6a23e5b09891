"""Reading any LangChain vector store: scores as similarities, filters in the store's form."""

from __future__ import annotations

import math

import pytest
from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore

from cardrag.retrievers.stores import StoreReader, combine_filters, scored_search
from tests.conftest import FakeEmbeddings
from tests.retrievers.test_parent_dropin import faiss_store

TEXTS = {"a::00": "alpha beta", "a::01": "gamma delta", "b::00": "alpha gamma"}


def filled(kind: str) -> tuple[object, FakeEmbeddings]:
    embeddings = FakeEmbeddings(size=64)
    store = InMemoryVectorStore(embeddings) if kind == "memory" else faiss_store(embeddings)
    store.add_documents(
        [Document(t, metadata={"doc_id": i.split("::")[0]}) for i, t in TEXTS.items()],
        ids=list(TEXTS),
    )
    return store, embeddings


@pytest.mark.parametrize("kind", ["memory", "faiss"])
def test_scores_are_the_cosine_similarity_on_every_store(kind: str) -> None:
    store, embeddings = filled(kind)
    vector = embeddings.embed_query("alpha beta")
    pairs = scored_search(store, "alpha beta", vector, 3, None)  # type: ignore[arg-type]
    assert pairs[0][0].id == "a::00"
    expected = {
        i: sum(x * y for x, y in zip(vector, embeddings.embed_query(t), strict=True))
        for i, t in TEXTS.items()
    }
    for doc, score in pairs:
        assert math.isclose(score, expected[str(doc.id)], abs_tol=1e-5)


@pytest.mark.parametrize("kind", ["memory", "faiss"])
def test_rows_read_by_id_score_as_the_search_does(kind: str) -> None:
    store, embeddings = filled(kind)
    reader = StoreReader(store, embeddings, "doc_id", "alpha beta")  # type: ignore[arg-type]
    vector = embeddings.embed_query("alpha beta")
    searched = {h.child_id: h.score for h in reader.nearest(vector, 3, None, kind="child")}
    read = reader.by_ids(vector, ["b::00", "a::01", "missing"], None, kind="child")
    assert [h.child_id for h in read] == ["b::00", "a::01"]
    for hit in read:
        assert math.isclose(hit.score, searched[hit.child_id], abs_tol=1e-5)
    assert reader.nearest(vector, 3, None, kind="card") == []
    assert reader.by_ids(vector, ["b::00"], {"doc_id": "b"}, kind="child") == []


def test_rows_without_id_key_are_skipped_as_langchain_skips_them() -> None:
    store, embeddings = filled("memory")
    store.add_documents([Document("alpha beta", metadata={})], ids=["orphan"])  # type: ignore[attr-defined]
    reader = StoreReader(store, embeddings, "doc_id", "q")  # type: ignore[arg-type]
    hits = reader.nearest(embeddings.embed_query("alpha beta"), 4, None, kind="child")
    assert "orphan" not in [h.child_id for h in hits]
    assert len(hits) == 3


def test_combine_filters_ands_callables_and_merges_dicts() -> None:
    assert combine_filters(None, None) is None
    assert combine_filters({"a": 1}, {"a": 1, "b": 2}) == {"a": 1, "b": 2}
    with pytest.raises(ValueError, match="filters disagree on 'a': 1 and 2"):
        combine_filters({"a": 1}, {"a": 2})
    with pytest.raises(ValueError, match="cannot combine a callable filter with a dict"):
        combine_filters({"a": 1}, lambda d: True)
