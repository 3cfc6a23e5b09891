from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings

from cardrag.ingest import metadata as md
from cardrag.ingest.cards import Card, CardError
from cardrag.ingest.index import (
    Collections,
    StoreMissingError,
    build_index,
    chroma_client,
    ingest_folder,
    open_collections,
    open_index,
    upsert_documents,
)
from cardrag.ingest.index.generations import CURRENT
from cardrag.ingest.index.local import LocalGenerations
from cardrag.ingest.index.parents import deserialize_parent, open_parent_store, serialize_parent
from cardrag.ingest.lexical import BM25Index
from cardrag.ingest.settings import Settings
from cardrag.ingest.splitter import CardSplitter
from cardrag.retrievers.bm25 import question_tokens, search
from tests.conftest import CARDS_DIR, REAL_MODEL, FakeEmbeddings, card_folder

CHILD_ID = re.compile(r"^card-[a-z0-9-]+::\d{2}$")


def test_one_row_per_child_with_deterministic_ids(
    shipped_index_dir: Path, real_embeddings: Embeddings, shipped_cards: list[Card]
) -> None:
    index = open_index(shipped_index_dir, real_embeddings)
    assert index.collections.restricted is not None
    public = index.vectorstore.get(include=["metadatas", "documents"])
    hidden = index.collections.restricted.get(include=["metadatas", "documents"])
    # each kind of row in its own collection: the public query needs no sensitivity filter
    assert {m["sensitivity"] for m in hidden["metadatas"]} == {"restricted"}
    assert "restricted" not in {m["sensitivity"] for m in public["metadatas"]}
    assert (len(public["ids"]), len(hidden["ids"])) == (158, 6)
    rows = {key: public[key] + hidden[key] for key in ("ids", "metadatas", "documents")}
    splitter = CardSplitter()
    expected = {
        md.child_id(c.id, i): child
        for c in shipped_cards
        for i, child in enumerate(splitter.split_documents([c.to_document()]))
    }
    assert len(rows["ids"]) == 164
    assert set(rows["ids"]) == set(expected)
    for row_id, meta, text in zip(rows["ids"], rows["metadatas"], rows["documents"], strict=True):
        assert CHILD_ID.match(row_id)
        assert row_id == md.child_id(meta["parent_id"], meta["chunk_index"])
        assert text == expected[row_id].page_content
        assert set(meta) >= {
            "parent_id",
            "chunk_index",
            "title",
            "license",
            "topics",
            "accessed_at",
            "sensitivity",
            "start_index",
        }
    assert index.manifest["children"] == 164
    assert index.vectorstore._collection.configuration["hnsw"]["space"] == "cosine"


def test_parent_cards_round_trip_exactly(
    shipped_index_dir: Path, real_embeddings: Embeddings, shipped_cards: list[Card]
) -> None:
    index = open_index(shipped_index_dir, real_embeddings)
    stored = index.docstore.mget([c.id for c in shipped_cards])
    for card, doc in zip(shipped_cards, stored, strict=True):
        assert doc is not None
        expected = card.to_document()
        assert (doc.id, doc.page_content, doc.metadata) == (
            expected.id,
            expected.page_content,
            expected.metadata,
        )


def test_parent_record_is_versioned_json(shipped_cards: list[Card]) -> None:
    doc = shipped_cards[0].to_document()
    data = serialize_parent(doc)
    assert data.startswith(b'{"format_version": 1, "id": "card-')
    back = deserialize_parent(data)
    assert (back.id, back.page_content, back.metadata) == (doc.id, doc.page_content, doc.metadata)


def test_reingest_the_same_cards_adds_no_rows(
    tmp_path: Path, real_embeddings: Embeddings, shipped_cards: list[Card]
) -> None:
    index = build_index(
        shipped_cards[:5], tmp_path, real_embeddings, CardSplitter(), progress=False
    )
    before = index.collections.count()
    upsert_documents(
        index.collections,
        index.docstore,
        CardSplitter(),
        [c.to_document() for c in shipped_cards[:5]],
    )
    assert index.collections.count() == before == 20


def test_rows_are_routed_by_kind_and_sensitivity(tmp_path: Path) -> None:
    both = open_collections(chroma_client(tmp_path / "split"), FakeEmbeddings())
    one = Collections(both.children)
    rows = {
        "child": {"chunk_index": 0, "sensitivity": "public"},
        "card row": {"chunk_index": -1, "sensitivity": "internal"},
        "restricted child": {"chunk_index": 2, "sensitivity": "restricted"},
        "restricted card row": {"chunk_index": -1, "sensitivity": "restricted"},
        "sentence row": {"chunk_index": -3, "sensitivity": "public"},
        "restricted sentence row": {"chunk_index": -2, "sensitivity": "restricted"},
    }
    names = {k: both.route(m)._collection.name for k, m in rows.items()}
    assert names == {
        "child": "children",
        "card row": "cards",
        "restricted child": "restricted",
        "restricted card row": "restricted",
        "sentence row": "sentences",
        "restricted sentence row": "restricted",
    }
    assert {one.route(m) for k, m in rows.items() if "sentence" not in k} == {both.children}
    with pytest.raises(ValueError, match="sentence rows need an index with a sentences"):
        one.route(rows["sentence row"])
    assert [c._collection.name for c in both.all()] == [
        "children",
        "cards",
        "restricted",
        "sentences",
    ]
    assert [c._collection.name for c in both.with_children()] == ["children", "restricted"]
    assert one.with_children() == [both.children]  # one collection: BM25 filters card rows


def test_a_card_that_becomes_restricted_moves_all_its_rows(
    tmp_path: Path, real_embeddings: Embeddings, shipped_cards: list[Card]
) -> None:
    index = build_index(
        shipped_cards[:2], tmp_path, real_embeddings, CardSplitter(card_rows=True), progress=False
    )
    stores = index.collections
    assert stores.cards is not None
    assert stores.restricted is not None
    card = shipped_cards[0].to_document()
    card.metadata["sensitivity"] = "restricted"
    upsert_documents(stores, index.docstore, CardSplitter(card_rows=True), [card])

    def ids(store: Any) -> set[str]:
        return {i for i in store.get(include=[])["ids"] if i.startswith(f"{card.id}::")}

    moved = ids(stores.restricted)
    assert ids(stores.children) == ids(stores.cards) == set()
    assert f"{card.id}::card" in moved
    assert f"{card.id}::00" in moved
    assert stores.count() == index.manifest["children"]


def test_bad_card_leaves_the_previous_index_answering(
    tmp_path: Path, real_embeddings: Embeddings, shipped_cards: list[Card]
) -> None:
    settings = Settings(store_dir=tmp_path / "store", embedding_model=REAL_MODEL)
    good = tmp_path / "good"
    card_folder(good, shipped_cards[:3])
    first = ingest_folder(settings, good)
    bad = tmp_path / "bad"
    card_folder(bad, shipped_cards[:3])
    (bad / "zz-broken.md").write_text(
        "---\nid: card-broken\ntitle: x\n---\nbody\n", encoding="utf-8"
    )
    with pytest.raises(CardError, match=r"zz-broken\.md: field 'license': missing"):
        ingest_folder(settings, bad)
    again = open_index(settings.store_dir, real_embeddings, REAL_MODEL)
    assert again.path == first.path
    assert again.collections.count() == first.manifest["children"]
    assert [c.id for c in shipped_cards[:3]] == [
        "card-adherence-reminders",
        "card-alcohol-interactions",
        "card-alendronate-weekly",
    ]
    hits = again.vectorstore.similarity_search("stay upright after the weekly bone tablet", k=1)
    assert hits[0].metadata["parent_id"] == "card-alendronate-weekly"


class _FailingEmbeddings(Embeddings):
    """Fails while embedding, as a crash midway through an ingest would."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise RuntimeError("disk full")

    def embed_query(self, text: str) -> list[float]:
        raise RuntimeError("disk full")


def test_crash_midway_keeps_previous_index_and_leaves_no_partial(
    tmp_path: Path, real_embeddings: Embeddings, shipped_cards: list[Card]
) -> None:
    first = build_index(
        shipped_cards[:2], tmp_path, real_embeddings, CardSplitter(), progress=False
    )
    with pytest.raises(RuntimeError, match="disk full"):
        build_index(shipped_cards, tmp_path, _FailingEmbeddings(), CardSplitter(), progress=False)
    assert (tmp_path / CURRENT).resolve() == first.path
    assert sorted(p.name for p in tmp_path.glob("index-*")) == [first.path.name]
    reopened = open_index(tmp_path, real_embeddings)
    assert reopened.collections.count() == first.manifest["children"]


def test_swap_keeps_one_previous_generation(
    tmp_path: Path, fake_embeddings: Embeddings, shipped_cards: list[Card]
) -> None:
    paths = [
        build_index(
            shipped_cards[:1], tmp_path, fake_embeddings, CardSplitter(), progress=False
        ).path
        for _ in range(3)
    ]
    assert sorted(p.name for p in tmp_path.glob("index-*")) == sorted(p.name for p in paths[1:])
    assert (tmp_path / CURRENT).resolve() == paths[2]


def test_open_index_without_a_store_says_how_to_build_one(
    tmp_path: Path, fake_embeddings: Embeddings
) -> None:
    with pytest.raises(StoreMissingError, match="no index found; build one with `cardrag ingest`"):
        open_index(tmp_path, fake_embeddings)


def test_shipped_cards_folder_is_the_default() -> None:
    assert Settings().cards_dir == CARDS_DIR


def test_an_old_format_parent_record_is_read_with_defaults_and_left_as_written(
    tmp_path: Path,
) -> None:
    from langchain_classic.storage import LocalFileStore

    # format 0: no version, no id, no sensitivity, licence or source
    old = {
        "page_content": "Take it with food.",
        "metadata": {"parent_id": "card-old", "title": "Old"},
    }
    raw = json.dumps(old).encode()
    LocalFileStore(tmp_path).mset([("card-old", raw)])
    [doc] = open_parent_store(tmp_path).mget(["card-old"])
    assert doc is not None
    assert (doc.id, doc.page_content) == ("card-old", "Take it with food.")
    assert doc.metadata == {
        "parent_id": "card-old",
        "title": "Old",
        "license": "",
        "topics": [],
        "accessed_at": "",
        "sensitivity": "public",
        "source": "",
    }
    assert (tmp_path / "card-old").read_bytes() == raw  # read, never rewritten


def test_bm25_from_the_rows_written_is_the_index_a_read_back_builds(tmp_path: Path) -> None:
    cards = [
        Card(
            id=f"card-{name}",
            title=name.title(),
            license="CC0-1.0",
            topics=["t"],
            accessed_at=dt.date(2026, 1, 1),
            sensitivity=sensitivity,
            body=body,
        )
        for name, sensitivity, body in [
            ("alpha", "public", "Insulin pens stay cool.\n\nNever freeze insulin."),
            ("staff", "restricted", "Escalation code for staff.\n\nInsulin errors too."),
            ("beta", "public", "Iron tablets with orange juice.\n\nTea blocks iron."),
        ]
    ]
    index = build_index(
        cards,
        tmp_path,
        FakeEmbeddings(),
        CardSplitter(chunk_size=30, chunk_overlap=0, card_rows=True),
        progress=False,
    )
    assert index.bm25 is not None
    read_back = BM25Index.from_collections(index.collections.with_children())
    assert index.bm25.child_ids == read_back.child_ids
    assert (index.bm25.parent_ids, index.bm25.restricted) == (
        read_back.parent_ids,
        read_back.restricted,
    )
    assert "card-staff::00" in index.bm25.child_ids  # restricted rows indexed, flagged
    for question in ("insulin", "iron tea", "escalation code"):
        assert search(index.bm25, question, 5) == search(read_back, question, 5)
    assert [c for c, _, _ in search(index.bm25, "insulin", 5)] == [
        "card-alpha::01",
        "card-alpha::00",
    ]


def test_the_card_size_limit_is_a_setting_checked_before_anything_is_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cardrag.ingest.__main__ import main

    monkeypatch.setenv("CARDRAG_STORE_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("CARDRAG_MAX_CARD_CHARS", "1000")
    monkeypatch.setenv("CARDRAG_EMBEDDING_MODEL", "no-such-model")  # never reached
    assert main(["--cards", str(CARDS_DIR)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("ingest failed, previous index untouched: ")
    assert f"{CARDS_DIR / 'adherence-reminders.md'}: field 'body': 1,290 characters" in line
    assert line.endswith("over the limit of 1,000 (CARDRAG_MAX_CARD_CHARS)")
    assert not (tmp_path / "store").exists()


CARDS_IN = {
    "pt": {
        "card-ferro-comprimidos": (
            "Ferro: tomar os comprimidos",
            "Tome o comprimido de ferro em jejum, com um copo de sumo de laranja. O chá e o café "
            "diminuem a absorção: espere duas horas antes de os beber.",
        ),
        "card-insulina-frigorifico": (
            "Insulina: guardar as canetas",
            "Guarde as canetas de insulina novas no frigorífico, entre 2 e 8 graus. A caneta em "
            "uso pode ficar à temperatura ambiente durante quatro semanas.",
        ),
    },
    "it": {
        "card-ferro-compresse": (
            "Ferro: prendere le compresse",
            "Prenda la compressa di ferro a stomaco vuoto, con un bicchiere di succo d'arancia. "
            "Il tè e il caffè riducono l'assorbimento: aspetti due ore prima di berli.",
        ),
        "card-insulina-frigorifero": (
            "Insulina: conservare le penne",
            "Conservi le penne di insulina nuove in frigorifero, tra 2 e 8 gradi. La penna in uso "
            "può restare a temperatura ambiente per quattro settimane.",
        ),
    },
}


@pytest.mark.real
@pytest.mark.parametrize(
    ("language", "question", "expected", "tokens"),
    [
        (
            "pt",
            "Posso tomar o comprimido com chá?",
            "card-ferro-comprimidos",
            ["poss", "tom", "comprim", "chá"],
        ),
        (
            "it",
            "Posso prendere le compresse con il tè?",
            "card-ferro-compresse",
            ["poss", "prend", "compress", "tè"],
        ),
    ],
)
def test_a_card_folder_is_analysed_in_its_own_language_with_no_setting(
    tmp_path: Path, language: str, question: str, expected: str, tokens: list[str]
) -> None:
    folder = tmp_path / "cards"
    folder.mkdir()
    for card_id, (title, body) in CARDS_IN[language].items():
        front = (
            f'---\nid: {card_id}\ntitle: "{title}"\nlicense: CC0-1.0\ntopics: [t]\n'
            "accessed_at: 2026-11-30\nsensitivity: public\n---\n\n"
        )
        (folder / f"{card_id}.md").write_text(front + body + "\n", encoding="utf-8")
    settings = Settings(store_dir=tmp_path / "store", embedding_model=REAL_MODEL)
    index = ingest_folder(settings, folder)
    try:
        assert index.bm25 is not None
        assert (index.bm25.languages, index.manifest["languages"]) == ((language,), [language])
        assert language in index.bm25.stemmed
        rows = index.vectorstore.get(include=["metadatas"])["metadatas"]
        assert {m[md.LANGUAGE] for m in rows} == {language}
        parent = index.docstore.mget([expected])[0]
        assert parent is not None
        assert parent.metadata[md.LANGUAGE] == language
        # the question is analysed as the cards are: its stop words ("com", "con", "il", "le")
        # are dropped and its content words stemmed (the default stems pt and it)
        assert question_tokens(index.bm25, question) == tokens
        assert search(index.bm25, question, 5)[0][1] == expected
    finally:
        index.close()


def test_ingest_never_removes_what_it_did_not_make(
    tmp_path: Path, fake_embeddings: Embeddings, shipped_cards: list[Card]
) -> None:
    photos = tmp_path / "index-photos"  # named like a generation, holding a user's file
    photos.mkdir(parents=True)
    (photos / "a.jpg").write_text("precious")
    (tmp_path / "index-notes.txt").write_text("mine")  # a file named like one
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    elsewhere.mkdir()
    (tmp_path / "index-link").symlink_to(elsewhere)  # and a symlink
    built = [
        build_index(shipped_cards[:1], tmp_path, fake_embeddings, CardSplitter(), progress=False)
        for _ in range(3)
    ]
    kept = sorted(p.name for p in tmp_path.glob("index-*"))
    assert kept == sorted(
        ["index-photos", "index-notes.txt", "index-link", built[1].path.name, built[2].path.name]
    )
    assert (photos / "a.jpg").read_text() == "precious"
    assert (tmp_path / "index-link").resolve() == elsewhere.resolve()
    assert LocalGenerations(tmp_path).generations() == sorted(b.path.name for b in built[1:])
