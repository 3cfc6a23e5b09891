"""The answer judge's cost: one question against 20 sentences, numpy, same run as ``/ask``.

Each golden (or translated) question is scored against 20 sentences of the shipped cards
(its own card's first, then the next cards'), as grading reads a few retrieved cards. Warm:
the sentences' side was computed before (it depends on the sentence alone and is kept, as the
app keeps it); cold: the judge's sentence cache is emptied before each question. The question
is new every time (its side is never kept).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any

from threadpoolctl import threadpool_limits

from cardrag.evals.bench.latency import percentile
from cardrag.evals.judge.data import card_sentences
from cardrag.ingest.cards import Card
from cardrag.retrievers.judge.model import Judge

SENTENCES = 20
"""Sentences a question is scored against."""
THREADS = 2
"""numpy's BLAS threads while measuring (the cores of the machine the targets are set for)."""


def sentences_for(card_ids: Sequence[str], cards: Sequence[Card]) -> list[str]:
    """The 20 sentences a question is scored against: its card's, then the next cards'."""
    by_id = {c.id: i for i, c in enumerate(cards)}
    at = by_id.get(card_ids[0], 0) if card_ids else 0
    out: list[str] = []
    while len(out) < SENTENCES:
        out += card_sentences(cards[at % len(cards)])
        at += 1
    return out[:SENTENCES]


def judge_cost(
    asked: Sequence[tuple[str, Sequence[str]]], cards: Sequence[Card], threads: int = THREADS
) -> dict[str, Any]:
    """Median and p95 ms of one question against 20 sentences, warm and cold.

    Args:
        asked: Each question with the cards that answer it (its sentences come first).
        cards: The shipped cards.
        threads: numpy's BLAS threads, set for the measurement.
    """
    judge = Judge.shipped()
    out: dict[str, Any] = {"threads": threads, "sentences": SENTENCES, "questions": len(asked)}
    with threadpool_limits(limits=threads):
        for question, card_ids in asked:  # warm-up: every sentence's side computed once
            judge.score(question, sentences_for(card_ids, cards))
        for mode in ("warm", "cold"):
            times = []
            for question, card_ids in asked:
                sentences = sentences_for(card_ids, cards)
                if mode == "cold":
                    judge.forget()
                started = time.perf_counter()
                judge.score(question, sentences)
                times.append(time.perf_counter() - started)
            out[mode] = {
                "p50_ms": round(1000 * statistics.median(times), 1),
                "p95_ms": round(1000 * percentile(times, 95), 1),
            }
    return out


def judge_section(api: dict[str, Any]) -> list[str]:
    """The judge's lines of the report: its own cost, and what it adds to ``/ask``."""
    cost = api.get("judge")
    if not cost:
        return []
    warm, cold = cost["warm"], cost["cold"]
    lines = [
        "",
        f"Answer judge (numpy, {cost['threads']} BLAS threads): one question against "
        f"{cost['sentences']} card sentences, {cost['questions']} golden questions: "
        f"p50 {warm['p50_ms']} ms (p95 {warm['p95_ms']}) with the sentences' side kept, as the "
        f"app keeps it; p50 {cold['p50_ms']} ms (p95 {cold['p95_ms']}) with every sentence "
        "read afresh.",
    ]
    added = {n: api[n]["judge_added_p50_ms"] for n in api if "judge_added_p50_ms" in api[n]}
    if added:
        said = ", ".join(f"{ms} ms ({n})" for n, ms in added.items())
        lines += ["", f"The answer judge adds {said} to the median `/ask` (grading on)."]
    return lines
