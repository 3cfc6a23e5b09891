"""The retriever as a LangChain ``DocumentIndex``: the standard suites and the indexing API.

``DocumentIndexerTestSuite`` and ``AsyncDocumentIndexTestSuite`` (langchain-tests) check
upsert / get / delete of parents; ``langchain_core.indexing.index`` syncs documents from a
loader into the retriever (children kept in step); ``RetrieversIntegrationTests`` runs on a
retriever filled with ``add_documents`` over documents that are not cards; and a retriever
persisted in one process (Chroma ``persist_directory``, ``LocalFileStore``) answers in another.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_classic.storage import LocalFileStore
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.indexing import InMemoryRecordManager, index
from langchain_core.indexing.base import DocumentIndex
from langchain_core.stores import InMemoryStore
from langchain_tests.integration_tests import RetrieversIntegrationTests
from langchain_tests.integration_tests.indexer import (
    AsyncDocumentIndexTestSuite,
    DocumentIndexerTestSuite,
)
from langchain_text_splitters import RecursiveCharacterTextSplitter

from cardrag import ScoredParentDocumentRetriever
from cardrag.ingest.index.rows import probe_child_ids
from cardrag.ingest.settings import PROJECT_ROOT
from tests.conftest import REAL_MODEL, FakeEmbeddings
from tests.retrievers.test_parent_dropin import HOWTO, STORES, load_docs, new_store


def empty_index(kind: str, embeddings: Embeddings) -> ScoredParentDocumentRetriever:
    """A retriever over an empty store of one kind, parents in memory."""
    return ScoredParentDocumentRetriever(
        vectorstore=new_store(kind, embeddings),
        docstore=InMemoryStore(),
        child_splitter=RecursiveCharacterTextSplitter(chunk_size=400),
    )


class TestDocumentIndex(DocumentIndexerTestSuite):
    """LangChain's read-write suite for a ``DocumentIndex``, on each store."""

    @pytest.fixture(params=STORES)
    def index(self, request: pytest.FixtureRequest) -> Iterator[DocumentIndex]:
        return empty_index(request.param, FakeEmbeddings())


class TestAsyncDocumentIndex(AsyncDocumentIndexTestSuite):
    """The same suite through the async twins."""

    @pytest.fixture(params=STORES)
    async def index(self, request: pytest.FixtureRequest) -> AsyncIterator[DocumentIndex]:
        return empty_index(request.param, FakeEmbeddings())


@pytest.mark.parametrize("kind", STORES)
def test_the_indexing_api_keeps_parents_and_children_in_step(
    kind: str, real_embeddings: Embeddings
) -> None:
    retriever = empty_index(kind, real_embeddings)
    manager = InMemoryRecordManager(namespace=f"howto/{kind}")
    manager.create_schema()
    docs = load_docs()

    def run(batch: list[Document], cleanup: Any) -> dict[str, int]:
        counts = index(batch, manager, retriever, cleanup=cleanup, source_id_key="source")
        return dict(counts)

    assert run(docs, "incremental") == {
        "num_added": 4,
        "num_updated": 0,
        "num_skipped": 0,
        "num_deleted": 0,
    }
    parents = sorted(retriever.docstore.yield_keys())
    children = probe_child_ids(retriever.vectorstore, parents)
    assert run(docs, "incremental") == {
        "num_added": 0,
        "num_updated": 0,
        "num_skipped": 4,
        "num_deleted": 0,
    }
    assert sorted(retriever.docstore.yield_keys()) == parents  # nothing re-written
    # one document edited: index() hashes content, so it counts 1 added and 1 deleted
    edited = [*docs[:3], Document(docs[3].page_content[:900], metadata=docs[3].metadata)]
    assert run(edited, "incremental") == {
        "num_added": 1,
        "num_updated": 0,
        "num_skipped": 3,
        "num_deleted": 1,
    }
    now = sorted(retriever.docstore.yield_keys())
    (old,) = set(parents) - set(now)
    assert probe_child_ids(retriever.vectorstore, [old]) == []  # its old children are gone
    (new,) = set(now) - set(parents)
    # 900 characters in 400-character children overlapping by 200 (the splitter's default)
    assert len(probe_child_ids(retriever.vectorstore, [new])) == 5
    # one document removed, full cleanup: 1 deleted, with its children
    assert run(edited[1:], "full") == {
        "num_added": 0,
        "num_updated": 0,
        "num_skipped": 3,
        "num_deleted": 1,
    }
    assert len(list(retriever.docstore.yield_keys())) == 3
    left = probe_child_ids(retriever.vectorstore, list(retriever.docstore.yield_keys()))
    assert sorted(probe_child_ids(retriever.vectorstore, parents + now)) == sorted(left)
    assert len(left) < len(children)
    found = retriever.invoke("How tall is the lighthouse tower?")
    assert len(found) == 3
    assert found[0].metadata["source"].endswith("lighthouse.txt")


class TestRetrieverOverAnyoneDocuments(RetrieversIntegrationTests):
    """LangChain's standard retriever suite on a retriever filled by ``add_documents``.

    The documents are the how-to's texts (not cards), cut into 2,000-character sections, on
    Chroma with the real model; the shipped-card variant is in ``test_parent_standard.py``.
    """

    stores: dict[str, Any]

    @pytest.fixture(autouse=True)
    def _filled(self, real_embeddings: Embeddings) -> None:
        retriever = ScoredParentDocumentRetriever(
            vectorstore=new_store("chroma", real_embeddings),
            docstore=InMemoryStore(),
            child_splitter=RecursiveCharacterTextSplitter(chunk_size=400),
            parent_splitter=RecursiveCharacterTextSplitter(chunk_size=2000),
        )
        retriever.add_documents(load_docs())
        type(self).stores = {"vectorstore": retriever.vectorstore, "docstore": retriever.docstore}

    @property
    def retriever_constructor(self) -> type[ScoredParentDocumentRetriever]:
        return ScoredParentDocumentRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return dict(self.stores)

    @property
    def retriever_query_example(self) -> str:
        return "How often should I lubricate my bicycle chain?"


PERSISTED = textwrap.dedent(
    """
    import json, sys
    from langchain_chroma import Chroma
    from langchain_classic.storage import LocalFileStore
    from langchain_community.document_loaders import TextLoader
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    from cardrag import ScoredParentDocumentRetriever
    from cardrag.ingest.embeddings import load_embeddings

    root, step, howto = sys.argv[1], sys.argv[2], sys.argv[3]
    retriever = ScoredParentDocumentRetriever(
        vectorstore=Chroma(
            collection_name="howto",
            persist_directory=f"{root}/chroma",
            embedding_function=load_embeddings("MODEL", 1),
        ),
        byte_store=LocalFileStore(f"{root}/parents"),
        bm25_store=LocalFileStore(f"{root}/bm25"),
        hybrid=True,
        child_splitter=RecursiveCharacterTextSplitter(chunk_size=400),
        k=2,
    )
    if step == "write":
        for name in ("bicycle", "lighthouse", "solar"):
            docs = TextLoader(f"{howto}/{name}.txt", encoding="utf-8").load()
            retriever.add_documents(docs, ids=[name])
    if step == "delete":
        retriever.delete(["solar"])
    found = retriever.invoke("Can I clean my solar panels with a pressure washer?")
    print(json.dumps([[d.id, d.metadata["matched_child_text"][:30]] for d in found]))
    """
).replace("MODEL", REAL_MODEL)


@pytest.mark.real
def test_a_persisted_retriever_answers_in_another_process(tmp_path: Path) -> None:
    def step(name: str) -> list[list[str]]:
        done = subprocess.run(
            [sys.executable, "-c", PERSISTED, str(tmp_path), name, str(HOWTO)],
            capture_output=True,
            text=True,
            check=False,
            cwd=PROJECT_ROOT,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return list(json.loads(done.stdout.strip().splitlines()[-1]))

    written = step("write")
    assert written[0][0] == "solar"
    assert len({d for d, _ in written}) == 2
    assert step("read") == written  # a new process: the same parents, children and BM25
    assert LocalFileStore(tmp_path / "parents").mget(["solar"]) != [None]
    after = step("delete")
    assert "solar" not in [d for d, _ in after]
    assert step("read") == after


@pytest.mark.parametrize("kind", STORES)
def test_rows_indexed_around_the_retriever_are_skipped_with_a_warning(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    retriever = empty_index(kind, FakeEmbeddings())
    manager = InMemoryRecordManager(namespace=f"around/{kind}")
    manager.create_schema()
    index([Document("alpha beta", metadata={"source": "a"})], manager, retriever.vectorstore)
    with caplog.at_level("WARNING"):
        assert retriever.invoke("alpha beta") == []  # as LangChain's retriever: no parent
    assert "1 row(s)" in caplog.text
    assert "have no 'doc_id' metadata and were skipped" in caplog.text
