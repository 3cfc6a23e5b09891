"""The held-out figures: each signal's AUROC and refusal pair, refusal rates, the app's refusals."""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from cardrag.app.calibration import Calibrations
from cardrag.app.terms import LANGUAGES
from cardrag.evals.answerability.features import Scored, question_score
from cardrag.evals.answerability.questions import Question, held_out_ids


def auroc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """The probability that an answerable question outscores an uncovered one (ties: half)."""
    if not positive or not negative:
        return float("nan")
    p, n = np.array(positive)[:, None], np.array(negative)[None, :]
    return float(((p > n).sum() + 0.5 * (p == n).sum()) / (p.size * n.size))


def _highest(values: Iterable[float]) -> float:
    """The largest value that is not NaN (NaN: none is)."""
    present = [v for v in values if not math.isnan(v)]
    return max(present, default=math.nan)


SIGNALS: dict[str, Callable[[Scored], float]] = {
    "top similarity (the gate's score)": lambda s: _highest(f["score"] for _, f, _ in s.cards),
    "top similarity normalised over the index": lambda s: _highest(
        f["normalised_score"] for _, f, _ in s.cards
    ),
    "best sentence": lambda s: _highest(f["sentence"] for _, f, _ in s.cards),
    "mean sentence": lambda s: _highest(f["mean_sentence"] for _, f, _ in s.cards),
    "salient terms (a card mentions all)": lambda s: float(any(not m for _, _, m in s.cards)),
    "content coverage (same language)": lambda s: _highest(f["coverage"] for _, f, _ in s.cards),
    "aspect coverage (same language)": lambda s: _highest(f["aspect"] for _, f, _ in s.cards),
    "cross-encoder (English questions only)": lambda s: _highest(
        f["cross_encoder"] for _, f, _ in s.cards
    ),
}
"""Each signal alone, as a question-level score (higher: more answerable; NaN: not measured
for that question). Normalised similarity and the cross-encoder are measured, not used by
grading (:func:`featurise`)."""
COMBINED = "combined (grading)"
"""The name of grading's own score (:func:`question_score`) among the signals."""


def _signals(calibrations: Calibrations) -> dict[str, Callable[[Scored], float]]:
    """:data:`SIGNALS` and grading's combination."""
    return {**SIGNALS, COMBINED: lambda s: question_score(s, calibrations)}


def _values(
    scored: Sequence[Scored], signal: Callable[[Scored], float]
) -> list[tuple[float, bool]]:
    """(value, answerable) of each question the signal measured."""
    pairs = [(signal(s), s.question.answerable) for s in scored]
    return [(v, a) for v, a in pairs if not math.isnan(v)]


def _sides(values: Sequence[tuple[float, bool]]) -> tuple[list[float], list[float]]:
    """The values of the answerable questions, and of the unanswerable ones."""
    return [v for v, a in values if a], [v for v, a in values if not a]


def signal_aurocs(scored: Sequence[Scored], calibrations: Calibrations) -> dict[str, float]:
    """Each of :data:`SIGNALS` alone, and grading's combination, as an AUROC (rounded)."""
    out = {}
    for name, signal in _signals(calibrations).items():
        out[name] = round(auroc(*_sides(_values(scored, signal))), 3)
    return out


def best_threshold(values: Sequence[tuple[float, bool]]) -> float:
    """The cut-off that best separates (value, answerable) pairs: below it, refuse.

    The one that maximises the share of unanswerable questions refused minus the share of
    answerable ones refused (Youden's J); the lowest of equals, halfway between two values.

    Example:
        >>> best_threshold([(0.9, True), (0.8, True), (0.7, False), (0.85, False)])
        0.75
    """
    points = sorted({v for v, _ in values})
    cuts = [points[0] - 1.0] + [(a + b) / 2 for a, b in itertools.pairwise(points)]
    pos, neg = _sides(values)
    pos, neg = pos or [math.inf], neg or [-math.inf]

    def youden(cut: float) -> float:
        return float(np.mean([v < cut for v in neg]) - np.mean([v < cut for v in pos]))

    best: float = max(cuts, key=youden)  # the first (lowest) of equals
    return round(best, 6)


def refusal_pair(values: Sequence[tuple[float, bool]], threshold: float) -> dict[str, Any]:
    """Shares refused below ``threshold``: of unanswerable questions, and of answerable ones."""
    pos, neg = _sides(values)
    return {
        "unanswerable": len(neg),
        "refused": round(sum(v < threshold for v in neg) / len(neg), 3) if neg else None,
        "answerable": len(pos),
        "false_refused": round(sum(v < threshold for v in pos) / len(pos), 3) if pos else None,
    }


def signal_pairs(
    tuning: Sequence[Scored], held_out: Sequence[Scored], calibrations: Calibrations
) -> dict[str, dict[str, Any]]:
    """Each signal at a threshold chosen on the tuning part, measured on the held-out part.

    A signal alone gets :func:`best_threshold` on the tuning part; grading's combination its
    own (a question is answered when its margin is at least 0). Per signal: the threshold,
    and :func:`refusal_pair` on all held-out questions and on those asked in each language.
    """
    out: dict[str, dict[str, Any]] = {}
    for name, signal in _signals(calibrations).items():
        tuned = _values(tuning, signal)
        if not tuned:
            continue
        threshold = 0.0 if name == COMBINED else best_threshold(tuned)
        row: dict[str, Any] = {"threshold": threshold}
        row["all"] = refusal_pair(_values(held_out, signal), threshold)
        for language in LANGUAGES:
            asked = [s for s in held_out if s.question.language == language]
            row[language] = refusal_pair(_values(asked, signal), threshold)
        out[name] = row
    return out


def evaluate(
    held_out: Sequence[Scored], calibrations: Calibrations, tuning: Sequence[Scored] = ()
) -> dict[str, Any]:
    """The held-out figures: AUROCs, refusal rates by source, language and kind.

    The AUROCs are for all the questions and for those asked in each language. Given the
    ``tuning`` part, also each signal's refusal pair at a threshold chosen on it
    (:func:`signal_pairs`).
    """
    by_language = {
        language: signal_aurocs(
            [s for s in held_out if s.question.language == language], calibrations
        )
        for language in LANGUAGES
    }
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for s in held_out:
        refused = int(question_score(s, calibrations) < 0)
        q = s.question
        for key in (q.source, f"{q.source} {q.language}", f"{q.source} {q.kind}"):
            counts[key][0] += 1
            counts[key][1] += refused
    rates = {
        key: {"questions": n, "refused": r, "rate": round(r / n, 3)}
        for key, (n, r) in sorted(counts.items())
    }
    figures = {
        "auroc": signal_aurocs(held_out, calibrations),
        "auroc_by_language": by_language,
        "refusal": rates,
    }
    if tuning:
        figures["signal_pairs"] = signal_pairs(tuning, held_out, calibrations)
    return figures


def refusals(qs: Sequence[Question], ask: Any) -> dict[str, Any]:
    """Refusal rates through the app (``ask(text) -> Reply``), on the held-out part and on all.

    Uncovered and PubMedQA questions (refusing is right) and translated golden questions
    (refusing is a false refusal; golden's own are in the app figures), per source, language
    and kind. Examples: held-out uncovered questions answered, translated ones refused.
    """
    held = held_out_ids(qs)
    counts: dict[str, dict[str, list[int]]] = {"held_out": defaultdict(lambda: [0, 0])}
    counts["all"] = defaultdict(lambda: [0, 0])
    examples: list[dict[str, str]] = []
    refused_examples: list[dict[str, str]] = []
    for q in tqdm(qs, desc="refusals", unit="q", leave=False, disable=None):
        if q.source in ("golden", "names"):
            continue
        reply = ask(q.text)
        for part in ("all", "held_out") if q.qid in held else ("all",):
            for key in (q.source, f"{q.source} {q.language}", f"{q.source} {q.kind}"):
                counts[part][key][0] += 1
                counts[part][key][1] += int(reply.refused)
        if q.qid not in held:
            continue
        if not q.answerable and not reply.refused:
            cited = [c.id for c in reply.citations]
            examples.append({"question": q.text, "cited": ", ".join(cited)})
        elif q.answerable and reply.refused:
            refused_examples.append({"question": q.text, "reason": reply.refusal_reason or ""})
    return {
        part: {
            key: {"questions": n, "refused": r, "rate": round(r / n, 3)}
            for key, (n, r) in sorted(table.items())
        }
        for part, table in counts.items()
    } | {"answered_held_out": examples, "refused_held_out": refused_examples}
