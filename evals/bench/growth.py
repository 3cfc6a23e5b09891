"""Growth: worker start, memory and retrieval latency at 1k, 10k and 100k synthetic cards.

Embedding 100k cards with the real model would take hours on 2 cores, and the query
embedding costs the same at any store size; so the stores here are filled with a
deterministic hashed embedding (384 dimensions, like all-MiniLM-L6-v2), and what is measured
is the part that grows: Chroma's HNSW search, BM25, the docstore and our fusion. The real
model's per-query embedding cost is in the latency table, measured on the shipped corpus.

Each size runs in two processes of its own:

1. **build** (``--build``): ingest the synthetic cards into a store folder with the real
   ingest path (a generation with its Chroma collections, parent files, BM25 files and
   manifest), and a card-atomic store beside it. A store already built for the same number
   of cards is reused (``--store``), so a second run measures without rebuilding.
2. **worker** (``--serve``): a fresh process opens the store as a server worker would and
   reports the **open time** (the index: Chroma, parents, BM25), the **ready time** (open plus
   the first question, when Chroma loads the HNSW segments) and its **memory** (RSS) once
   ready, before anything else is opened. Then it times, on the same children: the floor (one
   unfiltered Chroma query of the first window), card-atomic (one vector per card, our
   retriever), LangChain's ``ParentDocumentRetriever`` (vanilla, k children) and ours (the
   shipped settings: dense + BM25 + card rows, RRF): p50 and p95 over
   :data:`QUESTIONS` questions after a warm-up pass.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import shutil
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

from cardrag.evals.bench.latency import interleaved_timings, percentile
from cardrag.evals.bench.synthetic import WORDS, synthetic_cards
from cardrag.ingest import metadata as md
from cardrag.ingest.index import build_index, open_index
from cardrag.ingest.index.generations import StoreMissingError
from cardrag.ingest.settings import Settings
from cardrag.ingest.splitter import CardSplitter
from cardrag.retrievers.parent import ScoredParentDocumentRetriever

DIMENSIONS = 384
MODEL = "hashed"
"""The manifest's model name for stores built with :class:`HashedEmbeddings`."""
QUESTIONS = 100
"""Questions timed per system (p95 is the 95th of them)."""
OURS, ATOMIC, WINDOWS = "ours", "atomic", "windows"
"""The store folders under a growth store (the sentence-window one for long parents only)."""
BUILT = "built.json"
"""Written into a growth store once both folders are built: cards, rows, build time."""


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
    return [" ".join(rng.choice(WORDS) for _ in range(8)) + "?" for _ in range(n)]


def settings(**changes: Any) -> Settings:
    """The shipped retrieval settings over the hashed model (no similarity gate)."""
    return Settings(embedding_model=MODEL, min_similarity=-1.0, **changes)


def built(store: Path) -> dict[str, Any] | None:
    """What :func:`build` recorded in ``store`` (None: nothing complete was built there)."""
    record = store / BUILT
    return json.loads(record.read_text(encoding="utf-8")) if record.is_file() else None


def holds(config: Settings) -> dict[str, Any]:
    """What a bench store holds that the settings decide: a store that holds otherwise is rebuilt.

    The model, the chunking, the rankings written beside the children (issue 51: stores
    built before sentence rows were shipped had a third of the rows, and measured the past)
    and what is saved beside the index (the rows' texts since they were).
    """
    return {
        "saved": ["vectors", "row_texts"],
        "model": MODEL,
        "chunker": config.chunker,
        "chunk_size": config.chunk_size,
        "chunk_overlap": config.chunk_overlap,
        "card_rows": config.uses_card_rows,
        "sentence_rows": config.uses_sentence_rows,
        "stemmed": sorted(config.bm25_stem_languages),
    }


def build(cards: int, store: Path, chars: int | None = None) -> dict[str, Any]:
    """Ingest ``cards`` synthetic cards into ``store`` (ours and card-atomic), unless there.

    ``chars``: parents of about that length (None: card-like); a sentence-window store is
    built beside them then, to time that chunker on long parents too. A store is reused only
    when it holds that many cards of that length, built with the shipped settings
    (:func:`holds`); any other is removed and built again.
    """
    config = settings()
    done = built(store)
    same = done is not None and (done["cards"], done.get("chars")) == (cards, chars)
    if done is not None and same and done.get("holds") == holds(config):
        return {**done, "reused": True}
    for name in (OURS, ATOMIC, WINDOWS, BUILT):  # what another size or settings left
        path = store / name
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    embeddings = HashedEmbeddings()
    extra = {"embedding_model": MODEL}
    deck = list(synthetic_cards(cards, chars=chars))
    started = time.perf_counter()
    index = build_index(
        deck,
        store / OURS,
        embeddings,
        CardSplitter.from_settings(config),
        extra_manifest=extra,
        stemmed=config.bm25_stem_languages,
    )
    build_s = round(time.perf_counter() - started, 1)
    rows = index.collections.count()
    index.close()
    build_index(
        deck, store / ATOMIC, embeddings, CardSplitter(mode="none"), extra_manifest=extra
    ).close()
    if chars is not None:
        windowed = settings(chunker="sentence_window")
        build_index(
            deck,
            store / WINDOWS,
            embeddings,
            CardSplitter.from_settings(windowed),
            extra_manifest=extra,
            stemmed=windowed.bm25_stem_languages,
        ).close()
    peak = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    done = {
        "cards": cards,
        "chars": chars,
        "holds": holds(config),
        "rows": rows,
        "build_s": build_s,
        "build_peak_rss_mb": peak,
    }
    (store / BUILT).write_text(json.dumps(done), encoding="utf-8")
    return {**done, "reused": False}


def rss_mb() -> float:
    """This process's resident memory now, in MB."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return round(pages * resource.getpagesize() / 2**20)


def serve(store: Path, rounds: int) -> dict[str, Any]:
    """Open the store as a fresh worker would, then time every system on it."""
    config = settings()
    embeddings = HashedEmbeddings()
    asked = questions(QUESTIONS)
    before = rss_mb()
    started = time.perf_counter()
    index = open_index(store / OURS, embeddings, MODEL)
    ours = ScoredParentDocumentRetriever.from_index(index, config)
    open_s = time.perf_counter() - started
    ours.invoke(asked[0])
    ready_s = time.perf_counter() - started
    worker_mb = rss_mb() - before
    atomic_index = open_index(store / ATOMIC, embeddings, MODEL)
    atomic = ScoredParentDocumentRetriever.over(
        atomic_index.collections, docstore=index.docstore, k=config.k
    )
    vectorstore = index.collections.children
    vanilla = ParentDocumentRetriever(
        vectorstore=vectorstore,
        docstore=index.docstore,
        child_splitter=CardSplitter.from_settings(config),
        id_key=md.PARENT_ID,
        search_kwargs={"k": config.k},
    )
    window = config.k * config.fetch_multiplier

    def floor(q: str) -> object:
        vector = embeddings.embed_query(q)
        return vectorstore.similarity_search_by_vector_with_relevance_scores(vector, k=window)

    children = ScoredParentDocumentRetriever.from_index(
        index, settings(hybrid=False, card_rows=False)
    )
    hybrid = ScoredParentDocumentRetriever.from_index(index, settings(card_rows=False))
    systems: dict[str, Callable[[str], object]] = {
        "floor": floor,
        "card-atomic": atomic.invoke,
        "vanilla-pdr": vanilla.invoke,
        "children": children.invoke,
        "hybrid": hybrid.invoke,
        "ours": ours.invoke,
    }
    if (built(store) or {}).get("chars") is not None:  # long parents: their windows too
        windows = open_index(store / WINDOWS, embeddings, MODEL)
        systems["sentence-window"] = ScoredParentDocumentRetriever.from_index(
            windows, settings(chunker="sentence_window")
        ).invoke
    times = interleaved_timings(systems, asked, rounds)
    return {
        "open_s": round(open_s, 2),
        "ready_s": round(ready_s, 2),
        "worker_rss_mb": worker_mb,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "p50_ms": {n: round(1000 * statistics.median(t), 2) for n, t in times.items()},
        "p95_ms": {n: round(1000 * percentile(t, 95), 2) for n, t in times.items()},
    }


def run(args: list[str]) -> dict[str, Any]:
    """``python -m cardrag.evals.bench.growth ARGS --json`` in a fresh process; its result."""
    cmd = [sys.executable, "-m", "cardrag.evals.bench.growth", *args, "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        msg = f"growth {' '.join(args)} failed:\n{done.stderr[-2000:]}"
        raise RuntimeError(msg)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


LENGTHS = (
    (1_000, 100),
    (1_000, 1_000),
    (1_000, 10_000),
    (10_000, 100),
    (10_000, 1_000),
    (30_000, 100),
    (30_000, 1_000),
)
"""The parent-length dimension: (characters per parent, parents), issue 33."""


def run_sizes(
    sizes: list[int] | list[tuple[int, int]], rounds: int, stores: Path | None = None
) -> list[dict[str, Any]]:
    """Each size built, then served, in fresh processes; their measurements.

    Args:
        sizes: Card counts (card-like cards), or ``(characters, parents)`` pairs (long parents).
        rounds: Timed passes over the questions.
        stores: Keep the built stores here (``{stores}/{size}``, ``{stores}/{chars}x{n}``) and
            reuse them on the next run; None builds into a temporary folder.
    """
    out = []
    with tempfile.TemporaryDirectory(prefix="cardrag-growth-") as tmp:
        for size in sizes:
            chars, cards = size if isinstance(size, tuple) else (None, size)
            name = str(cards) if chars is None else f"{chars}x{cards}"
            store = (stores or Path(tmp)) / name
            length = [] if chars is None else ["--chars", str(chars)]
            built = run(["--build", "--cards", str(cards), *length, "--store", str(store)])
            served = run(["--serve", "--store", str(store), "--rounds", str(rounds)])
            out.append({"cards": cards, **built, **served})
            print(f"  {name}: {out[-1]}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    """Build (``--build``) or serve (``--serve``) one store; both by default, in this process."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cards", type=int, default=1000)
    parser.add_argument("--chars", type=int, default=None, help="parents of this length")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--store", type=Path, help="the store folder (kept, and reused)")
    parser.add_argument("--build", action="store_true", help="only build the store")
    parser.add_argument("--serve", action="store_true", help="only open and time the store")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cardrag-growth-") as tmp:
        store = args.store or Path(tmp)
        result: dict[str, Any] = {}
        if args.build or not args.serve:
            result |= build(args.cards, store, args.chars)
        if args.serve or not args.build:
            if built(store) is None:
                raise StoreMissingError(f"{store}: no growth store; run with --build first")
            result |= serve(store, args.rounds)
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
