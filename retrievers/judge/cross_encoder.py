"""The answer judge as a LangChain cross-encoder: does this text answer this question?

``AnswerJudge()`` (no arguments: the model shipped with cardrag) is a ``BaseCrossEncoder``, so
LangChain's ``CrossEncoderReranker`` reranks anyone's documents by answerability::

    from langchain_classic.retrievers import ContextualCompressionRetriever
    from langchain_classic.retrievers.document_compressors import CrossEncoderReranker
    from cardrag import AnswerJudge, ScoredParentDocumentRetriever

    retriever = ContextualCompressionRetriever(
        base_compressor=CrossEncoderReranker(model=AnswerJudge(), top_n=3),
        base_retriever=ScoredParentDocumentRetriever(...),
    )

A text is read sentence by sentence (cut as sentence rows are) and scored by its best
sentence: the probability that the sentence answers the question. Four languages (English,
Portuguese, Spanish, Italian) and any mix of them, offline, numpy only.
"""

from __future__ import annotations

import logging
from collections import defaultdict

import numpy as np
from langchain_core.cross_encoders import BaseCrossEncoder

from cardrag.ingest.sentences import sentences
from cardrag.retrievers.judge.model import Judge

logger = logging.getLogger(__name__)


def text_sentences(text: str) -> list[str]:
    """The sentences a text is judged by (the whole text when it has none)."""
    found = [text[s:e] for s, e in sentences(text)]
    return found or [text]


def probability(logits: np.ndarray) -> np.ndarray:
    """The logistic of the judge's logits."""
    return 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))


class AnswerJudge(BaseCrossEncoder):
    """Scores (question, text) pairs by how likely the text's best sentence answers the question.

    Example:
        >>> judge = AnswerJudge()
        >>> a, b = judge.score([  # doctest: +SKIP
        ...     ("How do I store insulin?", "Insulin lowers blood sugar. Keep pens in the fridge."),
        ...     ("How do I store insulin?", "Insulin lowers blood sugar."),
        ... ])
        >>> a > b  # doctest: +SKIP
        True
    """

    def __init__(self, judge: Judge | None = None) -> None:
        """The shipped judge, or another one (the model is loaded on first use)."""
        self._judge = judge

    @property
    def judge(self) -> Judge:
        """The model, loaded once per process."""
        if self._judge is None:
            self._judge = Judge.shipped()
        return self._judge

    def best(self, question: str, text: str) -> tuple[float, str]:
        """The text's best sentence for the question, with its probability of answering it."""
        parts = text_sentences(text)
        scores = probability(self.judge.score(question, parts))
        at = int(np.argmax(scores))
        return float(scores[at]), parts[at]

    def score(self, text_pairs: list[tuple[str, str]]) -> list[float]:
        """For each (question, text), the probability that the text's best sentence answers it.

        Pairs that share a question are scored together (one pass over the question).
        """
        by_question: dict[str, list[int]] = defaultdict(list)
        for i, (question, _) in enumerate(text_pairs):
            by_question[question].append(i)
        out = [0.0] * len(text_pairs)
        for question, members in by_question.items():
            parts = [text_sentences(text_pairs[i][1]) for i in members]
            logits = self.judge.score(question, [s for p in parts for s in p])
            at = 0
            for i, p in zip(members, parts, strict=True):
                out[i] = float(probability(logits[at : at + len(p)]).max())
                at += len(p)
        return out
