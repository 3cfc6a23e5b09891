"""Vectors the app computes beside retrieval: the question and card sentences, once each.

Grading and the extractive answerer both compare the question with card sentences. They share
one :class:`Vectors`, so a question is embedded once per answer and a card sentence once per
process (cards do not change while an index is served; a new index gets a new context).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from langchain_core.embeddings import Embeddings

QUESTIONS_KEPT = 256
"""Question vectors kept (most recent first); sentences are kept for the life of the context."""


@dataclass
class Vectors:
    """Cached question and sentence vectors of one embedding model (normalised: dot = cosine).

    Example:
        >>> vectors = Vectors(embeddings)  # doctest: +SKIP
        >>> vectors.sentences(["Keep it cold.", "Keep it cold."])  # embedded once  # doctest: +SKIP
    """

    embeddings: Embeddings
    """The model (the retriever's own, so scores are on one scale)."""
    _questions: OrderedDict[str, list[float]] = field(default_factory=OrderedDict, repr=False)
    _sentences: dict[str, list[float]] = field(default_factory=dict, repr=False)

    def question(self, text: str) -> list[float]:
        """The question's vector (``embed_query``)."""
        if text in self._questions:
            self._questions.move_to_end(text)
            return self._questions[text]
        vector = self.embeddings.embed_query(text)
        self._questions[text] = vector
        if len(self._questions) > QUESTIONS_KEPT:
            self._questions.popitem(last=False)
        return vector

    def sentences(self, texts: list[str]) -> list[list[float]]:
        """The sentences' vectors (``embed_documents``), embedding only those not seen yet."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._sentences]
        if missing:
            self._sentences.update(
                zip(missing, self.embeddings.embed_documents(missing), strict=True)
            )
        return [self._sentences[t] for t in texts]


def dot(a: list[float], b: list[float]) -> float:
    """The dot product (the cosine, for normalised vectors)."""
    return sum(x * y for x, y in zip(a, b, strict=True))
