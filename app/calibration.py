"""Grading's calibrations: a logistic combination of features per embedding model.

Two per model (:class:`Calibrations`): for a card in the question's language, and for one in
another. They are fitted on the tuning part of the answerable and uncovered questions
(``python -m cardrag.evals.answerability --write``) and stored with everything else known of
the model, in the registry (:mod:`cardrag.ingest.models`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cardrag.ingest.models import MODELS_FILE, model_profile

SAME_LANGUAGE = "same_language"
"""Calibration for a card in the question's language: dense and lexical signals."""
ACROSS_LANGUAGES = "across_languages"
"""Calibration for a card in another language than the question's: dense signals only."""
FEATURES = {
    SAME_LANGUAGE: ("score", "sentence", "coverage", "soft_missing", "aspect", "mean_sentence"),
    ACROSS_LANGUAGES: (
        "score",
        "sentence",
        "coverage",
        "soft_missing",
        "mean_sentence",
        "masked_sentence",
        "masked_mean_sentence",
        "lead",
        "coverage_lead",
    ),
}
"""The signals each calibration combines, in its order (:func:`card_features` computes all)."""


@dataclass(frozen=True)
class Calibration:
    """A logistic combination of features and its threshold, fitted for one model.

    The dense signals live on each embedding model's own scale, so a calibration belongs to
    the model it was fitted with (on the tuning part of the answerable and uncovered cases).
    """

    model: str
    """The embedding model the dense features come from."""
    features: tuple[str, ...]
    """The features it combines, in the order of ``mean``, ``scale`` and ``weights``."""
    mean: tuple[float, ...]
    """Feature means on the tuning part (standardisation)."""
    scale: tuple[float, ...]
    """Feature standard deviations on the tuning part."""
    weights: tuple[float, ...]
    """Logistic weights of the standardised features."""
    bias: float
    """Logistic intercept."""
    threshold: float
    """A card passes when its answerability reaches this (chosen on the tuning part)."""
    min_similarity: float | None = None
    """The similarity gate for this calibration's cards where it is not the retriever's
    (across languages: the lowest similarity of a card that answers a tuning question, less a
    margin; ``Context.across_min_similarity``); None: the retriever's gate."""

    def answerability(self, features: dict[str, float]) -> float:
        """The logit that the card answers the question (higher: more likely)."""
        values = [features[name] for name in self.features]
        return self.bias + sum(
            w * (v - m) / s
            for w, v, m, s in zip(self.weights, values, self.mean, self.scale, strict=True)
        )

    def margin(self, features: dict[str, float]) -> float:
        """How far the card's answerability is above (+) or below (-) the threshold."""
        return self.answerability(features) - self.threshold


@dataclass(frozen=True)
class Calibrations:
    """A model's two calibrations: cards in the question's language, and in another.

    Across languages the lexical signals abstain and the dense ones run on a lower scale
    (a Portuguese question is less similar to the English card that answers it than the same
    question in English), so the two are fitted and thresholded apart.
    """

    same_language: Calibration
    """For a card in the question's language."""
    across_languages: Calibration
    """For a card in another language."""

    def of(self, same_language: bool) -> Calibration:
        """The calibration for a (question, card) pair."""
        return self.same_language if same_language else self.across_languages


def load_calibrations(model: str, path: Path = MODELS_FILE) -> Calibrations | None:
    """The calibrations fitted for ``model``, or None (grading then uses the salient terms only).

    Raises:
        ValueError: naming the file and field, when the stored calibration was fitted for
            other features than grading computes.
    """
    same = load_calibration(model, SAME_LANGUAGE, path)
    across = load_calibration(model, ACROSS_LANGUAGES, path)
    return None if same is None or across is None else Calibrations(same, across)


def load_calibration(model: str, relation: str, path: Path = MODELS_FILE) -> Calibration | None:
    """One stored calibration of ``model`` (``relation``: a key of :data:`FEATURES`), or None.

    Raises:
        ValueError: naming the file and field, when it was fitted for other features than
            grading computes.
    """
    known = model_profile(model, path)
    if known is None or known.grading is None:
        return None
    names = FEATURES[relation]
    part = known.grading.get(relation) or {}
    if tuple(part.get("features", ())) != names:
        raise ValueError(
            f"{path}: {model}.grading.{relation}.features is {part.get('features')}, grading "
            f"computes {list(names)}; refit it (python -m cardrag.evals.answerability --write)"
        )
    return Calibration(
        model=model,
        features=names,
        mean=tuple(part["mean"]),
        scale=tuple(part["scale"]),
        weights=tuple(part["weights"]),
        bias=float(part["bias"]),
        threshold=float(part["threshold"]),
        min_similarity=part.get("min_similarity"),
    )


def stored(calibrations: Calibrations) -> dict[str, Any]:
    """The two calibrations as the registry stores them (``grading``), rounded.

    Example:
        >>> c = Calibration("m", ("score",), (0.8,), (0.02,), (1.5,), -0.25, 0.1)
        >>> stored(Calibrations(c, c))["same_language"]["weights"]
        [1.5]
    """
    pairs = (
        (SAME_LANGUAGE, calibrations.same_language),
        (ACROSS_LANGUAGES, calibrations.across_languages),
    )
    return {
        relation: {
            "features": list(c.features),
            "mean": [round(v, 6) for v in c.mean],
            "scale": [round(v, 6) for v in c.scale],
            "weights": [round(v, 6) for v in c.weights],
            "bias": round(c.bias, 6),
            "threshold": round(c.threshold, 6),
            **({} if c.min_similarity is None else {"min_similarity": c.min_similarity}),
        }
        for relation, c in pairs
    }
