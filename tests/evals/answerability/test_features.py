"""Grading features per retrieved card (:mod:`cardrag.evals.answerability.features`)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from cardrag.evals.answerability import (
    Question,
    featurise,
    normalised_score,
)
from cardrag.retrievers.parent import ScoredParentDocumentRetriever


def test_a_score_is_normalised_by_the_question_s_similarities_over_the_index() -> None:
    assert normalised_score(0.9, np.array([0.7, 0.8, 0.9])) == pytest.approx(1.224745, abs=1e-6)
    assert normalised_score(0.8, np.array([0.8, 0.8])) == 0.0  # no spread: the difference


def test_featurise_measures_without_the_gate_with_the_index_and_the_cross_encoder(
    shipped_retriever: ScoredParentDocumentRetriever, real_embeddings: Embeddings
) -> None:
    from cardrag.retrievers.rerank import load_cross_encoder

    retriever = shipped_retriever
    assert retriever.min_similarity is not None  # a gated retriever: featurise turns it off
    asked = [
        Question("g", "Should I take levothyroxine on an empty stomach?", True, "a", "en", "k"),
        Question("u", "Who won the football world cup in 1998?", False, "b", "en", "k"),
        Question("p", "Posso tomar levotiroxina com café?", True, "c", "pt", "k"),
    ]
    golden, football, portuguese = featurise(
        asked, retriever, real_embeddings, 3, load_cross_encoder(1)
    )
    assert [len(s.cards) for s in (golden, football, portuguese)] == [3, 3, 3]  # gate off
    assert retriever.invoke(asked[1].text) == []  # which the gate would have refused
    top = golden.cards[0]
    assert top[0] == "card-levothyroxine-routine"
    best_football = max(f["cross_encoder"] for _, f, _ in football.cards)
    assert top[1]["cross_encoder"] > best_football + 2 * 0.8  # LOGIT_TOLERANCE, twice
    # standard deviations above the question's mean over every row of the index
    best_normalised = max(f["normalised_score"] for _, f, _ in football.cards)
    assert top[1]["normalised_score"] > best_normalised + 0.5  # measured 2.73 and 1.79
    assert all(math.isnan(f["cross_encoder"]) for _, f, _ in portuguese.cards)  # English only
