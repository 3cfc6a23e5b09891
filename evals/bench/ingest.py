"""Ingest throughput against raw embedding of the same texts, and a cold ``make ingest``."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from cardrag.ingest.cards import Card
from cardrag.ingest.index import build_index
from cardrag.ingest.settings import PROJECT_ROOT, Settings
from cardrag.ingest.splitter import CardSplitter


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
    """Wall time and summary line of ``python -m cardrag.ingest`` in a fresh process."""
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
    """Cold ``python -m cardrag.ingest`` runs on the shipped cards, each in a fresh process.

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


PUBMEDQA = PROJECT_ROOT.parent / "shared" / "datasets" / "pubmedqa-pqal"
"""1,000 PubMedQA abstracts: the larger knowledge base of the re-ingest benchmark."""


def thousand(workdir: Path, settings: Settings) -> dict[str, Any]:
    """:func:`measure_thousand` in a fresh process (its model threads are fixed at load time).

    Empty when ``../shared`` is absent.
    """
    if not (PUBMEDQA / "corpus.jsonl").is_file():
        return {}
    code = "import json, sys; from cardrag.evals.bench.ingest import measure_thousand; "
    code += "print(json.dumps(measure_thousand(sys.argv[1])))"
    env = {**os.environ, "CARDRAG_EMBEDDING_MODEL": settings.embedding_model, "TQDM_DISABLE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(workdir / "thousand")],
        cwd=PROJECT_ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure_thousand(store: str, edits: int = 10) -> dict[str, Any]:
    """A first ingest of 1,000 PubMedQA abstracts, then one after editing ``edits`` of them.

    Every core for the model (as ``cardrag ingest``), with the embedding cache.
    """
    from cardrag.evals.datasets import load_beir
    from cardrag.ingest.embeddings import LazyEmbeddings
    from cardrag.ingest.index import LocalGenerations, build
    from cardrag.ingest.index.cache import EmbeddingCache

    settings = Settings()
    docs = load_beir(PUBMEDQA, "paragraph").cards
    generations = LocalGenerations(Path(store))
    cache = EmbeddingCache(Path(store), settings.embedding_model)
    model = LazyEmbeddings(settings.embedding_model, os.cpu_count() or 1)
    splitter = CardSplitter.from_settings(settings)
    timings = []
    for round_ in range(2):
        cards = [_Parent(d, edited=round_ == 1 and i < edits) for i, d in enumerate(docs)]
        started = time.perf_counter()
        index, _ = build(cards, generations, model, splitter, progress=False, cache=cache)  # type: ignore[arg-type]
        timings.append((time.perf_counter() - started, index.manifest["changes"]))
    (first, made), (second, changed) = timings
    return {
        "cards": len(docs),
        "threads": os.cpu_count() or 1,
        "first_s": round(first, 1),
        "first_embedded": made["embedded"],
        "edited": edits,
        "reingest_s": round(second, 1),
        "reingest_embedded": changed["embedded"],
        "ratio": round(second / first, 3),
    }


class _Parent:
    """A dataset document in the shape ``build`` reads cards in (``to_document``)."""

    def __init__(self, doc: Any, *, edited: bool) -> None:
        self.doc = doc
        self.edited = edited

    def to_document(self) -> Any:
        if not self.edited:
            return self.doc
        return type(self.doc)(
            id=self.doc.id,
            page_content=self.doc.page_content + " Edited.",
            metadata=self.doc.metadata,
        )
