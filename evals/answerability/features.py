"""Each question's retrieved cards with grading's features, and the question-level score."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from tqdm.auto import tqdm

from cardrag.app.aspects import aspect_verdict
from cardrag.app.calibration import SAME_LANGUAGE, Calibration, Calibrations
from cardrag.app.glossary import unglossed
from cardrag.app.grading import card_language, doc_coverage, pair_features
from cardrag.app.rivals import card_leads
from cardrag.app.terms import question_language, salient_terms
from cardrag.app.vectors import Vectors
from cardrag.evals.answerability.questions import Question, held_out_ids
from cardrag.ingest import metadata as md
from cardrag.retrievers.parent import ScoredParentDocumentRetriever
from cardrag.retrievers.rerank import OnnxCrossEncoder, rerank_passage


@dataclass
class Scored:
    """A question's retrieved cards with their grading features."""

    question: Question
    """The question."""
    cards: list[tuple[str, dict[str, float], tuple[str, ...]]]
    """``(card id, features, missing medical terms)`` per retrieved card, best first."""


def index_rows(retriever: ScoredParentDocumentRetriever) -> np.ndarray:
    """Every row vector of the retriever's index (one per child, and per card row if any)."""
    got = retriever.collections.children.get(include=["embeddings"])
    return np.asarray(got["embeddings"], dtype=float)


def normalised_score(score: float, similarities: np.ndarray) -> float:
    """A card's similarity in standard deviations above the question's mean over the index.

    Example:
        >>> normalised_score(0.9, np.array([0.7, 0.8, 0.9]))
        1.224745
    """
    spread = float(similarities.std()) or 1.0
    return round((score - float(similarities.mean())) / spread, 6)


def featurise(
    qs: Sequence[Question],
    retriever: ScoredParentDocumentRetriever,
    embeddings: Embeddings,
    k: int,
    cross_encoder: OnnxCrossEncoder | None = None,
    read: Callable[[str], str] | None = None,
) -> list[Scored]:
    """Retrieve (gate off) and compute every retrieved card's grading features.

    The question is read as the app reads it (``read``, :meth:`cardrag.app.context.Context.read`:
    brand names and the cards' aliases in the cards' words, another language glossed), and a
    card is vetoed as grading vetoes it: a medical term or an aspect of the question it never
    mentions (:mod:`cardrag.app.aspects`, listed as
    ``aspect: ...``), so the thresholds are chosen over the cards grading really scores.

    Besides grading's own (:func:`cardrag.app.grading.pair_features`), two signals the report
    measures and grading does not use: ``normalised_score`` (:func:`normalised_score` over
    every row of the index) and, for English questions when a ``cross_encoder`` is given,
    ``cross_encoder`` (its logit for the card's matched passage; NaN otherwise).
    """
    vectors = Vectors(embeddings)
    rows = index_rows(retriever)
    out = []
    for q in tqdm(qs, desc="grading features", unit="q", leave=False, disable=None):
        text = read(q.text) if read is not None else q.text
        own = unglossed(text)
        docs: list[Document] = retriever.invoke(text, k=k, min_similarity=None)
        terms = salient_terms(own)
        lang = question_language(own)
        qv = vectors.question(text)
        similarities = rows @ np.asarray(qv)
        logits = [math.nan] * len(docs)
        if cross_encoder is not None and lang == "en":
            logits = cross_encoder.score(q.text, [rerank_passage(d) for d in docs])
        cards = []
        ahead = card_leads(docs, docs, functools.partial(doc_coverage, text, lang))
        for doc, logit, lead in zip(docs, logits, ahead, strict=True):
            card = (str(doc.metadata.get(md.TITLE, "")), doc.page_content, card_language(doc))
            score = float(doc.metadata[md.SCORE])
            feats, missing = pair_features(vectors, text, qv, terms, lang, card, score)
            feats.update(lead)
            lacking, _ = aspect_verdict(own, lang, f"{card[0]}\n{card[1]}")
            missing = (*missing, *(f"aspect: {a}" for a in lacking))
            feats["normalised_score"] = normalised_score(score, similarities)
            feats["cross_encoder"] = logit
            cards.append((str(doc.id), feats, missing))
        out.append(Scored(q, cards))
    return out


def relation_part(scored: Sequence[Scored], relation: str) -> list[Scored]:
    """The questions with their cards of one language relation only.

    ``relation`` is ``SAME_LANGUAGE`` or ``ACROSS_LANGUAGES``; a question with no such card is
    left out.
    """
    same = relation == SAME_LANGUAGE
    out = []
    for s in scored:
        cards = [c for c in s.cards if (c[1]["same_language"] == 1.0) == same]
        if cards:
            out.append(Scored(s.question, cards))
    return out


def _best(s: Scored, value: Callable[[dict[str, float]], float]) -> float:
    """The best ``value`` over the question's cards that pass the veto (-inf: none does)."""
    return max((value(f) for _, f, missing in s.cards if not missing), default=float("-inf"))


def question_score(s: Scored, calibrations: Calibrations) -> float:
    """The best margin over the question's cards, each against its own calibration's threshold.

    Answered when >= 0; -inf when every card lacks a term.
    """
    return _best(s, lambda f: calibrations.of(f["same_language"] == 1.0).margin(f))


def best_answerability(s: Scored, calibration: Calibration) -> float:
    """The best logit of one calibration over the question's cards (-inf: every card vetoed)."""
    return _best(s, calibration.answerability)


def parts(scored: Sequence[Scored]) -> tuple[list[Scored], list[Scored]]:
    """(tuning, held-out), as :func:`held_out_ids` splits the questions."""
    held = held_out_ids([s.question for s in scored])
    return [s for s in scored if s.question.qid not in held], [
        s for s in scored if s.question.qid in held
    ]
