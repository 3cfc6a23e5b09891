"""Issue 20: a re-ingest embeds only what changed, reports it, and gives the same index."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings

from cardrag.ingest import embeddings as embedding_models
from cardrag.ingest.__main__ import run
from cardrag.ingest.cards import Card
from cardrag.ingest.index import build, ingest_folder, open_index
from cardrag.ingest.index.builder import plan_folder
from cardrag.ingest.index.cache import (
    EmbeddingCache,
    cached_embeddings,
    embedding_store,
    load_record,
    text_key,
)
from cardrag.ingest.index.local import LocalGenerations
from cardrag.ingest.settings import Settings
from cardrag.ingest.splitter import CardSplitter
from tests.conftest import REAL_MODEL, FakeEmbeddings, card_folder

QUESTIONS = [
    "How long can an insulin pen stay out of the fridge?",
    "Can I drink alcohol with metronidazole?",
    "Am I supposed to take it on an empty stomach?",
]


class CountingEmbeddings(FakeEmbeddings):
    """The fake model, counting the passages it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.embedded: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.embedded += texts
        return super().embed_documents(texts)


def _texts(cards: list[Card]) -> set[str]:
    return {
        c.page_content for c in CardSplitter().split_documents([x.to_document() for x in cards])
    }


def test_a_reingest_embeds_only_the_texts_of_changed_cards_and_counts_them(
    tmp_path: Path, shipped_cards: list[Card]
) -> None:
    store = tmp_path / "store"
    generations = LocalGenerations(store)
    cache = EmbeddingCache(store, "fake")
    model = CountingEmbeddings()

    def ingest(cards: list[Card]) -> dict[str, int]:
        model.embedded.clear()
        index, _ = build(cards, generations, model, CardSplitter(), progress=False, cache=cache)
        return dict(index.manifest["changes"])

    cards = shipped_cards[:5]
    first = ingest(cards)
    texts = _texts(cards)
    assert first == {
        "added": 5, "updated": 0, "unchanged": 0, "deleted": 0,
        "embedded": len(texts), "reused": 0,
    }  # fmt: skip
    assert sorted(model.embedded) == sorted(texts)
    assert ingest(cards) == {
        "added": 0, "updated": 0, "unchanged": 5, "deleted": 0,
        "embedded": 0, "reused": len(texts),
    }  # fmt: skip
    assert model.embedded == []
    edited = cards[1].model_copy(update={"body": cards[1].body + "\n\nKeep this card handy."})
    kept = [cards[0], edited, *cards[2:4]]  # one edited, one deleted
    new_texts = _texts([edited]) - texts
    reused = len(_texts(kept)) - len(new_texts)
    assert ingest(kept) == {
        "added": 0, "updated": 1, "unchanged": 3, "deleted": 1,
        "embedded": len(new_texts), "reused": reused,
    }  # fmt: skip
    assert sorted(model.embedded) == sorted(new_texts)


def test_the_cache_keeps_only_what_remaining_generations_use(
    tmp_path: Path, shipped_cards: list[Card]
) -> None:
    store = tmp_path / "store"
    generations = LocalGenerations(store)
    cache = EmbeddingCache(store, "fake")
    for cards in (shipped_cards[:4], shipped_cards[1:4], shipped_cards[2:4]):
        build(cards, generations, FakeEmbeddings(), CardSplitter(), progress=False, cache=cache)
    live = generations.generations()
    assert len(live) == 2  # the new generation and the one it replaced
    used = {k for g in live for k in load_record(store, g)["keys"]}
    assert set(embedding_store(store).yield_keys()) == used
    assert used == {text_key("fake", t) for t in _texts(shipped_cards[1:4])}
    assert sorted(p.stem for p in (store / "ingests").glob("*.json")) == live


@pytest.mark.real
def test_cached_vectors_are_bit_identical_to_fresh_ones(
    tmp_path: Path, real_embeddings: Embeddings
) -> None:
    texts = ["Keep insulin pens in the fridge.", "Ibuprofen: take it with food. 400 mg ½ tablet"]
    fresh = real_embeddings.embed_documents(texts)
    cached = cached_embeddings(real_embeddings, embedding_store(tmp_path), REAL_MODEL)
    assert cached.embed_documents(texts) == fresh  # embedded and stored
    again = cached_embeddings(real_embeddings, embedding_store(tmp_path), REAL_MODEL)
    assert again.embed_documents(texts) == fresh  # read back from disk, exactly


def _answers(store: Path, embeddings: Embeddings) -> list[list[tuple[str | None, float, str]]]:
    from cardrag.retrievers.parent import ScoredParentDocumentRetriever

    index = open_index(store, embeddings, REAL_MODEL)
    retriever = ScoredParentDocumentRetriever.from_index(
        index, Settings(embedding_model=REAL_MODEL)
    )
    return [
        [(d.id, d.metadata["score"], d.metadata["matched_child_id"]) for d in retriever.invoke(q)]
        for q in QUESTIONS
    ]


def test_an_incremental_reingest_answers_exactly_as_a_clean_ingest(
    tmp_path: Path,
    shipped_cards: list[Card],
    real_embeddings: Embeddings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cards = card_folder(tmp_path / "cards", shipped_cards[:12])
    settings = Settings(store_dir=tmp_path / "store", embedding_model=REAL_MODEL)
    ingest_folder(settings, cards).close()
    (cards / Path(shipped_cards[3].source).name).unlink()  # one card deleted
    edited = cards / Path(shipped_cards[5].source).name  # one card edited
    edited.write_text(edited.read_text(encoding="utf-8") + "\nAsk your pharmacist.\n", "utf-8")
    before = sorted(p.name for p in settings.store_dir.iterdir())
    assert run(settings, cards, clean=False, dry_run=True) == 0
    assert (
        capsys.readouterr()
        .out.strip()
        .endswith(
            "cards: 0 added, 1 updated, 10 unchanged, 1 deleted; texts: "
            f"{plan_folder(settings, cards).embedded} embedded, "
            f"{plan_folder(settings, cards).reused} reused"
        )
    )
    assert sorted(p.name for p in settings.store_dir.iterdir()) == before  # nothing written
    incremental = ingest_folder(settings, cards)
    incremental.close()
    assert incremental.manifest["changes"]["updated"] == 1
    assert 0 < incremental.manifest["changes"]["embedded"] <= 3
    clean = Settings(store_dir=tmp_path / "clean", embedding_model=REAL_MODEL)
    shutil.rmtree(clean.store_dir, ignore_errors=True)
    ingest_folder(clean, cards).close()
    assert _answers(settings.store_dir, real_embeddings) == _answers(
        clean.store_dir, real_embeddings
    )
    # an unchanged re-ingest embeds nothing: the model is never even loaded
    monkeypatch.setattr(embedding_models, "load_embeddings", _no_model)
    unchanged = ingest_folder(settings, cards)
    assert unchanged.manifest["changes"]["embedded"] == 0
    assert unchanged.manifest["changes"]["unchanged"] == 11


def _no_model(model: str, threads: int = 1) -> Embeddings:
    raise AssertionError("the model was loaded for a re-ingest of unchanged cards")


@pytest.mark.real
def test_a_cache_file_cut_short_is_embedded_again_not_fatal(
    tmp_path: Path,
    shipped_cards: list[Card],
    real_embeddings: Embeddings,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 72: a full disk left a cache file cut short; every later ingest then failed."""
    cards = card_folder(tmp_path / "cards", shipped_cards[:3])
    settings = Settings(store_dir=tmp_path / "store", embedding_model=REAL_MODEL)
    ingest_folder(settings, cards).close()
    victim = next(f for f in sorted((settings.store_dir / "embeddings").rglob("*")) if f.is_file())
    whole = json.loads(victim.read_bytes())
    os.truncate(victim, 8192)  # what `truncate -s 8192` did: NUL bytes after the JSON
    capsys.readouterr()
    assert run(settings, cards, clean=False) == 0
    assert "texts: 1 embedded" in capsys.readouterr().out
    assert json.loads(victim.read_bytes()) == pytest.approx(whole, abs=1e-6)  # written over
