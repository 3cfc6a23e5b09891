"""Ingest throughput against raw embedding of the same texts, and a cold ``make ingest``."""

from __future__ import annotations

import os
import shutil
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


def _ingest(store: Path, cards: Path, settings: Settings, threads: int) -> tuple[float, str]:
    """Wall time and summary line of ``python -m ingest`` in a fresh process."""
    env = {**os.environ, "CARDRAG_STORE_DIR": str(store), "TQDM_DISABLE": "1"}
    env["CARDRAG_EMBEDDING_MODEL"] = settings.embedding_model
    env["CARDRAG_INGEST_THREADS"] = str(threads)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ingest", "--cards", str(cards)],
        cwd=PROJECT_ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return round(time.perf_counter() - started, 1), done.stdout.strip().splitlines()[-1]


def embedded(line: str) -> int:
    """Texts embedded, from an ingest's summary line (``texts: N embedded``).

    Example:
        >>> embedded("... -> index-x; cards: 0 added, ...; texts: 7 embedded, 195 reused")
        7
    """
    return int(line.rsplit("texts: ", 1)[1].split(" embedded")[0])


def cold(workdir: Path, settings: Settings) -> dict[str, Any]:
    """Cold ``python -m ingest`` runs on the shipped cards, each in a fresh process.

    A first ingest with one model thread and with every core (fresh stores, the same run), then,
    on the one-thread store: a re-ingest of the unchanged cards (everything from the embedding
    cache: the model is not even loaded) and one after editing one card.
    """
    cards = workdir / "cold-cards"
    shutil.copytree(settings.cards_dir, cards)
    cores = os.cpu_count() or 1
    first, _ = _ingest(workdir / "cold", cards, settings, 1)
    both, _ = _ingest(workdir / "cold-all-cores", cards, settings, cores)
    unchanged, unchanged_line = _ingest(workdir / "cold", cards, settings, 1)
    card = sorted(cards.glob("*.md"))[0]
    card.write_text(card.read_text(encoding="utf-8") + "\nAsk your pharmacist.\n", "utf-8")
    edited, edited_line = _ingest(workdir / "cold", cards, settings, 1)
    return {
        "cold_ingest_s": first,
        "cold_ingest_all_cores_s": both,
        "cores": cores,
        "reingest_unchanged_s": unchanged,
        "reingest_unchanged_embedded": embedded(unchanged_line),
        "reingest_one_edit_s": edited,
        "reingest_one_edit_embedded": embedded(edited_line),
    }
