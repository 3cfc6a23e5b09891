"""Fixtures shared by the index's tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cardrag.evals.bench.synthetic import synthetic_cards
from cardrag.ingest.index import build_index
from cardrag.ingest.splitter import CardSplitter


@pytest.fixture(scope="session")
def sentence_index(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, int], Path]:
    """Build an index of ``n`` card-like parents with card and sentence rows, the fourth
    restricted (its rows in a collection of their own), with fake embeddings."""
    from tests.conftest import FakeEmbeddings

    def build(name: str, n: int) -> Path:
        store = tmp_path_factory.mktemp(name)
        cards = list(synthetic_cards(n))
        cards[3] = cards[3].model_copy(update={"sensitivity": "restricted"})
        splitter = CardSplitter(card_rows=True, sentence_rows=True)
        build_index(cards, store, FakeEmbeddings(), splitter, progress=False).close()
        return store

    return build
