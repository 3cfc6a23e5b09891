"""Answerability: fit grading's calibration on the tuning part, measure it on the held-out part.

``python -m cardrag.evals.answerability`` (``--write`` to store the calibration the app reads):

1. Questions: the golden cases (answerable; their ``must_cite_one_of`` cards are the ones that
   answer), ``evals/cases/uncovered.jsonl`` (in-domain questions no card answers, four
   languages, five kinds) and, when ``../shared`` is present, a seeded sample of PubMedQA
   questions (English research questions no card answers).
2. Each question is retrieved on the shipped cards with the configured settings, the
   similarity gate off, and every retrieved card's grading features are computed
   (:func:`cardrag.app.grading.card_features`).
3. The questions are split into a tuning and a held-out part, stratified by source, language
   and kind, with :func:`cardrag.evals.split.split`'s seed. A logistic model of the features
   is fitted on the tuning part only (answering cards against cards retrieved for uncovered
   questions), and its threshold is the highest that refuses at most
   :data:`FALSE_REFUSAL_BUDGET` of the tuning part's golden questions, less
   :data:`THRESHOLD_MARGIN`.
4. The held-out part is then scored once, for the report: the AUROC of each signal alone and
   of the combination, and the refusal rates per language and kind.
"""

from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from tqdm.auto import tqdm

from cardrag.app.grading import (
    CALIBRATION_FILE,
    FEATURES,
    Calibration,
    card_features,
    sentence_similarities,
)
from cardrag.app.terms import question_language, salient_terms, text_language
from cardrag.app.vectors import Vectors
from cardrag.evals.cases import GOLDEN, load_golden_cases, load_uncovered
from cardrag.evals.split import split
from cardrag.ingest import metadata as md
from cardrag.retrievers.parent import ScoredParentDocumentRetriever

PUBMEDQA = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "pubmedqa-pqal"
PUBMED_SAMPLE = 200
"""PubMedQA questions sampled (seeded) for the uncovered side."""
SEED = 7
FALSE_REFUSAL_BUDGET = 0.02
"""Share of the tuning part's golden questions the threshold may refuse (2 of 88 overall)."""
THRESHOLD_MARGIN = 0.05
"""Logit units the threshold sits below the last golden question it keeps, so a CPU whose
kernels move a score by a few 1e-4 does not flip that question (issue 16)."""
L2 = 1.0
"""Ridge penalty of the logistic fit (standardised features)."""


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
        Question(f"uncovered:{u.query_id}", u.query, False, "uncovered", u.language, u.kind)
        for u in load_uncovered()
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


def featurise(
    qs: Sequence[Question], retriever: ScoredParentDocumentRetriever, embeddings: Embeddings, k: int
) -> list[Scored]:
    """Retrieve (gate off) and compute every retrieved card's grading features."""
    vectors = Vectors(embeddings)
    out = []
    for q in tqdm(qs, desc="grading features", unit="q", leave=False, disable=None):
        docs: list[Document] = retriever.invoke(q.text, k=k, min_similarity=None)
        terms = salient_terms(q.text)
        lang = question_language(q.text)
        qv = vectors.question(q.text)
        cards = []
        for doc in docs:
            sentences = sentence_similarities(vectors, qv, doc.page_content)
            text = f"{doc.metadata.get(md.TITLE, '')}\n{doc.page_content}"
            language = str(doc.metadata.get(md.LANGUAGE) or text_language(doc.page_content))
            feats, missing = card_features(
                q.text, terms, lang, text, language, float(doc.metadata[md.SCORE]), sentences
            )
            cards.append((str(doc.id), feats, missing))
        out.append(Scored(q, cards))
    return out


def held_out_ids(qs: Sequence[Question]) -> set[str]:
    """The held-out part's ids: :func:`cardrag.evals.split.split` by source, language, kind."""
    strata = {q.qid: f"{q.source}|{q.language}|{q.kind}" for q in qs}
    _, held_out = split([q.qid for q in qs], strata)
    return set(held_out)


def parts(scored: Sequence[Scored]) -> tuple[list[Scored], list[Scored]]:
    """(tuning, held-out), as :func:`held_out_ids` splits the questions."""
    held = held_out_ids([s.question for s in scored])
    return [s for s in scored if s.question.qid not in held], [
        s for s in scored if s.question.qid in held
    ]


def training_rows(scored: Sequence[Scored]) -> tuple[np.ndarray, np.ndarray]:
    """Features and labels of the cards the fit learns from.

    Positive: a golden question's answering card. Negative: every card retrieved for an
    uncovered question. Other cards of golden questions are left out (they may answer in
    part); so are cards lacking a medical term of the question (grading drops them anyway).
    """
    x: list[list[float]] = []
    y: list[int] = []
    for s in scored:
        for card_id, feats, missing in s.cards:
            if missing or (s.question.answerable and card_id not in s.question.answers):
                continue
            x.append([feats[name] for name in FEATURES])
            y.append(int(s.question.answerable))
    return np.array(x), np.array(y)


def fit(x: np.ndarray, y: np.ndarray, model: str) -> Calibration:
    """Ridge logistic regression on standardised features (Newton's method), no threshold."""
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    a = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    w = np.zeros(a.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-a @ w))
        hessian = a.T @ (a * (p * (1 - p))[:, None]) + L2 * np.eye(len(w))
        w -= np.linalg.solve(hessian, a.T @ (p - y) + L2 * w)
    return Calibration(model, tuple(mean), tuple(scale), tuple(w[:-1]), float(w[-1]), 0.0)


def question_score(s: Scored, calibration: Calibration) -> float:
    """The best answerability over the question's cards (-inf when every card lacks a term)."""
    values = [calibration.answerability(f) for _, f, missing in s.cards if not missing]
    return max(values, default=float("-inf"))


def choose_threshold(tuning: Sequence[Scored], calibration: Calibration) -> float:
    """The highest threshold refusing at most the budgeted share of tuning golden questions."""
    golden = sorted(question_score(s, calibration) for s in tuning if s.question.answerable)
    allowed = int(FALSE_REFUSAL_BUDGET * len(golden))
    return golden[allowed] - THRESHOLD_MARGIN


def auroc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """The probability that an answerable question outscores an uncovered one (ties: half)."""
    if not positive or not negative:
        return float("nan")
    p, n = np.array(positive)[:, None], np.array(negative)[None, :]
    return float(((p > n).sum() + 0.5 * (p == n).sum()) / (p.size * n.size))


SIGNALS: dict[str, Any] = {
    "top similarity (the gate's score)": lambda s: max(
        (f["score"] for _, f, _ in s.cards), default=0
    ),
    "best sentence": lambda s: max((f["sentence"] for _, f, _ in s.cards), default=0),
    "mean sentence": lambda s: max((f["mean_sentence"] for _, f, _ in s.cards), default=0),
    "salient terms (a card mentions all)": lambda s: float(any(not m for _, _, m in s.cards)),
    "content coverage (same language)": lambda s: max(
        (f["coverage"] for _, f, _ in s.cards), default=0
    ),
    "aspect coverage (same language)": lambda s: max(
        (f["aspect"] for _, f, _ in s.cards), default=0
    ),
}
"""Each signal alone, as a question-level score (higher: more answerable)."""


def evaluate(held_out: Sequence[Scored], calibration: Calibration) -> dict[str, Any]:
    """The held-out figures: AUROCs, refusal rates by source, language and kind."""
    pos = [s for s in held_out if s.question.answerable]
    neg = [s for s in held_out if not s.question.answerable]
    aurocs = {name: auroc([f(s) for s in pos], [f(s) for s in neg]) for name, f in SIGNALS.items()}
    aurocs["combined (grading)"] = auroc(
        [question_score(s, calibration) for s in pos], [question_score(s, calibration) for s in neg]
    )
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for s in held_out:
        refused = int(question_score(s, calibration) < calibration.threshold)
        q = s.question
        for key in (q.source, f"{q.source} {q.language}", f"{q.source} {q.kind}"):
            counts[key][0] += 1
            counts[key][1] += refused
    rates = {
        key: {"questions": n, "refused": r, "rate": round(r / n, 3)}
        for key, (n, r) in sorted(counts.items())
    }
    return {"auroc": {k: round(v, 3) for k, v in aurocs.items()}, "refusal": rates}


def calibrate(
    qs: Sequence[Question],
    retriever: ScoredParentDocumentRetriever,
    embeddings: Embeddings,
    model: str,
    k: int,
) -> tuple[Calibration, dict[str, Any]]:
    """Fit on the tuning part, threshold on the tuning part, figures on the held-out part."""
    scored = featurise(qs, retriever, embeddings, k)
    tuning, held_out = parts(scored)
    x, y = training_rows(tuning)
    fitted = fit(x, y, model)
    threshold = choose_threshold(tuning, fitted)
    calibration = Calibration(
        model, fitted.mean, fitted.scale, fitted.weights, fitted.bias, threshold
    )
    report = {
        "tuning_questions": len(tuning),
        "held_out_questions": len(held_out),
        "weights": dict(zip(FEATURES, (round(w, 3) for w in calibration.weights), strict=True)),
        "threshold": round(threshold, 3),
        "held_out": evaluate(held_out, calibration),
        "tuning": evaluate(tuning, calibration)["refusal"],
    }
    return calibration, report


def write_calibration(calibration: Calibration, path: Path = CALIBRATION_FILE) -> None:
    """Store (or replace) one model's calibration in the app's calibration file."""
    stored = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    stored[calibration.model] = {
        "mean": [round(v, 6) for v in calibration.mean],
        "scale": [round(v, 6) for v in calibration.scale],
        "weights": [round(v, 6) for v in calibration.weights],
        "bias": round(calibration.bias, 6),
        "threshold": round(calibration.threshold, 6),
        "features": list(FEATURES),
    }
    path.write_text(json.dumps(stored, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Fit, report and (with ``--write``) store the calibration for the configured model."""
    import tempfile

    from cardrag.evals.systems import build, cached
    from cardrag.ingest.cards import load_cards
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
        cards = [c.to_document() for c in load_cards(settings.cards_dir)]
        retriever = build(cards, embeddings, settings, Path(tmp))
        calibration, report = calibrate(
            questions(), retriever, embeddings, settings.embedding_model, settings.k
        )
    print(json.dumps(report, indent=2))
    if args.write:
        write_calibration(calibration)
        print(f"calibration for {calibration.model} written to {CALIBRATION_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def refusals(qs: Sequence[Question], ask: Any) -> dict[str, Any]:
    """Refusal rates of the uncovered questions through the app (``ask(text) -> Reply``).

    Rates per source, language and kind, on the held-out part and on every question.
    """
    held = held_out_ids(qs)
    counts: dict[str, dict[str, list[int]]] = {"held_out": defaultdict(lambda: [0, 0])}
    counts["all"] = defaultdict(lambda: [0, 0])
    examples: list[dict[str, str]] = []
    for q in tqdm(qs, desc="uncovered answers", unit="q", leave=False, disable=None):
        if q.answerable:
            continue
        reply = ask(q.text)
        for part in ("all", "held_out") if q.qid in held else ("all",):
            for key in (q.source, f"{q.source} {q.language}", f"{q.source} {q.kind}"):
                counts[part][key][0] += 1
                counts[part][key][1] += int(reply.refused)
        if not reply.refused and q.qid in held:
            cited = [c.id for c in reply.citations]
            examples.append({"question": q.text, "cited": ", ".join(cited)})
    return {
        part: {
            key: {"questions": n, "refused": r, "rate": round(r / n, 3)}
            for key, (n, r) in sorted(table.items())
        }
        for part, table in counts.items()
    } | {"answered_held_out": examples}
