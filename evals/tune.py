"""``cardrag tune``: choose chunk budgets and fusion weights on a deployment's own questions.

1. The cases are split into a tuning part and a held-out part (fixed seed, stratified by
   ``kind`` where cases have one): :func:`cardrag.evals.split.split`.
2. Every candidate of a small grid (:data:`CHUNKINGS` x :data:`FUSIONS` x :data:`RRF_CS` x
   reranker off/on) is scored on the tuning part only, and the best is chosen
   (:func:`choose`: MRR@10, then recall@1, then recall@5). Embeddings are computed once per
   distinct chunking (:mod:`cardrag.evals.sweep`), query vectors and cross-encoder scores once.
3. Only then is every candidate scored on the held-out part, for the report. The winner
   replaces the current settings only if it beats them on the held-out part (MRR@10, then
   recall@1); otherwise the current settings stay.
4. The decision is written to a settings file (default ``cardrag.toml``) that ingest, ask,
   serve and eval read, environment variables still overriding, with the date, model, case
   set and held-out figures it was chosen on.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from tqdm.auto import tqdm

from cardrag.evals.datasets import Dataset
from cardrag.evals.metrics import evaluate
from cardrag.evals.split import SEED, part, split
from cardrag.evals.sweep import Built, build, chunking_key, run, shared_reranker
from cardrag.evals.systems import cached, configured, reranker_available
from cardrag.ingest.settings import Settings

CHUNKINGS: list[tuple[int, int]] = [(250, 0), (250, 60), (400, 0), (400, 60), (600, 0), (600, 60)]
"""``(chunk_size, chunk_overlap)``: the notebook found 250-800 close on cards, 150 worse."""
FUSIONS: list[dict[str, float]] = [
    {"dense_weight": 1.0, "bm25_weight": 1.0, "card_weight": 1.0},  # the shipped fusion
    {"dense_weight": 1.0, "bm25_weight": 1.0, "card_weight": 1.0, "sentence_weight": 0.5},
    {"dense_weight": 1.0, "bm25_weight": 1.0, "card_weight": 1.0, "sentence_weight": 0.0},
    {"dense_weight": 1.0, "bm25_weight": 0.75, "card_weight": 1.0},  # the fusion before issue 34
    {"dense_weight": 1.0, "bm25_weight": 0.5, "card_weight": 1.0},
    {"dense_weight": 1.0, "bm25_weight": 0.0, "card_weight": 1.0},  # no BM25
    {"dense_weight": 1.0, "bm25_weight": 1.0, "card_weight": 0.0},  # no whole-card row
    {"dense_weight": 0.5, "bm25_weight": 1.0, "card_weight": 0.5},  # lean on words (a language
    # the model reads poorly)
]
"""RRF weights of the dense, BM25 and whole-card rankings (and the sentence rows', where not
the current settings')."""
RRF_CS: list[int] = [20, 60]
"""Reciprocal rank fusion constants: 60 is the usual default, 20 sharpens the top ranks."""
TUNED_FIELDS = (
    "chunk_size",
    "chunk_overlap",
    "dense_weight",
    "bm25_weight",
    "card_weight",
    "sentence_weight",
    "rrf_c",
    "rerank",
)
"""What tuning may change (and writes to the settings file)."""


@dataclass
class Candidate:
    """One setting of the grid with its figures."""

    settings: Settings
    """The full settings (tuned fields changed, the rest as configured)."""
    tuning: dict[str, float]
    """Metrics on the tuning part."""
    held_out: dict[str, float] | None = None
    """Metrics on the held-out part (filled after the choice)."""

    @property
    def label(self) -> str:
        """A short description of the tuned fields."""
        s = self.settings
        return (
            f"{s.chunk_size}/{s.chunk_overlap} w={s.dense_weight:g}/{s.bm25_weight:g}/"
            f"{s.card_weight:g}/{s.sentence_weight:g} c={s.rrf_c}{' rerank' if s.rerank else ''}"
        )


def grid(base: Settings, *, rerank: bool) -> list[Settings]:
    """Every candidate: the current settings first, then the grid (without repeats)."""
    out = [base]
    seen = {tuned(base)}
    for size, overlap in CHUNKINGS:
        for fusion in FUSIONS:
            for c in RRF_CS:
                for reranked in [False, True] if rerank else [False]:
                    s = base.model_copy(
                        update={
                            "chunk_size": size,
                            "chunk_overlap": overlap,
                            "rrf_c": c,
                            "rerank": reranked,
                            **fusion,
                        }
                    )
                    if tuned(s) not in seen:
                        seen.add(tuned(s))
                        out.append(s)
    return out


def tuned(settings: Settings) -> tuple[Any, ...]:
    """The values of the tuned fields."""
    return tuple(getattr(settings, f) for f in TUNED_FIELDS)


def objective(metrics: Mapping[str, float]) -> tuple[float, float, float]:
    """What the choice maximises: MRR@10, then recall@1, then recall@5."""
    return (metrics["mrr@10"], metrics["recall@1"], metrics["recall@5"])


def choose(candidates: Sequence[Candidate]) -> Candidate:
    """The best candidate on the tuning part; ties go to the earlier (the current settings).

    Example:
        >>> a = Candidate(Settings(), {"mrr@10": 0.9, "recall@1": 0.8, "recall@5": 1.0})
        >>> b = Candidate(Settings(k=3), {"mrr@10": 0.9, "recall@1": 0.8, "recall@5": 1.0})
        >>> choose([a, b]) is a
        True
    """
    best = candidates[0]
    for candidate in candidates[1:]:
        if objective(candidate.tuning) > objective(best.tuning):
            best = candidate
    return best


def score_all(
    dataset: Dataset,
    settings: Sequence[Settings],
    indexes: dict[tuple[Any, ...], Built],
    embeddings: Embeddings,
    workdir: Path,
    desc: str,
) -> list[dict[str, float]]:
    """Metrics of each setting on a dataset part (indexes built once, shared by the parts)."""
    out = []
    for s in tqdm(settings, desc=desc, unit="cfg", disable=None):
        key = chunking_key(s)
        if key not in indexes:
            indexes[key] = build(dataset.cards, embeddings, s, workdir)
        retriever = configured(
            indexes[key].base, s.model_copy(update={"rerank": False}), indexes[key].bm25
        )
        if s.rerank:  # one cross-encoder, its scores shared by every candidate
            retriever.reranker = shared_reranker(s.threads)
        out.append(evaluate(dataset.qrels, run(retriever, dataset.queries)))
    return out


def tune(
    tuning: Dataset,
    held_out: Dataset,
    embeddings: Embeddings,
    base: Settings,
    workdir: Path,
    *,
    candidates: Sequence[Settings] | None = None,
) -> tuple[list[Candidate], Candidate, Candidate]:
    """Search on ``tuning``, then report on ``held_out``.

    Returns:
        Every candidate with both parts' figures, the tuning winner, and the decision (the
        winner if it beats the current settings on the held-out part, else the current ones).
    """
    if candidates is None:
        candidates = grid(base, rerank=reranker_available())
    settings = list(candidates)
    indexes: dict[tuple[Any, ...], Built] = {}
    on_tuning = score_all(tuning, settings, indexes, embeddings, workdir, "tuning part")
    rows = [Candidate(s, m) for s, m in zip(settings, on_tuning, strict=True)]
    winner = choose(rows)  # decided before the held-out part is read
    on_held_out = score_all(held_out, settings, indexes, embeddings, workdir, "held-out part")
    for row, metrics in zip(rows, on_held_out, strict=True):
        row.held_out = metrics
    current = rows[0]
    assert winner.held_out is not None
    assert current.held_out is not None
    better = objective(winner.held_out)[:2] > objective(current.held_out)[:2]
    return rows, winner, winner if better else current


def write_settings(
    path: Path,
    decision: Candidate,
    current: Candidate,
    provenance: Mapping[str, Any],
) -> None:
    """Write the decision as a settings file (TOML) with where it came from."""
    lines = [
        f"# Written by `cardrag tune` on {provenance['date']}. CARDRAG_* environment variables",
        "# still override these values. Delete this file to go back to the shipped defaults.",
    ]
    for field in TUNED_FIELDS:
        lines.append(f"{field} = {json.dumps(getattr(decision.settings, field))}")
    lines += ["", "[tuned]"]
    for key, value in provenance.items():
        lines.append(f"{key} = {json.dumps(value)}")
    lines.append(f"chosen = {json.dumps(decision.label)}")
    lines.append(f"held_out = {_inline(decision.held_out or {})}")
    lines.append(f"previous = {json.dumps(current.label)}")
    lines.append(f"previous_held_out = {_inline(current.held_out or {})}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _inline(metrics: Mapping[str, float]) -> str:
    return "{ " + ", ".join(f'"{k}" = {round(v, 4)}' for k, v in metrics.items()) + " }"


def table(rows: Sequence[Candidate], winner: Candidate, decision: Candidate) -> str:
    """Every candidate on both parts, as Markdown."""
    lines = [
        "| candidate | tune R@1 | tune R@5 | tune MRR@10 | held-out R@1 | held-out R@5 "
        "| held-out MRR@10 | |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        h = row.held_out or {}
        mark = " ".join(
            m
            for m, on in (
                ("current", row is rows[0]),
                ("winner", row is winner),
                ("chosen", row is decision),
            )
            if on
        )
        lines.append(
            f"| {row.label} | {row.tuning['recall@1']:.3f} | {row.tuning['recall@5']:.3f} "
            f"| {row.tuning['mrr@10']:.3f} | {h.get('recall@1', 0):.3f} "
            f"| {h.get('recall@5', 0):.3f} | {h.get('mrr@10', 0):.3f} | {mark} |"
        )
    return "\n".join(lines)


def provenance(
    dataset: Dataset, cases: str, base: Settings, tuning: Dataset, held_out: Dataset
) -> dict[str, Any]:
    """What the settings file records about how it was chosen."""
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "embedding_model": base.embedding_model,
        "cases": cases,
        "cards": len(dataset.cards),
        "tuning_questions": len(tuning.queries),
        "held_out_questions": len(held_out.queries),
        "seed": SEED,
    }


def main(argv: list[str] | None = None) -> int:
    """``cardrag tune``: split, search, report, write the settings file."""
    import argparse
    import os
    import tempfile

    from cardrag.evals.cases import GOLDEN
    from cardrag.evals.datasets import load_beir, load_golden
    from cardrag.ingest.embeddings import load_embeddings
    from cardrag.ingest.settings import SETTINGS_FILE

    parser = argparse.ArgumentParser(prog="cardrag tune", description=__doc__)
    parser.add_argument("--cases", type=Path, default=GOLDEN, help="golden cases (JSONL)")
    parser.add_argument("--cards", type=Path, default=None, help="card folder for --cases")
    parser.add_argument("--dataset", type=Path, default=None, help="a BEIR-like folder instead")
    parser.add_argument("--level", choices=["paragraph", "article"], default="paragraph")
    parser.add_argument("--max-questions", type=int, default=None, help="sample this many")
    parser.add_argument("--out", type=Path, default=None, help=f"default {SETTINGS_FILE.name}")
    parser.add_argument("--report", type=Path, default=None, help="also write the table here")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    base = Settings()
    if args.dataset is not None:
        dataset = load_beir(args.dataset, args.level)
        cases = f"{args.dataset.name}/{args.level}"
    else:
        dataset = load_golden(args.cases, args.cards or base.cards_dir)
        cases = str(args.cases)
    base = base.model_copy(update={"min_similarity": None})
    if args.max_questions is not None and args.max_questions < len(dataset.queries):
        keep = random.Random(SEED).sample(sorted(dataset.queries), args.max_questions)
        dataset = part(dataset, sorted(keep), f"{args.max_questions} sampled")
    tuning_ids, held_out_ids = split(list(dataset.queries), dataset.kinds)
    tuning, held_out = part(dataset, tuning_ids, "tuning"), part(dataset, held_out_ids, "held-out")
    embeddings = cached(load_embeddings(base.embedding_model, base.threads), base.embedding_model)
    started = dt.datetime.now(dt.UTC)
    with tempfile.TemporaryDirectory(prefix="cardrag-tune-") as tmp:
        rows, winner, decision = tune(tuning, held_out, embeddings, base, Path(tmp))
    seconds = (dt.datetime.now(dt.UTC) - started).total_seconds()
    text = table(rows, winner, decision)
    current = rows[0]
    if decision is not current:
        verdict = f"chosen: {decision.label}"
    elif winner is current:
        verdict = f"kept the current settings ({current.label}): nothing beat them on tuning"
    else:
        verdict = (
            f"kept the current settings ({current.label}): the tuning winner "
            f"({winner.label}) does not beat them on the held-out part"
        )
    summary = (
        f"{dataset.name}: {len(dataset.cards)} cards; {len(tuning.queries)} tuning and "
        f"{len(held_out.queries)} held-out questions; model {base.embedding_model}; "
        f"{len(rows)} candidates in {seconds:.0f} s.\n\n{text}\n\n{verdict}\n"
    )
    print(summary)
    out = args.out or SETTINGS_FILE
    write_settings(out, decision, rows[0], provenance(dataset, cases, base, tuning, held_out))
    print(f"settings written to {out}")
    if args.report is not None:
        args.report.write_text(f"# `cardrag tune`\n\n{summary}", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
