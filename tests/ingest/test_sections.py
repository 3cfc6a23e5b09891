from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings

from cardrag.ingest.cards import Card, CardError
from cardrag.ingest.corpus import load_cards, split_sections
from cardrag.ingest.index import ingest_folder
from cardrag.ingest.sections import sections_of
from cardrag.ingest.settings import Settings
from cardrag.ingest.splitter import CardSplitter
from cardrag.retrievers.parent import ScoredParentDocumentRetriever
from tests.conftest import REAL_MODEL, card_folder

HANDBOOK = """---
id: card-travel-handbook
title: "Travelling with medicines"
license: CC-BY-4.0
topics: [travel]
accessed_at: 2026-11-20
sensitivity: public
kind: document
---

This chapter covers trips abroad.

# Before you go

## Packing

Keep medicines in your hand luggage, in their original boxes, with a copy of the prescription.

## Letters

```
# not a heading: inside a code fence
```
Ask your doctor for a letter listing your medicines when you carry injections.

# Time zones

Keep taking once-daily tablets at the same home time for short trips; shift by an hour a day
for long stays.
"""


def test_a_document_is_cut_into_sections_at_headings(tmp_path: Path) -> None:
    (tmp_path / "handbook.md").write_text(HANDBOOK, encoding="utf-8")
    sections = load_cards(tmp_path)
    assert [(s.id, s.title) for s in sections] == [
        ("card-travel-handbook-01", "Travelling with medicines"),
        ("card-travel-handbook-02", "Travelling with medicines: Before you go / Packing"),
        ("card-travel-handbook-03", "Travelling with medicines: Before you go / Letters"),
        ("card-travel-handbook-04", "Travelling with medicines: Time zones"),
    ]
    assert sections[1].body == (
        "Keep medicines in your hand luggage, in their original boxes, with a copy of the "
        "prescription."
    )
    assert sections[2].body.startswith("```\n# not a heading: inside a code fence\n```\nAsk")
    assert {s.document_id for s in sections} == {"card-travel-handbook"}
    assert {(s.kind, s.sensitivity, s.license) for s in sections} == {
        ("card", "public", "CC-BY-4.0")
    }


def test_sections_become_parents_whose_children_carry_the_document_id(tmp_path: Path) -> None:
    (tmp_path / "handbook.md").write_text(HANDBOOK, encoding="utf-8")
    section = load_cards(tmp_path)[3]
    [child] = CardSplitter().split_documents([section.to_document()])
    assert child.page_content.startswith("Travelling with medicines: Time zones\n\nKeep taking")
    assert child.metadata["parent_id"] == "card-travel-handbook-04"
    assert child.metadata["document_id"] == "card-travel-handbook"


def test_a_plain_card_is_left_whole_and_has_no_document_id() -> None:
    card = Card(
        id="card-x",
        title="X",
        license="CC0-1.0",
        topics=[],
        accessed_at=dt.date(2026, 1, 1),
        sensitivity="public",
        body="# Heading\n\nText.",
    )
    assert split_sections(card) == [card]
    assert "document_id" not in card.to_document().metadata


def test_headings_without_text_only_extend_the_trail() -> None:
    assert sections_of("# A\n\n## B\n\nTwo.\n\n### C\nThree.\n\n# D") == [
        (["A", "B"], "Two."),
        (["A", "B", "C"], "Three."),
    ]
    assert sections_of("#### Deep heading stays text\n\nBody.") == [
        ([], "#### Deep heading stays text\n\nBody.")
    ]


def test_an_unknown_kind_names_the_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.md"
    path.write_text(HANDBOOK.replace("kind: document", "kind: chapter"), encoding="utf-8")
    with pytest.raises(CardError) as info:
        load_cards(tmp_path)
    assert (info.value.path, info.value.field) == (path, "kind")
    assert str(info.value) == f"{path}: field 'kind': 'chapter' is not one of card, document"


def test_a_section_id_that_clashes_with_a_card_is_reported(tmp_path: Path) -> None:
    (tmp_path / "a-handbook.md").write_text(HANDBOOK, encoding="utf-8")
    clash = HANDBOOK.replace("kind: document\n", "").replace(
        "card-travel-handbook", "card-travel-handbook-02"
    )
    (tmp_path / "b-card.md").write_text(clash, encoding="utf-8")
    with pytest.raises(CardError, match="duplicate id 'card-travel-handbook-02'"):
        load_cards(tmp_path)


def test_a_handbook_section_is_retrieved_like_a_card(
    tmp_path: Path, real_embeddings: Embeddings, shipped_cards: list[Card]
) -> None:
    cards = tmp_path / "cards"
    cards.mkdir()
    (cards / "handbook.md").write_text(HANDBOOK, encoding="utf-8")
    card_folder(cards, shipped_cards[:5])
    settings = Settings(cards_dir=cards, store_dir=tmp_path / "store", embedding_model=REAL_MODEL)
    index = ingest_folder(settings)
    assert index.manifest["cards"] == 9  # 5 cards + 4 sections
    retriever = ScoredParentDocumentRetriever.from_index(index, settings)
    [top] = retriever.invoke("Should my medicines go in my hand luggage when I fly?", k=1)
    assert top.id == "card-travel-handbook-02"
    assert top.metadata["document_id"] == "card-travel-handbook"
    assert top.page_content.startswith("Keep medicines in your hand luggage")
