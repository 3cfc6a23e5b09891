"""The drop-in contract: LangChain's parent-document how-to with only the class swapped.

The how-to (LangChain's "How to use the Parent Document Retriever") loads text files with
``TextLoader``, splits children with ``RecursiveCharacterTextSplitter(chunk_size=400)``,
and retrieves whole documents, or 2,000-character sections with a ``parent_splitter``. Here it
runs over four plain-prose documents written for these tests (``tests/data/howto``: not
cards, no ids, no special metadata), on Chroma, ``InMemoryVectorStore`` and FAISS, with the
real model, and 27 questions each name the phrase that answers it.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain_chroma import Chroma
from langchain_classic.retrievers import ParentDocumentRetriever
from langchain_community.document_loaders import TextLoader
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import InMemoryStore
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore
from langchain_text_splitters import CharacterTextSplitter, RecursiveCharacterTextSplitter

from cardrag import ScoredParentDocumentRetriever
from cardrag.ingest.index.rows import probe_child_ids
from tests.conftest import FakeEmbeddings

HOWTO = Path(__file__).parent.parent / "data" / "howto"
QUESTIONS = [json.loads(line) for line in (HOWTO / "questions.jsonl").open(encoding="utf-8")]
STORES = ("chroma", "memory", "faiss")


def faiss_store(embeddings: Embeddings) -> VectorStore:
    """An empty FAISS store, as LangChain's FAISS docs make one."""
    import faiss
    from langchain_community.docstore.in_memory import InMemoryDocstore
    from langchain_community.vectorstores import FAISS

    size = len(embeddings.embed_query("size"))
    return FAISS(
        embedding_function=embeddings,
        index=faiss.IndexFlatL2(size),
        docstore=InMemoryDocstore(),
        index_to_docstore_id={},
    )


def new_store(kind: str, embeddings: Embeddings) -> VectorStore:
    """An empty vector store of one kind (Chroma in memory, as in the how-to)."""
    if kind == "chroma":
        name = f"full_documents_{uuid.uuid4().hex[:8]}"
        return Chroma(collection_name=name, embedding_function=embeddings)
    if kind == "memory":
        return InMemoryVectorStore(embeddings)
    return faiss_store(embeddings)


def load_docs() -> list[Document]:
    """The how-to's loading step: one ``TextLoader`` per file."""
    docs: list[Document] = []
    for path in sorted(HOWTO.glob("*.txt")):
        docs.extend(TextLoader(str(path), encoding="utf-8").load())
    return docs


@pytest.fixture(scope="module")
def docs() -> list[Document]:
    return load_docs()


def howto(
    cls: type[ParentDocumentRetriever], store: VectorStore, *, sections: bool
) -> ParentDocumentRetriever:
    """The how-to's retriever, either variant, with ``cls`` as the only change."""
    child_splitter = RecursiveCharacterTextSplitter(chunk_size=400)
    fields: dict[str, Any] = {"vectorstore": store, "docstore": InMemoryStore()}
    if sections:
        fields["parent_splitter"] = RecursiveCharacterTextSplitter(chunk_size=2000)
    return cls(child_splitter=child_splitter, **fields)


@pytest.mark.parametrize("sections", [False, True], ids=["whole", "sections"])
@pytest.mark.parametrize("kind", STORES)
def test_the_howto_runs_with_only_the_class_swapped(
    kind: str, sections: bool, docs: list[Document], real_embeddings: Embeddings
) -> None:
    store = new_store(kind, real_embeddings)
    retriever = howto(ScoredParentDocumentRetriever, store, sections=sections)
    retriever.add_documents(docs, ids=None)
    keys = list(retriever.docstore.yield_keys())
    assert len(keys) == (11 if sections else 4)  # 4 documents, or their 2,000-char sections
    sub_docs = store.similarity_search("justice breyer")  # children searchable directly
    assert len(sub_docs) == 4
    assert all(len(d.page_content) <= 400 for d in sub_docs)
    assert all(d.metadata["doc_id"] in keys for d in sub_docs)
    first: list[str] = []
    for case in QUESTIONS:
        found = retriever.invoke(case["question"])
        assert len(found) == 4 == len({d.id for d in found})  # k distinct parents
        scores = [d.metadata["score"] for d in found]
        assert all(-1.0 <= s <= 1.0 for s in scores)
        assert all(d.page_content == retriever.docstore.mget([d.id])[0].page_content for d in found)
        if case["answer"] not in found[0].page_content:
            first.append(case["question"])
    assert first == []  # the parent that holds the answer comes first, every question


@pytest.mark.parametrize("kind", STORES)
def test_plain_pdr_counts_children_where_ours_counts_parents(
    kind: str, docs: list[Document], real_embeddings: Embeddings
) -> None:
    plain = howto(ParentDocumentRetriever, new_store(kind, real_embeddings), sections=False)
    ours = howto(ScoredParentDocumentRetriever, new_store(kind, real_embeddings), sections=False)
    plain.add_documents(docs)
    ours.add_documents(docs)
    question = "How do I repair a puncture and what causes snake bites?"
    theirs = plain.invoke(question)  # 4 children, most from the bicycle text: fewer parents
    assert len(theirs) < 4
    assert "score" not in theirs[0].metadata
    mine = ours.invoke(question)
    assert len(mine) == 4
    assert mine[0].metadata["source"].endswith("bicycle.txt")
    assert mine[0].page_content == theirs[0].page_content  # the same parent first
    assert mine[0].metadata["matched_child_text"] in mine[0].page_content


def fake_retriever(kind: str, **fields: Any) -> ScoredParentDocumentRetriever:
    """A retriever over an empty store with the fake embedding (pure write-path tests)."""
    embeddings = FakeEmbeddings(size=256)
    fields.setdefault(
        "child_splitter", CharacterTextSplitter(separator=" ", chunk_size=12, chunk_overlap=0)
    )
    return ScoredParentDocumentRetriever(
        vectorstore=new_store(kind, embeddings), docstore=InMemoryStore(), **fields
    )


def child_ids(retriever: ScoredParentDocumentRetriever, *parents: str) -> list[str]:
    """The child rows the store holds for these parents (probed by id: works on any store)."""
    return sorted(probe_child_ids(retriever.vectorstore, parents))


@pytest.mark.parametrize("kind", STORES)
def test_readding_an_id_replaces_its_children_and_delete_removes_them(kind: str) -> None:
    retriever = fake_retriever(kind, k=2)
    retriever.add_documents(
        [Document("alpha beta gamma delta epsilon zeta", id="a"), Document("eta theta", id="b")]
    )
    assert child_ids(retriever, "a", "b") == ["a::00", "a::01", "a::02", "b::00"]
    retriever.add_documents([Document("alpha beta")], ids=["a"])  # shorter: one child
    assert child_ids(retriever, "a", "b") == ["a::00", "b::00"]
    assert [d.id for d in retriever.invoke("gamma delta epsilon")] != []
    assert retriever.docstore.mget(["a"])[0].page_content == "alpha beta"
    response = retriever.delete(["a", "missing"])
    assert response == {"num_deleted": 1, "succeeded": ["a"], "num_failed": 0, "failed": []}
    assert child_ids(retriever, "a", "b") == ["b::00"]
    assert [d.id for d in retriever.invoke("alpha beta")] == ["b"]


@pytest.mark.parametrize("kind", STORES)
def test_a_document_id_names_all_its_sections(kind: str) -> None:
    sections = CharacterTextSplitter(separator=" ", chunk_size=24, chunk_overlap=0)
    retriever = fake_retriever(kind, parent_splitter=sections, k=5)
    retriever.add_documents(
        [Document("one two three four five six seven eight nine ten")], ids=["doc"]
    )
    assert sorted(retriever.docstore.yield_keys()) == ["doc-01", "doc-02"]
    assert [(d.id, d.metadata["document_id"]) for d in retriever.get(["doc"])] == [
        ("doc-01", "doc"),
        ("doc-02", "doc"),
    ]
    assert child_ids(retriever, "doc-01", "doc-02") == [
        "doc-01::00",
        "doc-01::01",
        "doc-01::02",
        "doc-02::00",
        "doc-02::01",
        "doc-02::02",
    ]
    retriever.add_documents([Document("one two three")], ids=["doc"])  # shrank: one section
    assert sorted(retriever.docstore.yield_keys()) == ["doc-01"]
    assert child_ids(retriever, "doc-01", "doc-02") == ["doc-01::00", "doc-01::01"]
    assert [d.id for d in retriever.invoke("nine ten")] == ["doc-01"]  # the only parent left
    assert retriever.delete(["doc"])["succeeded"] == ["doc"]
    assert list(retriever.docstore.yield_keys()) == []
    assert child_ids(retriever, "doc-01") == []
    assert retriever.invoke("one two") == []


@pytest.mark.parametrize("kind", STORES)
def test_id_key_and_child_metadata_fields_are_honoured(kind: str) -> None:
    retriever = fake_retriever(kind, id_key="parent", child_metadata_fields=["source"], k=1)
    retriever.add_documents(
        [Document("alpha beta gamma", metadata={"source": "a.txt", "author": "x"})], ids=["a"]
    )
    (child,) = retriever.vectorstore.similarity_search("alpha beta", k=1)
    assert {k: child.metadata[k] for k in ("source", "parent", "chunk_index")} == {
        "source": "a.txt",
        "parent": "a",
        "chunk_index": 0,
    }
    assert "author" not in child.metadata
    (doc,) = retriever.invoke("alpha beta")
    assert (doc.id, doc.metadata["author"], doc.metadata["matched_child_id"]) == ("a", "x", "a::00")


def test_search_kwargs_and_search_type_map_onto_fields() -> None:
    retriever = fake_retriever(
        "memory",
        search_type="similarity_score_threshold",
        search_kwargs={"k": 1, "score_threshold": 0.99},
    )
    retriever.add_documents([Document("alpha beta", id="a"), Document("alpha gamma", id="b")])
    assert [d.id for d in retriever.invoke("alpha beta")] == ["a"]  # k=1, and b is below 0.99
    assert retriever.invoke("delta") == []  # nothing reaches the threshold
    assert len(retriever.invoke("alpha", min_similarity=None, k=2)) == 2


def test_search_kwargs_filter_applies_in_the_stores_form() -> None:
    chroma = fake_retriever("chroma", search_kwargs={"filter": {"lang": "en"}}, k=3)
    memory = fake_retriever(
        "memory", search_kwargs={"filter": lambda d: d.metadata.get("lang") == "en"}, k=3
    )
    for retriever in (chroma, memory):
        retriever.add_documents(
            [
                Document("alpha beta", id="a", metadata={"lang": "en"}),
                Document("alpha beta", id="b", metadata={"lang": "pt"}),
            ]
        )
        assert [d.id for d in retriever.invoke("alpha beta")] == ["a"]


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"search_type": "mmr"}, "search_type='mmr' is not supported"),
        ({"search_kwargs": {"fetch_k": 20}}, "search_kwargs ['fetch_k'] not supported"),
        ({"search_kwargs": {"k": 2}, "k": 3}, "search_kwargs['k'] (2) and k (3) disagree"),
        ({"card_rows": True}, "card_rows needs Chroma collections"),
    ],
)
def test_fields_that_cannot_be_honoured_are_refused_with_the_reason(
    fields: dict[str, Any], reason: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(reason)):
        fake_retriever("memory", **fields)


def test_add_to_docstore_false_writes_children_only() -> None:
    retriever = fake_retriever("memory")
    retriever.docstore.mset([("a", Document("alpha beta", id="a"))])
    retriever.add_documents([Document("alpha beta")], ids=["a"], add_to_docstore=False)
    assert [d.id for d in retriever.invoke("alpha beta")] == ["a"]
    with pytest.raises(ValueError, match="add_to_docstore"):
        retriever.add_documents([Document("x")], add_to_docstore=False)


@pytest.mark.parametrize("kind", STORES)
def test_hybrid_bm25_follows_adds_and_deletes(kind: str) -> None:
    retriever = fake_retriever(kind, hybrid=True, k=3)
    retriever.add_documents([Document("zebra quagga", id="z"), Document("alpha beta", id="a")])
    assert retriever.bm25 is not None
    assert sorted(retriever.bm25.child_ids) == ["a::00", "z::00"]
    assert next(d.id for d in retriever.invoke("quagga")) == "z"
    assert "fused_score" in retriever.invoke("quagga")[0].metadata
    retriever.delete(["z"])
    assert retriever.bm25.child_ids == ["a::00"]
    assert "z" not in [d.id for d in retriever.invoke("quagga")]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_async_twins_write_and_delete_the_same(asynchronous: bool) -> None:
    retriever = fake_retriever("memory", k=2)
    docs = [Document("alpha beta", id="a"), Document("gamma delta", id="b")]
    if asynchronous:
        await retriever.aadd_documents(docs)
        found = await retriever.ainvoke("alpha beta")
        gone = await retriever.adelete(["a"])
        left = await retriever.aget(["a", "b"])
    else:
        retriever.add_documents(docs)
        found = retriever.invoke("alpha beta")
        gone = retriever.delete(["a"])
        left = retriever.get(["a", "b"])
    assert next(d.id for d in found) == "a"
    assert gone["succeeded"] == ["a"]
    assert [d.id for d in left] == ["b"]


@pytest.mark.parametrize("kind", STORES)
def test_the_class_swaps_over_a_store_langchains_retriever_filled(kind: str) -> None:
    store, docstore = new_store(kind, FakeEmbeddings(size=256)), InMemoryStore()
    splitter = CharacterTextSplitter(separator=" ", chunk_size=12, chunk_overlap=0)
    plain = ParentDocumentRetriever(vectorstore=store, docstore=docstore, child_splitter=splitter)
    plain.add_documents([Document("alpha beta gamma"), Document("delta epsilon")])
    ours = ScoredParentDocumentRetriever(
        vectorstore=store, docstore=docstore, child_splitter=splitter, k=2
    )
    found = ours.invoke("alpha beta")  # uuid child rows, no chunk_index: read by doc_id
    assert [d.page_content for d in found] == ["alpha beta gamma", "delta epsilon"]
    assert found[0].metadata["matched_child_text"] == "alpha beta"
    assert found[0].metadata["score"] > found[1].metadata["score"]
    if kind == "chroma":  # Chroma finds LangChain's rows of a parent by metadata
        ours.delete([str(found[0].id)])
        assert [d.page_content for d in ours.invoke("alpha beta")] == ["delta epsilon"]
        assert len(store.get()["ids"]) == 2  # "delta", "epsilon": the first parent's are gone


def test_a_callable_filter_on_chroma_is_refused_not_ignored() -> None:
    retriever = fake_retriever("chroma", k=1)
    retriever.add_documents([Document("alpha beta", id="a")])
    with pytest.raises(ValueError, match="Chroma takes a `where` dict as filter"):
        retriever.invoke("alpha", filter=lambda d: True)
