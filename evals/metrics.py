"""Ranking metrics on parent ids, in the shapes ranx and BEIR use.

``qrels``: ``{query_id: {doc_id: relevance}}`` (relevance > 0 is relevant).
``run``: ``{query_id: {doc_id: score}}`` (higher is better; ties broken by doc id).

Each metric returns per-query values; :func:`mean` averages them over the qrels' queries (a
query missing from the run scores 0).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Mapping[str, float]]
PerQuery = dict[str, float]


def ranked(results: Mapping[str, float], k: int) -> list[str]:
    """The top ``k`` doc ids, by score descending, then doc id."""
    return [doc for doc, _ in sorted(results.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]


def recall_at_k(qrels: Qrels, run: Run, k: int) -> PerQuery:
    """Recall@k = |relevant ∩ top-k| / |relevant|."""
    out = {}
    for qid, rels in qrels.items():
        relevant = {d for d, r in rels.items() if r > 0}
        top = ranked(run.get(qid, {}), k)
        out[qid] = len(relevant.intersection(top)) / len(relevant) if relevant else 0.0
    return out


def hit_rate_at_k(qrels: Qrels, run: Run, k: int) -> PerQuery:
    """Hit@k = 1 if any relevant doc is in the top k, else 0."""
    out = {}
    for qid, rels in qrels.items():
        relevant = {d for d, r in rels.items() if r > 0}
        out[qid] = 1.0 if relevant.intersection(ranked(run.get(qid, {}), k)) else 0.0
    return out


def mrr_at_k(qrels: Qrels, run: Run, k: int) -> PerQuery:
    """MRR@k = 1 / rank of the first relevant doc within the top k, else 0."""
    out = {}
    for qid, rels in qrels.items():
        out[qid] = 0.0
        for rank, doc in enumerate(ranked(run.get(qid, {}), k), 1):
            if rels.get(doc, 0) > 0:
                out[qid] = 1.0 / rank
                break
    return out


def ndcg_at_k(qrels: Qrels, run: Run, k: int) -> PerQuery:
    """nDCG@k with linear gains: DCG = sum(rel_i / log2(i + 1)), normalised by the ideal DCG."""
    out = {}
    for qid, rels in qrels.items():
        top = ranked(run.get(qid, {}), k)
        dcg = sum(rels.get(doc, 0) / math.log2(i + 1) for i, doc in enumerate(top, 1))
        ideal = sorted((r for r in rels.values() if r > 0), reverse=True)[:k]
        idcg = sum(r / math.log2(i + 1) for i, r in enumerate(ideal, 1))
        out[qid] = dcg / idcg if idcg else 0.0
    return out


def mean(per_query: PerQuery) -> float:
    """Mean over queries (0.0 for none)."""
    return sum(per_query.values()) / len(per_query) if per_query else 0.0


METRICS: dict[str, tuple[Callable[[Qrels, Run, int], PerQuery], int]] = {
    "recall@1": (recall_at_k, 1),
    "recall@5": (recall_at_k, 5),
    "mrr@10": (mrr_at_k, 10),
    "ndcg@10": (ndcg_at_k, 10),
    "hit@5": (hit_rate_at_k, 5),
}
"""The report's metrics: name -> (function, k)."""


def evaluate(qrels: Qrels, run: Run) -> dict[str, float]:
    """Every metric in :data:`METRICS`, averaged over the qrels' queries."""
    return {name: mean(fn(qrels, run, k)) for name, (fn, k) in METRICS.items()}
