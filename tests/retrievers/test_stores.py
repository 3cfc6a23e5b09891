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


PARENTS = [
    "Warfarin slows blood clotting.",
    "Take iron tablets on an empty stomach.",
    "Store insulin pens in the fridge.",
]


def _unnormalised_store(kind: str, embeddings: object) -> object:
    import uuid

    import faiss
    from langchain_chroma import Chroma
    from langchain_community.docstore.in_memory import InMemoryDocstore
    from langchain_community.vectorstores import FAISS
    from langchain_community.vectorstores.utils import DistanceStrategy

    if kind.startswith("chroma"):
        space = kind.split("-")[1]
        return Chroma(
            collection_name=f"scores_{uuid.uuid4().hex[:8]}",
            embedding_function=embeddings,  # type: ignore[arg-type]
            collection_metadata={"hnsw:space": space},
        )
    if kind == "memory":
        return InMemoryVectorStore(embeddings)  # type: ignore[arg-type]
    inner = kind == "faiss-ip"
    return FAISS(
        embedding_function=embeddings,  # type: ignore[arg-type]
        index=(faiss.IndexFlatIP if inner else faiss.IndexFlatL2)(32),
        docstore=InMemoryDocstore(),
        index_to_docstore_id={},
        distance_strategy=(
            DistanceStrategy.MAX_INNER_PRODUCT if inner else DistanceStrategy.EUCLIDEAN_DISTANCE
        ),
    )


@pytest.mark.parametrize(
    "kind", ["chroma-l2", "chroma-cosine", "chroma-ip", "memory", "faiss-l2", "faiss-ip"]
)
def test_unnormalised_embeddings_score_the_same_cosine_on_every_store(kind: str) -> None:
    import numpy as np
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.stores import InMemoryStore
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from cardrag import ScoredParentDocumentRetriever

    embeddings = DeterministicFakeEmbedding(size=32)  # normal draws: length about 5.7
    question = "Can I keep my insulin in the fridge?"
    q = np.asarray(embeddings.embed_query(question))
    assert abs(np.linalg.norm(q) - 1.0) > 1.0
    retriever = ScoredParentDocumentRetriever(
        vectorstore=_unnormalised_store(kind, embeddings),
        docstore=InMemoryStore(),
        child_splitter=RecursiveCharacterTextSplitter(chunk_size=400),
        search_kwargs={"k": 3},
    )
    retriever.add_documents([Document(p) for p in PARENTS])
    found = retriever.invoke(question)
    assert sorted(d.page_content for d in found) == sorted(PARENTS)
    for doc in found:
        row = np.asarray(embeddings.embed_query(doc.page_content))
        cosine = float(q @ row / (np.linalg.norm(q) * np.linalg.norm(row)))
        assert -1.0 <= doc.metadata["score"] <= 1.0
        assert math.isclose(doc.metadata["score"], cosine, abs_tol=1e-6), (kind, doc.page_content)
