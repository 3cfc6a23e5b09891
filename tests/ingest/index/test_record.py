"""A generation's record: written first, removed last, so no crash leaves a piece for ever."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from cardrag.ingest.cards import Card
from cardrag.ingest.index import current_generation, ingest_folder
from cardrag.ingest.index.generations import MARKER
from cardrag.ingest.index.local import LocalGenerations
from cardrag.ingest.index.record import GenerationRecord, Piece, remote_record, store_of
from cardrag.ingest.settings import Settings
from tests.conftest import PROJECT_ROOT, REAL_MODEL, card_folder

KINDS = ("record", "children", "cards", "restricted", "sentences")
PIECES = 7
"""The pieces of a generation on a server: 4 collections, parents, files, leases."""
CRASHES = [("record", 1), ("rows", 1), ("files", 1), ("pointer", 1)]
CRASHES += [("piece", n) for n in range(1, PIECES + 1)]
"""Every step of a client-server re-ingest after which it is killed (``crashing_ingest``)."""
LEASED = {("pointer", 1), ("piece", 7)}
"""Crashes whose collected generation has a dead server's lease (a lease lists a generation
too, so the others show that the record alone finds what a crash left)."""


def test_a_remote_record_lists_every_piece_in_the_order_they_are_removed() -> None:
    record = remote_record("kb", "index-1", "redis://user:secret@cache:6379/0")
    assert [(p.kind, p.name) for p in record.pieces] == [
        ("collection", "kb-children-index-1"),
        ("collection", "kb-cards-index-1"),
        ("collection", "kb-restricted-index-1"),
        ("collection", "kb-sentences-index-1"),
        ("parents", "kb:index-1"),
        ("files", "kb:index-1:files"),
        ("leases", "kb-lease-index-1-"),
    ]
    assert {p.where for p in record.pieces} == {"", "redis://cache:6379/0"}  # no password
    assert "secret" not in json.dumps(record.to_metadata())
    assert GenerationRecord.from_metadata(record.to_metadata()) == record


def test_store_of_names_the_parent_store_without_credentials(tmp_path: Path) -> None:
    assert store_of("rediss://:pw@h:6380/1") == "rediss://h:6380/1"
    assert store_of(str(tmp_path / "x" / "..")) == str(tmp_path)
    assert Piece("parents", "k").where == ""


def test_a_local_drop_interrupted_anywhere_leaves_the_marker_to_collect_it(
    tmp_path: Path,
) -> None:
    generations = LocalGenerations(tmp_path)
    generation = generations.new()
    folder = generations.path(generation)
    (folder / "chroma").mkdir()
    (folder / "chroma" / "db").write_text("rows")
    lease = tmp_path / "leases" / f"worker-1@{generation}"
    lease.parent.mkdir()
    lease.write_text("0\n")  # expired
    marker = json.loads((folder / MARKER).read_text().splitlines()[1])
    assert marker["generation"] == generation
    assert generations.generations() == [generation]
    generations.drop(generation)
    assert not folder.exists()
    assert not lease.exists()
    assert generations.generations() == []


def test_a_local_generation_with_parents_in_another_store_keeps_them_and_its_marker(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shared = tmp_path / "shared"
    first = LocalGenerations(tmp_path / "store", parent_spec=str(shared))
    generation = first.new()
    (shared / "cardrag" / generation).mkdir(parents=True)
    (shared / "cardrag" / generation / "card-a").write_text("{}")
    moved = LocalGenerations(tmp_path / "store", parent_spec=None)  # the setting changed
    moved.drop(generation)
    assert (shared / "cardrag" / generation / "card-a").is_file()  # not reachable: not lost
    assert moved.generations() == [generation]  # listed, so a later ingest tries again
    assert f"keeps its parents in {shared}" in caplog.text
    first.drop(generation)
    assert not (shared / "cardrag" / generation).exists()
    assert first.generations() == []


def _pieces(settings: Settings, url: str, redis_url: str) -> tuple[set[str], set[str]]:
    """The namespace's collections, and the generations its Redis keys belong to."""
    from cardrag.ingest.index.collections import http_client

    ns = settings.namespace
    names = {c.name for c in http_client(url).list_collections() if c.name.startswith(f"{ns}-")}
    keys = redis.Redis.from_url(redis_url).keys(f"{ns}:*")
    owners = {k.decode().split(":")[1].split("/")[0] for k in keys}
    return names, owners - {"embeddings"}  # the embedding cache is shared by generations


def test_kill_9_at_every_step_of_a_client_server_ingest_leaves_nothing_behind(
    tmp_path: Path, shipped_cards: list[Card], chroma_url: str, redis_url: str
) -> None:
    from cardrag.ingest.index.remote import RemoteGenerations

    cards = card_folder(tmp_path / "cards", shipped_cards[:3])
    settings = Settings(
        cards_dir=cards, store_dir=tmp_path / "store", embedding_model=REAL_MODEL,
        chroma_url=chroma_url, parent_store=redis_url, namespace="crash", lock_lease_seconds=1,
    )  # fmt: skip
    env = {
        **os.environ,
        "CARDRAG_CHROMA_URL": chroma_url,
        "CARDRAG_PARENT_STORE": redis_url,
        "CARDRAG_NAMESPACE": "crash",
        "CARDRAG_EMBEDDING_MODEL": REAL_MODEL,
        "CARDRAG_STORE_DIR": str(settings.store_dir),
        "CARDRAG_CARDS_DIR": str(cards),
        "CARDRAG_LOCK_LEASE_SECONDS": "1",
    }
    generations = RemoteGenerations(chroma_url, "crash", settings.store_dir, redis_url)
    for _ in range(2):
        ingest_folder(settings)
    for step, nth in CRASHES:
        live = current_generation(settings)
        oldest = next(g for g in generations.generations() if g != live)  # the one collected
        if (step, nth) in LEASED:  # a server that served it died: its lease expired
            generations.lease(oldest, "dead-worker", -1.0)
        crash = subprocess.run(
            [sys.executable, "-m", "tests.ingest.index.crashing_ingest", step, str(nth)],
            env=env, cwd=PROJECT_ROOT, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert crash.returncode == -9, (step, nth, crash.stderr[-2000:])
        time.sleep(1.2)  # the dead writer's lock lease ends
        live = ingest_folder(settings).generation  # the next ingest, as an operator runs it
        kept = generations.generations()
        assert len(kept) == 2, (step, nth, kept)
        assert live in kept, (step, nth)
        assert oldest not in kept, (step, nth)
        names, owners = _pieces(settings, chroma_url, redis_url)
        assert names == {"crash-current"} | {f"crash-{kind}-{g}" for kind in KINDS for g in kept}
        assert owners == set(kept), (step, nth)


def test_what_a_crash_left_before_records_existed_is_collected_by_the_next_ingest(
    tmp_path: Path, shipped_cards: list[Card], chroma_url: str, redis_url: str
) -> None:
    from cardrag.ingest.index.collections import http_client

    cards = card_folder(tmp_path / "cards", shipped_cards[:2])
    settings = Settings(
        cards_dir=cards, store_dir=tmp_path / "store", embedding_model=REAL_MODEL,
        chroma_url=chroma_url, parent_store=redis_url, namespace="orphans",
    )  # fmt: skip
    ingest_folder(settings)
    # issue 50's state: a kill mid-collection removed the children first, no record then
    orphan = "index-20200101T000000-0a0b0c"
    http_client(chroma_url).create_collection(f"orphans-sentences-{orphan}")
    store = redis.Redis.from_url(redis_url)
    store.mset({f"orphans:{orphan}/card-{i}": b"{}" for i in range(44)})
    store.set(f"orphans:{orphan}:files/bm25/params", b"{}")
    ingest_folder(settings)
    names, owners = _pieces(settings, chroma_url, redis_url)
    assert not {n for n in names if orphan in n}
    assert orphan not in owners
    assert len(owners) == 2  # the live and the previous generation
