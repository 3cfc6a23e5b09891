"""A scored question with one card, for the pure tests of answerability."""

from __future__ import annotations

import math

from cardrag.app.calibration import FEATURES
from cardrag.evals.answerability import Question, Scored


def scored_question(
    qid: str, answerable: bool, score: float, card: str = "c", same_language: bool = True
) -> Scored:
    feats = {name: 0.0 for names in FEATURES.values() for name in names}
    feats |= {"score": score, "same_language": float(same_language), "normalised_score": 0.0}
    feats["cross_encoder"] = math.nan  # measured for English questions in make eval only
    q = Question(qid, qid, answerable, "golden" if answerable else "uncovered", "en", "k", [card])
    return Scored(q, [(card, feats, ())])
