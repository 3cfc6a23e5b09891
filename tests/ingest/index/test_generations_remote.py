"""Client-server mode against real servers on loopback: ``chroma run`` and ``redis-server``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import chromadb
import httpx
import pytest
import redis
from fastapi.testclient import TestClient

from cardrag.app.cli import main as cli_main
from cardrag.app.context import Context
from cardrag.app.graph import answer
from cardrag.app.server import create_app
from cardrag.ingest.__main__ import run as ingest_run
from cardrag.ingest.cards import Card
from cardrag.ingest.index import current_generation, ingest_folder, parent_store
from cardrag.ingest.lexical import BM25Index
from cardrag.ingest.settings import Settings
from cardrag.retrievers.parent import ScoredParentDocumentRetriever
from tests.conftest import (
    REAL_MODEL,
    card_folder,
    free_port,
    start_chroma,
    start_redis,
    stop,
    wait_until,
)

QUESTIONS = [
    "How long can an insulin pen stay out of the fridge?",
    "Can I drink milk with my antibiotic?",
    "Am I supposed to take it on an empty stomach?",
]


@pytest.fixture(scope="module")
def cards(tmp_path_factory: pytest.TempPathFactory, shipped_cards: list[Card]) -> Path:
    picked = [c for c in shipped_cards if c.sensitivity == "restricted"] + shipped_cards[:12]
    return card_folder(tmp_path_factory.mktemp("server-cards"), picked)


def settings_for(root: Path, cards: Path, **servers: str) -> Settings:
    return Settings(
        cards_dir=cards, store_dir=root, embedding_model=REAL_MODEL, min_similarity=-1.0, **servers
    )


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory, cards: Path) -> Settings:
    settings = settings_for(tmp_path_factory.mktemp("embedded"), cards)
    ingest_folder(settings)
    return settings


@pytest.fixture(scope="module")
def remote(
    tmp_path_factory: pytest.TempPathFactory, cards: Path, chroma_url: str, redis_url: str
) -> Settings:
    settings = settings_for(
        tmp_path_factory.mktemp("remote"), cards, chroma_url=chroma_url, parent_store=redis_url
    )
    ingest_folder(settings)
    return settings


def _view(settings: Settings, question: str, **kwargs: object) -> list[tuple[object, ...]]:
    docs = Context.from_settings(settings).retriever.invoke(question, **kwargs)
    return [
        (d.id, round(d.metadata["score"], 5), d.metadata["matched_child_id"], d.page_content)
        for d in docs
    ]


@pytest.mark.parametrize("question", QUESTIONS)
def test_client_server_retrieval_equals_embedded(
    embedded: Settings, remote: Settings, question: str
) -> None:
    assert _view(remote, question) == _view(embedded, question)
    food = {"topics": {"$contains": "food-timing"}}
    assert _view(remote, question, filter=food, k=2) == _view(embedded, question, filter=food, k=2)


def test_the_graph_and_the_api_answer_the_same_from_servers(
    embedded: Settings, remote: Settings
) -> None:
    question = QUESTIONS[0]
    here = rounded(answer(question, Context.from_settings(embedded)).model_dump())
    there = rounded(answer(question, Context.from_settings(remote)).model_dump())
    assert there == here  # the server sends distances as float32: compared to 5 decimals
    with TestClient(create_app(remote)) as client:
        health = client.get("/healthz").json()
        assert (health["loaded"], health["cards"]) == (True, 13)  # 12, and 1 restricted
        assert rounded(client.post("/ask", json={"question": question}).json()) == here
        assert client.get("/cards/card-staff-escalation-protocol").status_code == 404
        assert client.get("/cards/card-adherence-reminders").json()["title"] == (
            "Remembering your medicines every day"
        )


def rounded(reply: dict[str, object]) -> dict[str, object]:
    cards = reply["retrieved"]
    assert isinstance(cards, list)
    return {**reply, "retrieved": [{**c, "score": round(c["score"], 5)} for c in cards]}


def test_a_worker_reads_bm25_from_beside_the_parents_not_from_every_row(
    remote: Settings, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    generation = current_generation(remote)
    stored = redis.Redis.from_url(redis_url).keys(f"cardrag:{generation}:files/bm25/*")
    assert {k.decode().rsplit("/", 1)[1] for k in stored} >= {
        "child_ids.json",
        "data.csc.index.npy",
        "vocab.index.json",
    }

    def rebuild(*args: object, **kwargs: object) -> None:
        raise AssertionError("a worker rebuilt BM25 from the rows")

    monkeypatch.setattr(BM25Index, "from_collections", rebuild)
    bm25 = Context.from_settings(remote).retriever.bm25
    assert bm25 is not None
    assert bm25.stemmed == tuple(remote.bm25_stem_languages)
    assert len(bm25.child_ids) == len(set(bm25.child_ids)) > 13


def test_upsert_and_delete_on_the_server(remote: Settings) -> None:
    retriever = Context.from_settings(remote).retriever
    assert isinstance(retriever, ScoredParentDocumentRetriever)
    from langchain_core.documents import Document

    card = Document(
        id="card-zz-test",
        page_content="Zebra tablets are taken with a zucchini smoothie at noon.",
        metadata={"parent_id": "card-zz-test", "title": "Zebra tablets", "sensitivity": "public"},
    )
    retriever.add_documents([card])
    assert retriever.invoke("zebra tablets zucchini smoothie", k=1)[0].id == "card-zz-test"
    retriever.delete(["card-zz-test"])
    assert "card-zz-test" not in [d.id for d in retriever.invoke("zebra zucchini", k=20)]


def test_reingest_moves_the_pointer_and_keeps_one_previous_generation(
    tmp_path: Path, cards: Path, chroma_url: str, redis_url: str
) -> None:
    # its own namespace on the same servers: the module's store is not touched
    settings = settings_for(
        tmp_path, cards, chroma_url=chroma_url, parent_store=redis_url, namespace="swaps"
    )
    generations = []
    for _ in range(3):
        generations.append(ingest_folder(settings).generation)
        assert current_generation(settings) == generations[-1]
    client = chromadb.HttpClient(host="127.0.0.1", port=int(chroma_url.rsplit(":", 1)[1]))
    names = {c.name for c in client.list_collections() if c.name.startswith("swaps-")}
    kept = generations[1:]
    assert names == {"swaps-current"} | {
        f"swaps-{kind}-{g}"
        for kind in ("record", "children", "cards", "restricted", "sentences")
        for g in kept
    }
    every = redis.Redis.from_url(redis_url).keys("swaps:*")
    cache = [k for k in every if k.startswith(b"swaps:embeddings/")]  # shared by generations
    files = [k for k in every if b":files/" in k]  # BM25's, one prefix per generation
    keys = [k for k in every if k not in cache and k not in files]  # parent records
    assert cache
    assert {k.decode().split(":")[1].split("/")[0] for k in keys} == set(generations[1:])
    assert len(keys) == 2 * 13  # two generations of 13 cards
    assert {k.decode().split(":")[1] for k in files} == set(generations[1:])  # dropped with it
    assert (
        current_generation(settings.model_copy(update={"namespace": "cardrag"}))
        != (generations[-1])
    )


def test_an_old_format_record_in_redis_is_read_with_defaults(redis_url: str) -> None:
    old = {"page_content": "Old text.", "metadata": {"parent_id": "card-old", "title": "Old"}}
    redis.Redis.from_url(redis_url).set("cardrag:gen-old/card-old", json.dumps(old))
    [doc] = parent_store(redis_url, "gen-old", Path("unused")).mget(["card-old"])
    assert doc is not None
    assert (doc.id, doc.page_content, doc.metadata["sensitivity"]) == (
        "card-old",
        "Old text.",
        "public",
    )


@pytest.fixture
def workers(remote: Settings) -> Iterator[list[str]]:
    """Two API worker processes (``cardrag serve``) on one Chroma server and one Redis."""
    env = {
        **os.environ,
        "CARDRAG_CHROMA_URL": str(remote.chroma_url),
        "CARDRAG_PARENT_STORE": str(remote.parent_store),
        "CARDRAG_EMBEDDING_MODEL": REAL_MODEL,
        "CARDRAG_STORE_DIR": str(remote.store_dir),
        "CARDRAG_MIN_SIMILARITY": "-1",
    }
    procs, urls = [], []
    for _ in range(2):
        port = free_port()
        cmd = [sys.executable, "-m", "cardrag.app.cli", "serve", "--port", str(port)]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"

        def ready(url: str = url) -> bool:
            try:
                return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, "cardrag serve", proc, seconds=120)
        procs.append(proc)
        urls.append(url)
    yield urls
    for proc in procs:
        stop(proc)


def test_two_workers_answer_from_one_store_while_it_is_reingested(
    workers: list[str], remote: Settings
) -> None:
    before = current_generation(remote)
    statuses: list[int] = []
    seen: set[str] = set()
    stop_event = threading.Event()

    def hammer(url: str) -> None:
        with httpx.Client(base_url=url, timeout=60) as client:
            while not stop_event.is_set():
                response = client.post("/ask", json={"question": QUESTIONS[1]})
                statuses.append(response.status_code)
                seen.add(response.json()["retrieved"][0]["id"])

    threads = [threading.Thread(target=hammer, args=(url,)) for url in workers for _ in range(2)]
    for thread in threads:
        thread.start()
    for _ in range(2):
        _empty_cache(remote)  # a re-ingest that embeds again
        ingest_folder(remote)
    stop_event.set()
    for thread in threads:
        thread.join()
    after = current_generation(remote)
    assert after != before
    assert len(statuses) >= 8
    assert set(statuses) == {200}
    assert seen == {"card-amoxicillin-course"}  # the same answer before, during and after
    assert {httpx.get(f"{url}/healthz").json()["index"] for url in workers} == {after}


def test_a_chroma_outage_is_a_503_to_retry_and_recovers_by_itself(
    tmp_path: Path, cards: Path, redis_url: str
) -> None:
    port = free_port()
    proc = start_chroma(tmp_path / "chroma", port)
    settings = settings_for(
        tmp_path / "store",
        cards,
        chroma_url=f"http://127.0.0.1:{port}",
        parent_store=redis_url,
        namespace="outage",
    )
    ingest_folder(settings)
    question = {"question": QUESTIONS[1]}
    try:
        with TestClient(create_app(settings)) as client:
            assert client.post("/ask", json=question).status_code == 200
            stop(proc)
            down = client.post("/ask", json=question)
            assert (down.status_code, down.headers["retry-after"], down.json()) == (
                503,
                "1",
                {"detail": "the knowledge base's servers do not answer; retry shortly"},
            )
            assert client.get("/healthz").status_code == 503
            proc = start_chroma(tmp_path / "chroma", port)  # same data, same port
            back = client.post("/ask", json=question)
            assert back.status_code == 200
            assert back.json()["retrieved"][0]["id"] == "card-amoxicillin-course"
    finally:
        stop(proc)


def test_redis_away_then_back_empty_is_a_degraded_503_until_reingested(
    tmp_path: Path,
    cards: Path,
    chroma_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = free_port()
    proc = start_redis(port)
    redis_at = f"redis://127.0.0.1:{port}/0"
    settings = settings_for(
        tmp_path, cards, chroma_url=chroma_url, parent_store=redis_at, namespace="redis-outage"
    )
    ingest_folder(settings)
    question = {"question": QUESTIONS[1]}
    try:
        with TestClient(create_app(settings)) as client:
            served = client.get("/healthz").json()["index"]
            assert client.post("/ask", json=question).status_code == 200
            stop(proc)
            assert client.get("/healthz").status_code == 503
            assert client.post("/ask", json=question).status_code == 503
            # the command line says so in one line, exit 2, for ingest and for a question
            env = {"STORE_DIR": str(tmp_path), "CHROMA_URL": chroma_url, "PARENT_STORE": redis_at}
            for name, value in {**env, "NAMESPACE": "redis-outage"}.items():
                monkeypatch.setenv(f"CARDRAG_{name}", value)
            monkeypatch.setenv("CARDRAG_EMBEDDING_MODEL", REAL_MODEL)
            capsys.readouterr()
            assert ingest_run(settings, None, clean=False) == 2
            assert cli_main(["ask", QUESTIONS[1]]) == 2
            down = f"CARDRAG_PARENT_STORE={redis_at}: the Redis server does not answer"
            said = capsys.readouterr().err.splitlines()
            assert [line.split(" (")[0] for line in said] == [
                f"ingest failed, previous index untouched: {down}",
                f"cardrag: {down}",
            ]
            proc = start_redis(port)  # back, but empty: nothing persisted
            health = client.get("/healthz")
            assert health.status_code == 503
            assert health.json()["detail"] == (
                f"degraded: the parent store of {served} holds no cards"
            )
            asked = client.post("/ask", json=question)  # not a 200 "does not cover this"
            assert (asked.status_code, asked.json()["detail"]) == (503, health.json()["detail"])
            ingest_folder(settings)
            assert client.get("/healthz").status_code == 200
            back = client.post("/ask", json=question)
            assert back.json()["retrieved"][0]["id"] == "card-amoxicillin-course"
    finally:
        stop(proc)


def test_a_second_writer_on_the_server_is_refused_naming_the_holder(remote: Settings) -> None:
    from cardrag.ingest.index import RemoteGenerations, StoreLockedError

    assert remote.chroma_url is not None
    generations = RemoteGenerations(
        str(remote.chroma_url), remote.namespace, remote.store_dir, remote.parent_store
    )
    live = current_generation(remote)
    refused = pytest.raises(StoreLockedError, match=rf"another ingest \(pid {os.getpid()} on ")
    with generations.lock(), refused:
        ingest_folder(remote)  # refused before the model loads or anything is written
    assert current_generation(remote) == live
    with generations.lock():  # released
        pass


def _empty_cache(settings: Settings) -> None:
    from cardrag.ingest.index.builder import cache_of

    vectors = cache_of(settings).vectors()
    vectors.mdelete(list(vectors.yield_keys()))


def test_the_embedding_cache_lives_in_the_parents_redis(remote: Settings, redis_url: str) -> None:
    from cardrag.ingest.index.builder import cache_of

    cache = cache_of(remote)
    assert cache.redis_url == redis_url
    again = ingest_folder(remote)
    assert again.manifest["changes"]["embedded"] == 0  # every text came from Redis
    assert again.manifest["changes"]["reused"] == len(list(cache.vectors().yield_keys()))
    assert not (remote.store_dir / "embeddings").exists()


def test_a_dead_writers_lock_is_taken_over_once_its_lease_expires(
    remote: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    from cardrag.ingest.index import RemoteGenerations, StoreLockedError
    from cardrag.ingest.index.collections import http_client

    assert remote.chroma_url is not None
    url = str(remote.chroma_url)

    def writer(lease: float, *, break_lock: bool = False) -> RemoteGenerations:
        return RemoteGenerations(
            url,
            remote.namespace,
            remote.store_dir,
            remote.parent_store,
            lease_seconds=lease,
            break_lock=break_lock,
        )

    name = f"{remote.namespace}-lock"
    # a writer killed with kill -9 leaves its lock behind, lease running
    dead = {"pid": 999999, "host": "gone", "since": "2026-12-01T00:00:00+00:00", "owner": "x"}
    http_client(url).create_collection(name, metadata={**dead, "expires": time.time() + 1.0})
    refused = pytest.raises(StoreLockedError, match=r"another ingest \(pid 999999 on gone")
    with refused, writer(120.0).lock():
        pass
    time.sleep(1.2)  # the lease ends: no one renewed it
    with caplog.at_level("WARNING"), writer(120.0).lock():
        held = http_client(url).get_collection(name).metadata or {}
        assert held["pid"] == os.getpid()
    assert "took over the writer lock of pid 999999 on gone" in caplog.text
    assert "its lease expired" in caplog.text
    # an operator who knows: --break-lock takes a live lease too
    http_client(url).create_collection(name, metadata={**dead, "expires": time.time() + 600})
    with writer(120.0, break_lock=True).lock():
        pass
    assert name not in [c.name for c in http_client(url).list_collections()]  # released


def test_a_running_writer_renews_its_lease(remote: Settings) -> None:
    from cardrag.ingest.index import RemoteGenerations
    from cardrag.ingest.index.collections import http_client

    assert remote.chroma_url is not None
    generations = RemoteGenerations(
        str(remote.chroma_url),
        remote.namespace,
        remote.store_dir,
        remote.parent_store,
        lease_seconds=3.0,
    )
    lock = f"{remote.namespace}-lock"
    with generations.lock():
        first = (http_client(str(remote.chroma_url)).get_collection(lock).metadata or {})["expires"]
        time.sleep(3.5)  # past the first lease: renewed every second (two or three times)
        later = (http_client(str(remote.chroma_url)).get_collection(lock).metadata or {})["expires"]
        assert later > first + 1.0
        assert later > time.time()  # still held: the lease never ran out


def test_after_kill_9_of_an_ingest_the_next_one_succeeds_once_the_lease_ends(
    remote: Settings,
) -> None:
    from cardrag.ingest.index.collections import http_client

    assert remote.chroma_url is not None
    env = {
        **os.environ,
        "CARDRAG_CHROMA_URL": str(remote.chroma_url),
        "CARDRAG_PARENT_STORE": str(remote.parent_store),
        "CARDRAG_EMBEDDING_MODEL": REAL_MODEL,
        "CARDRAG_STORE_DIR": str(remote.store_dir),
        "CARDRAG_CARDS_DIR": str(remote.cards_dir),
        "CARDRAG_LOCK_LEASE_SECONDS": "3",
    }
    cmd = [sys.executable, "-m", "cardrag.app.cli", "ingest"]
    name = f"{remote.namespace}-lock"
    client = http_client(str(remote.chroma_url))
    live = current_generation(remote)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(
            lambda: name in [c.name for c in client.list_collections()], "the lock", proc, 60
        )
        proc.kill()  # kill -9 while it holds the lock
        proc.wait(timeout=30)
    finally:
        stop(proc)
    assert name in [c.name for c in client.list_collections()]  # the dead writer's lock stays
    blocked = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if blocked.returncode == 2:  # still inside the dead writer's lease
        assert "another ingest (pid" in blocked.stderr
        time.sleep(3.5)
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "took over the writer lock of pid" in again.stderr + blocked.stderr
    assert current_generation(remote) != live
    assert name not in [c.name for c in client.list_collections()]


def test_a_generation_a_server_leases_is_never_collected(remote: Settings) -> None:
    from cardrag.ingest.index import RemoteGenerations
    from cardrag.ingest.index.generations import collect

    assert remote.chroma_url is not None
    generations = RemoteGenerations(
        str(remote.chroma_url), remote.namespace, remote.store_dir, remote.parent_store
    )
    live = current_generation(remote)
    generations.lease(live, "worker-1", 60)
    assert generations.leased(time.time()) == {live}
    assert generations.leased(time.time() + 61) == set()  # a dead server's lease ends
    with generations.lock():
        dropped = collect(generations, keep=set())  # keep nothing: only leases protect
    assert live not in dropped
    assert live in generations.generations()
    generations.release(live, "worker-1")
    assert generations.leased(time.time()) == set()
    assert current_generation(remote) == live
