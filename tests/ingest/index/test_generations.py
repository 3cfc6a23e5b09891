"""One writer per store, safe garbage collection, counted swaps, a safe ``--clean``.

Issue 19's probes: two ingests at once left ``current`` on an empty index; ``--clean`` wiped
the store (or any folder) before checking the model.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings

from cardrag.ingest.__main__ import run
from cardrag.ingest.cards import Card
from cardrag.ingest.embeddings import UnknownModelError
from cardrag.ingest.index import (
    GenerationCountError,
    Index,
    LocalGenerations,
    NotAStoreError,
    StoreLockedError,
    build_index,
    ingest_folder,
    open_index,
    upsert_documents,
)
from cardrag.ingest.index.generations import CURRENT, MANIFEST, MARKER
from cardrag.ingest.index.manifest import make_manifest
from cardrag.ingest.lexical import BM25Index
from cardrag.ingest.settings import Settings
from cardrag.ingest.splitter import CardSplitter
from tests.conftest import REAL_MODEL, card_folder

ROOT = Path(__file__).resolve().parents[3]


def test_a_second_writer_is_refused_at_once_naming_the_holder(tmp_path: Path) -> None:
    generations = LocalGenerations(tmp_path)
    refused = pytest.raises(StoreLockedError, match=rf"another ingest \(pid {os.getpid()}\)")
    with generations.lock(), refused, LocalGenerations(tmp_path).lock():
        pass
    with generations.lock():  # released: the next writer gets it
        pass


def test_the_leftover_of_a_dead_writer_is_collected_by_the_next_ingest(
    tmp_path: Path, fake_embeddings: Embeddings, shipped_cards: list[Card]
) -> None:
    first = build_index(
        shipped_cards[:1], tmp_path, fake_embeddings, CardSplitter(), progress=False
    )
    dead = tmp_path / "index-20000101T000000-dead01"  # no manifest: killed midway, lock released
    (dead / "chroma").mkdir(parents=True)
    (dead / MARKER).write_text(f"{dead.name}\n")  # the first thing a writer puts in it
    second = build_index(
        shipped_cards[:1], tmp_path, fake_embeddings, CardSplitter(), progress=False
    )
    assert sorted(p.name for p in tmp_path.glob("index-*")) == sorted(
        [first.generation, second.generation]
    )


def test_a_generation_whose_counts_differ_from_its_manifest_is_not_swapped_in(
    tmp_path: Path, fake_embeddings: Embeddings, shipped_cards: list[Card]
) -> None:
    live = build_index(shipped_cards[:2], tmp_path, fake_embeddings, CardSplitter(), progress=False)
    generations = LocalGenerations(tmp_path)
    with generations.lock():
        generation = generations.new()
        written = upsert_documents(
            generations.collections(generation, fake_embeddings),
            generations.parent_store(generation),
            CardSplitter(),
            [c.to_document() for c in shipped_cards[:2]],
        )
        manifest = make_manifest(CardSplitter(), 2, len(written) + 1, None)  # one row lost
        generations.complete(generation, manifest, BM25Index.from_rows([]))
        with pytest.raises(GenerationCountError, match=rf"{len(written)} rows and 2 parent"):
            generations.swap(generation)
        incomplete = generations.new()
        with pytest.raises(GenerationCountError, match=f"no {MANIFEST}"):
            generations.swap(incomplete)
    assert (tmp_path / CURRENT).resolve().name == live.generation


def test_clean_refuses_a_folder_that_is_not_a_store_before_loading_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "documents"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine", encoding="utf-8")
    settings = Settings(store_dir=folder, embedding_model="no-such-model")
    with pytest.raises(NotAStoreError, match=r"documents: --clean refused"):
        ingest_folder(settings, clean=True)  # refused before the (unknown) model is loaded
    assert run(settings, None, clean=True) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "not a cardrag store" in err[0]
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]


def _live_store(tmp_path: Path, cards: list[Card]) -> tuple[Path, Path, Index]:
    """A cards folder, and a store ingested from it with the real model: (cards, store, index)."""
    folder = card_folder(tmp_path / "cards", cards)
    store = tmp_path / "store"
    return (
        folder,
        store,
        ingest_folder(Settings(store_dir=store, embedding_model=REAL_MODEL), folder),
    )


def test_clean_with_a_mistyped_model_leaves_the_index_answering(
    tmp_path: Path, real_embeddings: Embeddings, shipped_cards: list[Card]
) -> None:
    cards, store, first = _live_store(tmp_path, shipped_cards[:3])
    bad = Settings(store_dir=store, embedding_model="all-minilm-l6-v3")
    with pytest.raises(UnknownModelError):
        ingest_folder(bad, cards, clean=True)
    again = open_index(store, real_embeddings, REAL_MODEL)
    assert again.generation == first.generation
    assert again.collections.count() == first.manifest["children"]


def test_clean_keeps_only_the_new_generation_and_files_it_did_not_make(
    tmp_path: Path,
    real_embeddings: Embeddings,
    shipped_cards: list[Card],
    capsys: pytest.CaptureFixture[str],
) -> None:
    cards = card_folder(tmp_path / "cards", shipped_cards[:2])
    store = tmp_path / "store"
    settings = Settings(store_dir=store, embedding_model=REAL_MODEL)
    first = ingest_folder(settings, cards)
    second = ingest_folder(settings, cards)
    assert second.removed == []  # the one it replaced is kept
    (store / "README.txt").write_text("the team's notes", encoding="utf-8")
    capsys.readouterr()
    assert run(settings, cards, clean=True) == 0
    said, removed = capsys.readouterr().out.splitlines()[-1].split(": ")
    assert said == "removed 2 old index(es)"  # in name order, which one second may not be
    assert sorted(removed.split(", ")) == sorted([first.generation, second.generation])
    new = open_index(store, real_embeddings, REAL_MODEL)
    assert sorted(p.name for p in store.glob("index-*")) == [new.generation]
    assert (store / "README.txt").read_text(encoding="utf-8") == "the team's notes"
    assert open_index(store, real_embeddings, REAL_MODEL).generation == new.generation


HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from cardrag.ingest.index import LocalGenerations
    generations = LocalGenerations(Path(sys.argv[1]))
    with generations.lock():
        building = generations.new()  # a generation being built: no manifest yet
        print(building, flush=True)
        time.sleep(float(sys.argv[2]))
    """
)


def _ingest(store: Path, cards: Path) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "CARDRAG_STORE_DIR": str(store),
        "CARDRAG_EMBEDDING_MODEL": REAL_MODEL,
        "HF_HUB_OFFLINE": "1",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "ingest", "--cards", str(cards)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_an_ingest_while_another_writes_exits_2_and_touches_nothing(
    tmp_path: Path, real_embeddings: Embeddings, shipped_cards: list[Card]
) -> None:
    cards, store, first = _live_store(tmp_path, shipped_cards[:3])
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(store), "60"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        building = holder.stdout.readline().strip()
        second = _ingest(store, cards)
        _, err = second.communicate(timeout=120)
        assert second.returncode == 2
        assert err.strip().splitlines() == [
            f"ingest failed, previous index untouched: {store}: another ingest "
            f"(pid {holder.pid}) is writing this store; run again when it has finished"
        ]
        assert (store / building).is_dir()  # the generation being built was not collected
        assert open_index(store, real_embeddings, REAL_MODEL).generation == first.generation
    finally:
        holder.kill()
        holder.wait()


def test_two_ingests_at_once_never_leave_current_on_an_incomplete_index(
    tmp_path: Path, real_embeddings: Embeddings, shipped_cards: list[Card]
) -> None:
    cards = card_folder(tmp_path / "cards", shipped_cards)
    store = tmp_path / "store"
    runs = [_ingest(store, cards), _ingest(store, cards)]
    outcomes = [(p.wait(timeout=300), p.stderr.read() if p.stderr else "") for p in runs]
    codes = sorted(code for code, _ in outcomes)
    assert codes in ([0, 0], [0, 2]), outcomes  # one after the other, or one refused
    for code, err in outcomes:
        if code == 2:
            assert "is writing this store" in err
    index = open_index(store, real_embeddings, REAL_MODEL)
    assert index.manifest["cards"] == len(shipped_cards)
    assert index.collections.count() == index.manifest["children"]
    assert len(list(index.docstore.yield_keys())) == len(shipped_cards)
    assert (index.path / MANIFEST).is_file()
    assert index.docstore.mget(["card-insulin-storage"])[0] is not None


def test_a_leased_generation_survives_collection_until_its_lease_ends(
    tmp_path: Path, fake_embeddings: Embeddings, shipped_cards: list[Card]
) -> None:
    import time

    from cardrag.ingest.index.generations import collect

    first = build_index(
        shipped_cards[:1], tmp_path, fake_embeddings, CardSplitter(), progress=False
    )
    generations = LocalGenerations(tmp_path)
    generations.lease(first.generation, "server-a", 60)
    for _ in range(2):  # two re-ingests: the first generation is neither new nor previous
        build_index(shipped_cards[:1], tmp_path, fake_embeddings, CardSplitter(), progress=False)
    assert first.path.is_dir()
    assert generations.leased(time.time()) == {first.generation}
    assert generations.leased(time.time() + 61) == set()
    generations.release(first.generation, "server-a")
    with generations.lock():
        dropped = collect(generations, keep={generations.current()})
    assert first.generation in dropped  # released: collected like any old generation
    assert not first.path.exists()
