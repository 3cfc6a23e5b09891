"""``make eval``: retrieval side by side, app-level checks, red team, report, and the CI gate.

``python -m cardrag.evals.run`` runs the golden set on the shipped cards (and the red team) and
exits non-zero on a regression; ``--dataset FOLDER --level article`` runs the same retrieval
comparison on a BEIR-like folder (no gate). Both update ``evals/report.{json,md}``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import statistics
import sys
import tempfile
import time
import tomllib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from tqdm.auto import tqdm

from cardrag.app.context import Context, across_gate, glossary_of, grader_for, names_of
from cardrag.app.extractive import ExtractiveAnswerer
from cardrag.app.graph import answer
from cardrag.app.prompts import GATE_REASON
from cardrag.app.reply import Reply
from cardrag.evals.answerability import evaluate as grade_figures
from cardrag.evals.answerability import featurise, parts, questions, refusals
from cardrag.evals.cases import (
    GOLDEN,
    REDTEAM,
    REDTEAM_CARDS,
    Expectation,
    citation_precision,
    load_golden_cases,
    load_redteam_cases,
    redteam_failures,
    ungrouped,
)
from cardrag.evals.datasets import Dataset, Level, load_beir, load_golden
from cardrag.evals.gate import offtopic_refusals
from cardrag.evals.judge.report import judge_entry
from cardrag.evals.matrix import matrix_checks
from cardrag.evals.metrics import evaluate
from cardrag.evals.names import names_checks
from cardrag.evals.partial import partial_checks
from cardrag.evals.regressions import THRESHOLDS, regressions
from cardrag.evals.report import machine, print_golden, print_table, update_report
from cardrag.evals.systems import (
    SystemRun,
    build,
    cached,
    describe,
    reranker_available,
    run_systems,
)
from cardrag.ingest import metadata as md
from cardrag.ingest.cards import Card
from cardrag.ingest.corpus import card_aliases, load_cards
from cardrag.ingest.embeddings import load_embeddings
from cardrag.ingest.settings import Settings
from cardrag.ingest.splitter import CardSplitter
from cardrag.retrievers.parent import ScoredParentDocumentRetriever

EVALS_DIR = Path(__file__).resolve().parent
APP_SAMPLE = 100  # questions of a shared dataset answered through the whole graph
APP_SEED = 0  # the sample's seed: the same questions every run


def compare(
    dataset: Dataset, embeddings: Embeddings, settings: Settings, workdir: Path
) -> dict[str, Any]:
    """Retrieval metrics of every system on one dataset, plus per-kind figures for ours."""
    rows = CardSplitter.from_settings(settings).split_documents(dataset.cards)  # and card rows
    started = time.perf_counter()
    runs = run_systems(dataset.cards, dataset.queries, embeddings, settings, workdir)
    systems = {r.name: {**evaluate(dataset.qrels, r.run), **_extra(r)} for r in runs}
    ours = next(r for r in runs if r.name == "ours")
    by_kind: dict[str, dict[str, float]] = {}
    for kind in sorted(set(dataset.kinds.values()) - {""}):
        qrels = {q: rel for q, rel in dataset.qrels.items() if dataset.kinds.get(q) == kind}
        by_kind[kind] = {"queries": len(qrels), **evaluate(qrels, ours.run)}
    return {
        "license": dataset.license,
        "cards": len(dataset.cards),
        "children": sum(md.row_kind(c.metadata[md.CHUNK_INDEX]) != "sentence" for c in rows),
        "queries": len(dataset.queries),
        "seconds": round(time.perf_counter() - started, 1),
        "ours": describe(settings),
        "systems": systems,
        "by_kind": by_kind,
    }


def _extra(run: SystemRun) -> dict[str, float]:
    return {"parents@5": round(run.parents_per_query, 3), "ms/query": round(run.ms_per_query, 2)}


def offline_context(
    cards: Sequence[Card | Document],
    embeddings: Embeddings,
    settings: Settings,
    workdir: Path,
    answerer: ExtractiveAnswerer,
) -> Context:
    """Index ``cards`` as the settings say; a graph context with the offline answerer."""
    docs = [c if isinstance(c, Document) else c.to_document() for c in cards]
    retriever = build(docs, embeddings, settings, workdir, gated=True)
    assert answerer.vectors is not None  # made with the answerer
    grader = grader_for(settings, answerer.vectors)
    return Context(
        retriever=retriever,
        k=settings.k,
        answerer=answerer,
        grader=grader,
        across_min_similarity=across_gate(settings, grader),
        names=names_of(retriever, card_aliases(c for c in cards if isinstance(c, Card))),
        glossary=glossary_of(retriever),
    )


def app_checks(ctx: Context) -> dict[str, Any]:
    """Answer every golden case through the graph (offline answerer, real gate, grading)."""
    precisions: list[float] = []
    refused = uncited = 0
    times: list[float] = []
    replies: list[Reply] = []
    cases = load_golden_cases(GOLDEN)
    for case in tqdm(cases, desc="golden answers", unit="q", leave=False, disable=None):
        started = time.perf_counter()
        reply = answer(case.query, ctx)
        times.append(time.perf_counter() - started)
        replies.append(reply)
        refused += reply.refused
        uncited += reply.uncited
        p = citation_precision([c.id for c in reply.citations], case.must_cite_one_of)
        if p is not None:
            precisions.append(p)
    multi_card, mixed = ungrouped(replies)
    return {
        "golden_cases": len(cases),
        "citation_precision": round(statistics.mean(precisions), 4) if precisions else 0.0,
        "false_refusal_rate": round(refused / len(cases), 4),
        "uncited_rate": round(uncited / len(cases), 4),
        # answers quoting several cards, and those that do not group them under their titles
        "multi_card": multi_card,
        "ungrouped": mixed,
        "ms/answer": round(1000 * statistics.median(times), 1),
    }


def dataset_app_checks(dataset: Dataset, ctx: Context, sample: int = APP_SAMPLE) -> dict[str, Any]:
    """Answer a seeded sample of a shared dataset's questions through the graph.

    Every question has a card that answers it, so a refusal is a false one: what the similarity
    gate and grading, both calibrated on the medication cards, do to another corpus. No
    timing: the extractive answerer and grading embed a card's sentences the first time they
    read it, so the time depends on what the vector cache holds (``make bench`` times ``/ask``).
    """
    qids = sorted(dataset.queries)
    random.Random(APP_SEED).shuffle(qids)
    asked = qids[:sample]
    by_gate = by_grading = relevant = 0
    for qid in tqdm(asked, desc="answers", unit="q", leave=False, disable=None):
        reply = answer(dataset.queries[qid], ctx)
        if reply.refused:
            by_gate += reply.refusal_reason == GATE_REASON
            by_grading += reply.refusal_reason != GATE_REASON
        else:
            relevant += any(c.id in dataset.qrels[qid] for c in reply.citations)
    answered = len(asked) - by_gate - by_grading
    return {
        "questions": len(asked),
        "false_refusal_rate": round((by_gate + by_grading) / len(asked), 4),
        "refused_by_the_gate": by_gate,
        "refused_by_grading": by_grading,
        "answered_citing_a_relevant_card": round(relevant / answered, 4) if answered else 0.0,
    }


def answerability(ctx: Context, embeddings: Embeddings, threads: int = 1) -> dict[str, Any]:
    """Grading on the golden, uncovered and PubMedQA questions, held-out part first.

    Refusal rates come from the whole graph (gate, grading, answer); the AUROCs score the
    committed calibration's answerability of each question (gate off) against its label, and
    each signal alone is also measured at a threshold chosen on the tuning part. The English
    cross-encoder is among the signals when the ``rerank`` extra is installed.
    """
    qs = questions()
    calibration = ctx.grader.calibrations if ctx.grader is not None else None
    replies: list[Reply] = []

    def ask(text: str) -> Reply:
        replies.append(answer(text, ctx))
        return replies[-1]

    out: dict[str, Any] = {"refusal": refusals(qs, ask)}
    for part, table in offtopic_refusals(ask).items():
        out["refusal"][part].update(table)
    # translated, uncovered and PubMedQA answers quoting several cards, and those ungrouped
    out["multi_card"], out["ungrouped"] = ungrouped(replies)
    if calibration is not None and isinstance(ctx.retriever, ScoredParentDocumentRetriever):
        cross_encoder = None
        if reranker_available():
            from cardrag.retrievers.rerank import load_cross_encoder

            cross_encoder = load_cross_encoder(threads)
        scored = featurise(qs, ctx.retriever, embeddings, ctx.k, cross_encoder, ctx.read)
        tuning, held_out = parts(scored)
        figures = grade_figures(held_out, calibration, tuning)
        out["held_out_auroc"] = figures["auroc"]
        out["held_out_auroc_by_language"] = figures["auroc_by_language"]
        out["signal_pairs"] = figures["signal_pairs"]
    return out


def redteam(
    embeddings: Embeddings, settings: Settings, workdir: Path, answerer: ExtractiveAnswerer
) -> dict[str, Any]:
    """Run every red-team case on the shipped cards plus the red-team cards."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    cards = load_cards(settings.cards_dir) + load_cards(REDTEAM_CARDS)
    restricted = [c.id for c in cards if c.sensitivity == "restricted"]
    base = offline_context(cards, embeddings, settings, workdir, answerer)
    results = []
    off_topic = refused_off_topic = 0
    for case in load_redteam_cases(REDTEAM):
        runs: list[tuple[str, Context, Expectation]] = [("offline", base, case.expect)]
        if case.scripted_reply is not None and case.expect_scripted is not None:
            reply_json = case.scripted_reply.model_dump_json()
            model = GenericFakeChatModel(messages=iter([AIMessage(content=reply_json)]))
            scripted = replace(base, chat_model=model)
            runs.append(("scripted", scripted, case.expect_scripted))
        for mode, ctx, expect in runs:
            reply = answer(case.query, ctx)
            failures = redteam_failures(expect, reply, restricted)
            results.append(
                {
                    "case_id": case.case_id,
                    "kind": case.kind,
                    "mode": mode,
                    "passed": not failures,
                    "failures": failures,
                }
            )
            if case.kind == "off_topic" and mode == "offline":
                off_topic += 1
                refused_off_topic += reply.refused
    return {
        "cases": len(results),
        "passed": sum(r["passed"] for r in results),
        "off_topic_refusal_rate": round(refused_off_topic / off_topic, 4) if off_topic else None,
        "results": results,
    }


def run_dataset(
    folder: Path, level: Level, embeddings: Embeddings, settings: Settings, header: dict[str, Any]
) -> int:
    """The retrieval comparison and the app's checks on a shared dataset (no gate)."""
    with tempfile.TemporaryDirectory(prefix="cardrag-eval-") as tmp:
        work = Path(tmp)
        dataset = load_beir(folder, level)
        entry = {**header, **compare(dataset, embeddings, settings, work / "dataset")}
        answerer = ExtractiveAnswerer(embeddings, shipped_judge=True)
        app = offline_context(dataset.cards, embeddings, settings, work / "app", answerer)
        entry["app"] = dataset_app_checks(dataset, app)
    update_report(EVALS_DIR, dataset.name, entry)
    print_table(dataset.name, entry)
    print(f"\napp: {entry['app']}")
    return 0


def golden_entry(embeddings: Embeddings, settings: Settings, work: Path) -> dict[str, Any]:
    """Golden retrieval side by side, the app's checks, the red team and answerability."""
    dataset = load_golden(GOLDEN, settings.cards_dir)
    entry = compare(dataset, embeddings, settings, work / "golden")
    answerer = ExtractiveAnswerer(embeddings, shipped_judge=True)  # one cache for every run
    cards = load_cards(settings.cards_dir)
    app = offline_context(cards, embeddings, settings, work / "app", answerer)
    entry["app"] = app_checks(app)
    windowed = settings.model_copy(update={"chunker": "sentence_window"})
    entry["app_sentence_window"] = app_checks(
        offline_context(cards, embeddings, windowed, work / "app-sentences", answerer)
    )
    entry["redteam"] = redteam(embeddings, settings, work / "redteam", answerer)
    entry["answerability"] = answerability(app, embeddings, settings.threads)  # same app
    # brand-name questions, as shipped and read as written (names off), same run
    entry["names"] = names_checks(lambda text: answer(text, app))
    entry["names_as_written"] = names_checks(lambda text: answer(text, replace(app, names=None)))
    entry["partial"] = partial_checks(lambda text: answer(text, app))
    entry["matrix"] = matrix_checks(lambda text: answer(text, app))
    entry["judge"] = judge_entry(settings)  # the answer judge alone, beside the cosine
    dictionary_only = replace(app, names=names_of(app.retriever))  # the cards' aliases left out
    entry["names_dictionary_only"] = names_checks(lambda text: answer(text, dictionary_only))
    return entry


def main(argv: list[str] | None = None) -> int:
    """Run the evaluation; exit 1 when the gate fails."""
    parser = argparse.ArgumentParser(prog="python -m cardrag.evals.run", description=__doc__)
    parser.add_argument(
        "--dataset", type=Path, default=None, help="a BEIR-like folder (../shared/datasets/...)"
    )
    parser.add_argument("--level", choices=["paragraph", "article"], default="paragraph")
    args = parser.parse_args(argv)
    settings = Settings()
    # each distinct text is embedded once per run, however many indexes it goes into
    embeddings = cached(
        load_embeddings(settings.embedding_model, settings.threads), settings.embedding_model
    )
    header = {
        "run_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "embedding_model": settings.embedding_model,
        "threads": settings.threads,
        "chunk_size": settings.chunk_size,
        "chunk_overlap": settings.chunk_overlap,
        "k": settings.k,
    }
    if args.dataset is not None:
        return run_dataset(args.dataset, args.level, embeddings, settings, header)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cardrag-eval-") as tmp:
        entry = {**header, **golden_entry(embeddings, settings, Path(tmp))}
        entry["eval_seconds"] = round(time.perf_counter() - started, 1)
    update_report(EVALS_DIR, "golden", entry)
    print_golden(entry)
    thresholds = (
        tomllib.loads(THRESHOLDS.read_text(encoding="utf-8")) if THRESHOLDS.exists() else {}
    )
    problems = regressions(entry, thresholds)
    for problem in problems:
        print(f"GATE FAILED: {problem}", file=sys.stderr)
    print("gate: " + ("FAILED" if problems else "passed") + f" ({entry['eval_seconds']} s)")
    return 1 if problems else 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    raise SystemExit(main())
