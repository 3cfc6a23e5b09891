"""Growth: retrieval latency and peak memory at 1k, 10k and 100k synthetic cards.

Each size runs in its own process (``python -m cardrag.evals.bench.growth --cards N``) so its peak
memory is its own. Embedding 100k cards with the real model would take hours on 2 cores, and
the query embedding costs the same at any store size; so the stores here are filled with a
deterministic hashed embedding (384 dimensions, like all-MiniLM-L6-v2), and what is measured
is the part that grows: Chroma's HNSW search, BM25, the docstore and our fusion. The real
model's per-query embedding cost is in the latency table, measured on the shipped corpus.

Systems, on the same children: the floor (embed + one Chroma query of the first window),
card-atomic (one vector per card, our retriever), LangChain's ``ParentDocumentRetriever``
(vanilla, k children) and ours (the shipped settings: dense + BM25 + card rows, RRF).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from langchain_classic.retrievers import ParentDocumentRetriever
from langchain_core.embeddings import Embeddings
from langchain_core.stores import InMemoryStore

from cardrag.evals.bench.latency import percentile, timings
from cardrag.evals.bench.synthetic import WORDS, synthetic_cards
from cardrag.ingest import metadata as md
from cardrag.ingest.index import Index, chroma_client, open_collections, upsert_documents
from cardrag.ingest.lexical import BM25Index
from cardrag.ingest.settings import Settings
from cardrag.ingest.splitter import CardSplitter
from cardrag.retrievers.parent import ScoredParentDocumentRetriever

DIMENSIONS = 384


class HashedEmbeddings(Embeddings):
    """Deterministic bag-of-words vectors: each word hashed to a signed bucket, normalised."""

    def _embed(self, text: str) -> list[float]:
        vec = np.zeros(DIMENSIONS, dtype=np.float32)
        for word in text.lower().split():
            h = hashlib.blake2b(word.strip(".,?!:;").encode(), digest_size=8).digest()
            vec[int.from_bytes(h[:4], "little") % DIMENSIONS] += 1.0 if h[4] & 1 else -1.0
        norm = float(np.linalg.norm(vec)) or 1.0
        return [float(x) for x in vec / norm]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Vectors of the texts."""
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        """Vector of the question."""
        return self._embed(text)


def questions(n: int) -> list[str]:
    """``n`` deterministic card-vocabulary questions."""
    rng = np.random.default_rng(7)
    return [" ".join(rng.choice(WORDS, size=8)) + "?" for _ in range(n)]


def measure(cards: int, rounds: int) -> dict[str, Any]:
    """Build the stores for ``cards`` synthetic cards and time every system."""
    settings = Settings(embedding_model="hashed", min_similarity=-1.0)
    embeddings = HashedEmbeddings()
    docs = list(synthetic_cards(cards))
    with tempfile.TemporaryDirectory(prefix="cardrag-growth-") as tmp:
        started = time.perf_counter()
        stores = open_collections(chroma_client(Path(tmp) / "children"), embeddings)
        docstore = InMemoryStore()
        splitter = CardSplitter.from_settings(settings)
        upsert_documents(stores, docstore, splitter, docs, progress=True)
        bm25 = BM25Index.from_collections(
            stores.with_children(), stemmed=settings.bm25_stem_languages
        )
        build_s = time.perf_counter() - started
        atomic_stores = open_collections(chroma_client(Path(tmp) / "atomic"), embeddings)
        upsert_documents(atomic_stores, InMemoryStore(), CardSplitter(mode="none"), docs)
        index = Index(Path(tmp), stores, docstore, {}, bm25)
        ours = ScoredParentDocumentRetriever.from_index(index, settings)
        atomic = ScoredParentDocumentRetriever.over(atomic_stores, docstore=docstore, k=settings.k)
        vectorstore = stores.children
        vanilla = ParentDocumentRetriever(
            vectorstore=vectorstore,
            docstore=docstore,
            child_splitter=splitter,
            id_key=md.PARENT_ID,
            search_kwargs={"k": settings.k},
        )
        window = settings.k * settings.fetch_multiplier

        def floor(q: str) -> object:
            vector = embeddings.embed_query(q)
            return vectorstore.similarity_search_by_vector_with_relevance_scores(vector, k=window)

        asked = questions(30)
        systems: dict[str, Callable[[str], object]] = {
            "floor": floor,
            "card-atomic": atomic.invoke,
            "vanilla-pdr": vanilla.invoke,
            "ours": ours.invoke,
        }
        times = {name: timings(fn, asked, rounds) for name, fn in systems.items()}
        rows = stores.count()
    return {
        "cards": cards,
        "rows": rows,
        "build_s": round(build_s, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "p50_ms": {n: round(1000 * statistics.median(t), 2) for n, t in times.items()},
        "p95_ms": {n: round(1000 * percentile(t, 95), 2) for n, t in times.items()},
    }


def run_sizes(sizes: list[int], rounds: int) -> list[dict[str, Any]]:
    """Each size in a fresh process; returns their measurements."""
    out = []
    for size in sizes:
        cmd = [sys.executable, "-m", "cardrag.evals.bench.growth", "--cards", str(size)]
        cmd += ["--rounds", str(rounds), "--json"]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            msg = f"growth at {size} cards failed:\n{done.stderr[-2000:]}"
            raise RuntimeError(msg)
        out.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"  {size:,} cards: {out[-1]}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    """Measure one size and print it as one JSON line (``--json``) or readable."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cards", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = measure(args.cards, args.rounds)
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
