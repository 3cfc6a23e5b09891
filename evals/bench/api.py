"""``POST /ask`` over HTTP: the web API's latency on the shipped corpus, one client."""

from __future__ import annotations

import statistics
import time
from typing import Any

import httpx

from cardrag.app.server import create_app, running
from cardrag.evals.bench.latency import percentile
from cardrag.ingest.settings import Settings


def ask_latency(settings: Settings, warm: list[str], timed: list[str]) -> dict[str, Any]:
    """Median and p95 of one sequential ``/ask`` per question of ``timed``, after a warm-up.

    The warm-up asks every question of ``warm`` once, so the cards' sentences are embedded
    (once per server process); then the server forgets the question vectors it keeps, so each
    timed question is embedded as a user's new question is.
    """
    times: list[float] = []
    app = create_app(settings)
    with running(settings, app=app) as base, httpx.Client(base_url=base, timeout=120) as client:
        for q in warm:
            client.post("/ask", json={"question": q}).raise_for_status()
        app.state.service.embeddings.clear()
        for q in timed:
            started = time.perf_counter()
            client.post("/ask", json={"question": q}).raise_for_status()
            times.append(time.perf_counter() - started)
    return {
        "requests": len(timed),
        "p50_ms": round(1000 * statistics.median(times), 1),
        "p95_ms": round(1000 * percentile(times, 95), 1),
    }


def grading_cost(settings: Settings, warm: list[str], timed: list[str]) -> dict[str, Any]:
    """``/ask`` with grading off, then on, then on without the answer judge (same run)."""
    off = ask_latency(settings.model_copy(update={"grading": False}), warm, timed)
    on = ask_latency(settings.model_copy(update={"grading": True}), warm, timed)
    unjudged = ask_latency(settings.model_copy(update={"answer_judge": False}), warm, timed)
    return {
        "off": off,
        "on": on,
        "added_p50_ms": round(on["p50_ms"] - off["p50_ms"], 1),
        "judge off": unjudged,
        "judge_added_p50_ms": round(on["p50_ms"] - unjudged["p50_ms"], 1),
    }
