"""Answerability: fit grading's calibration on the tuning part, measure it on the held-out part.

``python -m cardrag.evals.answerability`` (``--write`` to store the calibration the app reads):

1. Questions: the golden cases (answerable; their ``must_cite_one_of`` cards are the ones that
   answer), ``evals/cases/uncovered.jsonl`` (in-domain questions no card answers, four
   languages, five kinds) and, when ``../shared`` is present, a seeded sample of PubMedQA
   questions (English research questions no card answers); ``evals/cases/translated.jsonl``
   (golden questions asked in Portuguese, Spanish and Italian: answerable, across languages)
   and ``evals/cases/names.jsonl`` (answerable questions naming a card's medicine by a brand,
   a class or everyday words, four languages).
2. Each question is retrieved on the shipped cards with the configured settings, the
   similarity gate off, and every retrieved card's grading features are computed
   (:func:`cardrag.app.grading.pair_features`).
3. The questions are split into a tuning and a held-out part, stratified by source, language
   and kind, with :func:`cardrag.evals.split.split`'s seed. Two logistic models are fitted on
   the tuning part only (answering cards against cards retrieved for uncovered questions):
   one for cards in the question's language, one for cards in another. The first's threshold
   refuses at most :data:`FALSE_REFUSAL_BUDGET` of the answerable questions; the second's
   refuses at least :data:`ACROSS_REFUSAL_TARGET` of the uncovered ones (each with
   :data:`THRESHOLD_MARGIN` to spare).
4. The held-out part is then scored once, for the report: the AUROC of each signal alone and
   of the combination, each signal's refusal pair at a threshold chosen on the tuning part
   (:func:`signal_pairs`), and the refusal rates per language and kind.
"""

from cardrag.evals.answerability.features import (
    Scored,
    best_answerability,
    featurise,
    index_rows,
    normalised_score,
    parts,
    question_score,
    relation_part,
)
from cardrag.evals.answerability.figures import (
    COMBINED,
    SIGNALS,
    auroc,
    best_threshold,
    evaluate,
    refusal_pair,
    refusals,
    signal_aurocs,
    signal_pairs,
)
from cardrag.evals.answerability.fitting import (
    ACROSS_REFUSAL_TARGET,
    FALSE_REFUSAL_BUDGET,
    GATE_MARGIN,
    HARD_NEGATIVES,
    THRESHOLD_MARGIN,
    calibrate,
    choose_gate,
    choose_threshold,
    fit,
    training_rows,
    write_calibration,
)
from cardrag.evals.answerability.questions import (
    PUBMEDQA,
    Question,
    held_out_ids,
    questions,
)

__all__ = [
    "ACROSS_REFUSAL_TARGET",
    "COMBINED",
    "FALSE_REFUSAL_BUDGET",
    "GATE_MARGIN",
    "HARD_NEGATIVES",
    "PUBMEDQA",
    "SIGNALS",
    "THRESHOLD_MARGIN",
    "Question",
    "Scored",
    "auroc",
    "best_answerability",
    "best_threshold",
    "calibrate",
    "choose_gate",
    "choose_threshold",
    "evaluate",
    "featurise",
    "fit",
    "held_out_ids",
    "index_rows",
    "normalised_score",
    "parts",
    "question_score",
    "questions",
    "refusal_pair",
    "refusals",
    "relation_part",
    "signal_aurocs",
    "signal_pairs",
    "training_rows",
    "write_calibration",
]
