"""Rows' texts and metadata beside the saved vectors: what Chroma holds, read without it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings

from cardrag.ingest.index import open_index
from cardrag.ingest.index.row_texts import RowTexts
from cardrag.ingest.settings import Settings
from cardrag.retrievers.parent import ScoredParentDocumentRetriever

QUESTIONS = ["tablet dose morning food stomach", "insulin pen fridge travel luggage"]


def test_rows_come_back_as_written_in_any_order(tmp_path: Path) -> None:
    rows = [
        ("Não tomar com leite ☕", {"n": 0, "w": 0.25, "ok": True, "s": "é"}),
        ("", {}),
        ("third\nline", {"big": 2**40, "neg": -1.5e-7}),
    ]
    RowTexts.write(tmp_path, rows)
    texts = RowTexts.load(tmp_path)
    assert texts is not None
    positions = {"a": 0, "b": 1, "c": 2}
    assert texts.read(["c", "a", "b"], positions) == [rows[2], rows[0], rows[1]]
    assert texts.read([], positions) == []


def test_no_rows_and_no_files_load_as_expected(tmp_path: Path) -> None:
    assert RowTexts.load(tmp_path) is None
    RowTexts.write(tmp_path / "empty", [])
    empty = RowTexts.load(tmp_path / "empty")
    assert empty is not None
    assert empty.offsets.tolist() == [0]


@pytest.fixture(scope="module")
def index_dir(sentence_index: Callable[[str, int], Path]) -> Path:
    """Forty card-like parents with card rows and sentence rows, one restricted (its rows live
    in a collection of their own, not saved: read from Chroma), fake embeddings."""
    return sentence_index("row-texts", 40)


def test_every_saved_row_holds_chromas_text_and_metadata(
    index_dir: Path, fake_embeddings: Embeddings
) -> None:
    index = open_index(index_dir, fake_embeddings)
    assert index.vectors is not None
    collections = index.collections
    saved = [
        (index.vectors, collections.children),
        (index.vectors.cards, collections.cards),
        (index.vectors.sentences, collections.sentences),
    ]
    for vectors, store in saved:
        assert vectors is not None
        assert store is not None
        assert vectors.texts is not None
        rows = store._collection.get(ids=vectors.ids, include=["documents", "metadatas"])
        read = zip(rows["ids"], rows["documents"], rows["metadatas"], strict=True)
        chroma = {i: (t, m) for i, t, m in read}
        assert len(chroma) == len(vectors.ids) > 0
        texts = vectors.texts.read(vectors.ids, vectors.positions)
        assert dict(zip(vectors.ids, texts, strict=True)) == chroma


def test_the_retriever_returns_the_same_documents_without_asking_chroma_for_texts(
    index_dir: Path, fake_embeddings: Embeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = open_index(index_dir, fake_embeddings)
    assert index.vectors is not None
    settings = Settings(min_similarity=-1.0)
    assert settings.uses_card_rows
    assert settings.uses_sentence_rows
    fast = ScoredParentDocumentRetriever.from_index(index, settings)
    vectors = index.vectors
    without = replace(
        vectors,
        texts=None,
        cards=replace(vectors.cards, texts=None) if vectors.cards else None,
        sentences=replace(vectors.sentences, texts=None) if vectors.sentences else None,
    )
    slow = ScoredParentDocumentRetriever.from_index(index, settings, row_vectors=without)
    asked: list[Any] = []
    for store in (index.collections.children, index.collections.cards):
        assert store is not None
        get = store._collection.get

        def counting(*args: Any, _get: Any = get, **kwargs: Any) -> Any:
            asked.append(kwargs.get("include"))
            return _get(*args, **kwargs)

        monkeypatch.setattr(store._collection, "get", counting)
    for question in QUESTIONS:
        asked.clear()
        got = fast.invoke(question, k=4)
        assert not [i for i in asked if i and "documents" in i]  # texts read beside the index
        want = slow.invoke(question, k=4)
        assert [i for i in asked if i and "documents" in i]  # the slow one asks Chroma
        assert [(d.id, d.page_content, d.metadata) for d in got] == [
            (d.id, d.page_content, d.metadata) for d in want
        ]
        assert len(got) == 4
