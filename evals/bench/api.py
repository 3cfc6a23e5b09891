"""``POST /ask`` over HTTP: the web API's latency on the shipped corpus, one client."""

from __future__ import annotations

import statistics
import time
from typing import Any

import httpx

from app.server import running
from evals.bench.latency import percentile
from ingest.settings import Settings


def ask_latency(settings: Settings, questions: list[str], requests: int = 100) -> dict[str, Any]:
    """Median and p95 of ``requests`` sequential ``/ask`` calls after 10 warm-up calls."""
    times: list[float] = []
    with running(settings) as base, httpx.Client(base_url=base, timeout=120) as client:
        for q in questions[:10]:
            client.post("/ask", json={"question": q}).raise_for_status()
        for i in range(requests):
            started = time.perf_counter()
            client.post("/ask", json={"question": questions[i % len(questions)]}).raise_for_status()
            times.append(time.perf_counter() - started)
    return {
        "requests": requests,
        "p50_ms": round(1000 * statistics.median(times), 1),
        "p95_ms": round(1000 * percentile(times, 95), 1),
    }
