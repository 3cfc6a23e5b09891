"""LangChain's own standard retriever tests, run on ``ScoredParentDocumentRetriever``.

``RetrieversIntegrationTests`` (package langchain-tests) checks what every LangChain retriever
promises: ``k`` in the constructor and per call, ``invoke`` and ``ainvoke`` returning
``Document`` lists. Here it runs over the shipped cards, ingested once per session with the
real model, Chroma on disk and the model's calibrated gate. langchain-tests has no unit-test
counterpart for retrievers, so there is nothing more to subclass.

The contract when the gate (or a filter) leaves fewer than ``k`` cards is ours, not the
standard tests': see the class docstring and the last two tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings
from langchain_tests.integration_tests import RetrieversIntegrationTests

from cardrag.ingest.index import Index, open_index
from cardrag.ingest.models import model_profile
from cardrag.retrievers.parent import ScoredParentDocumentRetriever
from tests.conftest import REAL_MODEL

QUESTION = "How should I store insulin when I travel?"
"""Passes the gate for at least three cards, so ``k`` = 1 and 3 are both met exactly."""


class TestScoredParentDocumentRetrieverStandard(RetrieversIntegrationTests):
    """The standard suite over the shipped index (see the module docstring)."""

    index: Index

    @pytest.fixture(autouse=True)
    def _shipped(self, shipped_index_dir: Path, real_embeddings: Embeddings) -> None:
        type(self).index = open_index(shipped_index_dir, real_embeddings, REAL_MODEL)

    @property
    def retriever_constructor(self) -> type[ScoredParentDocumentRetriever]:
        return ScoredParentDocumentRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        collections = self.index.collections
        return {
            "vectorstore": collections.children,
            "card_rows_store": collections.cards,
            "restricted_store": collections.restricted,
            "docstore": self.index.docstore,
            "bm25": self.index.bm25,
            "min_similarity": model_profile(REAL_MODEL).min_similarity,  # type: ignore[union-attr]
        }

    @property
    def retriever_query_example(self) -> str:
        return QUESTION


@pytest.fixture
def dense(shipped_index_dir: Path, real_embeddings: Embeddings) -> ScoredParentDocumentRetriever:
    """Dense children only, so the returned order is the order of the gated score."""
    index = open_index(shipped_index_dir, real_embeddings, REAL_MODEL)
    return ScoredParentDocumentRetriever.over(index.collections, docstore=index.docstore, k=5)


def test_the_gate_returns_fewer_than_k_and_never_pads(dense: ScoredParentDocumentRetriever) -> None:
    ungated = dense.invoke(QUESTION)
    scores = [d.metadata["score"] for d in ungated]
    assert len(ungated) == 5
    assert scores == sorted(scores, reverse=True)
    floor = (scores[1] + scores[2]) / 2  # between the second and the third card, this run
    gated = dense.invoke(QUESTION, min_similarity=floor)
    assert [d.id for d in gated] == [d.id for d in ungated[:2]]  # 2 of k=5: nothing padded
    assert dense.invoke(QUESTION, min_similarity=1.0) == []  # nothing passes: an empty list
    assert dense.invoke(QUESTION, k=2) == ungated[:2]  # k alone still returns exactly k


def test_a_filter_that_admits_fewer_than_k_cards_returns_those_only(
    dense: ScoredParentDocumentRetriever,
) -> None:
    where = {"parent_id": {"$in": ["card-insulin-storage", "card-travel-carry-on"]}}
    docs = dense.invoke(QUESTION, k=5, filter=where)
    assert sorted(d.id or "" for d in docs) == ["card-insulin-storage", "card-travel-carry-on"]
