"""Construction errors a user reads in one line (:mod:`cardrag.retrievers.fields`)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.stores import InMemoryStore
from langchain_core.vectorstores import InMemoryVectorStore

from cardrag import ScoredParentDocumentRetriever
from tests.retrievers.test_parent_dropin import faiss_store


def _build(store: Any = None, **fields: Any) -> ScoredParentDocumentRetriever:
    store = store or InMemoryVectorStore(DeterministicFakeEmbedding(size=8))
    return ScoredParentDocumentRetriever(vectorstore=store, docstore=InMemoryStore(), **fields)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"serach_kwargs": {"k": 2}},
            "serach_kwargs is not a field of ScoredParentDocumentRetriever "
            "(did you mean search_kwargs?)",
        ),
        (
            {"search_kwargs": {"k": 0}},
            "search_kwargs['k'] (0): expected a whole number of parents, at least 1",
        ),
        (
            {"search_kwargs": {"k": "3"}},
            "search_kwargs['k'] ('3'): expected a whole number of parents, at least 1",
        ),
        ({"k": 0}, "k=0: Input should be greater than or equal to 1"),
        (
            {"filter": {"topic": "iron"}},
            "InMemoryVectorStore takes a callable as filter (Document -> bool), not a dict",
        ),
        (
            {"search_kwargs": {"filter": {"topic": "iron"}}},
            "InMemoryVectorStore takes a callable as filter (Document -> bool), not a dict",
        ),
    ],
)
def test_a_construction_problem_is_one_value_error_line_naming_the_field(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as caught:
        _build(**fields)
    assert str(caught.value) == message
    assert type(caught.value) is ValueError  # not pydantic's "1 validation error for ..."


def test_a_faiss_store_takes_a_dict_or_a_callable_and_refuses_other_filters() -> None:
    embeddings = DeterministicFakeEmbedding(size=8)
    assert _build(faiss_store(embeddings), filter={"topic": "iron"}).filter == {"topic": "iron"}
    retriever = _build(faiss_store(embeddings))
    retriever.add_documents([Document("alpha beta")])
    with pytest.raises(ValueError, match=r"^FAISS takes a dict or a callable as filter, not a str"):
        retriever.invoke("alpha", filter="topic = iron")


def test_a_per_call_filter_of_the_wrong_form_is_refused_before_the_store_sees_it() -> None:
    retriever = _build()
    retriever.add_documents([Document("alpha beta")])
    with pytest.raises(ValueError, match=r"^InMemoryVectorStore takes a callable as filter"):
        retriever.invoke("alpha", filter={"topic": "iron"})
    assert [d.page_content for d in retriever.invoke("alpha", filter=lambda d: True)] == [
        "alpha beta"
    ]
