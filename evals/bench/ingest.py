"""Ingest throughput against raw embedding of the same texts, and a cold ``make ingest``."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from ingest.cards import Card
from ingest.index import build_index
from ingest.settings import PROJECT_ROOT, Settings
from ingest.splitter import CardSplitter


def throughput(
    cards: list[Card], embeddings: Embeddings, settings: Settings, workdir: Path, repeats: int
) -> dict[str, Any]:
    """Rows per second of the whole ingest against raw embedding of the same texts.

    The whole ingest is split, embed, Chroma, BM25, parents and the swap; the baseline is
    ``embed_documents`` of exactly the texts it embeds. They alternate, ``repeats`` times each.
    """
    splitter = CardSplitter.from_settings(settings)
    texts = [c.page_content for c in splitter.split_documents([c.to_document() for c in cards])]
    raw: list[float] = []
    full: list[float] = []
    for i in range(repeats):
        started = time.perf_counter()
        embeddings.embed_documents(texts)
        raw.append(time.perf_counter() - started)
        started = time.perf_counter()
        build_index(cards, workdir / f"store-{i}", embeddings, splitter, progress=False)
        full.append(time.perf_counter() - started)
    raw_rate = len(texts) / statistics.median(raw)
    ingest_rate = len(texts) / statistics.median(full)
    return {
        "rows": len(texts),
        "embed_rows_per_s": round(raw_rate, 2),
        "ingest_rows_per_s": round(ingest_rate, 2),
        "ratio": round(ingest_rate / raw_rate, 3),
    }


def cold(workdir: Path, settings: Settings) -> dict[str, Any]:
    """Wall time of ``python -m ingest`` on the shipped cards in a fresh process and store."""
    env = {**os.environ, "CARDRAG_STORE_DIR": str(workdir / "cold"), "TQDM_DISABLE": "1"}
    env["CARDRAG_EMBEDDING_MODEL"] = settings.embedding_model
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "ingest"], cwd=PROJECT_ROOT, env=env, check=True, capture_output=True
    )
    return {"cold_ingest_s": round(time.perf_counter() - started, 1)}
