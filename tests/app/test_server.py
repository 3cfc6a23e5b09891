from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from langchain_core.embeddings import Embeddings

from cardrag.app.server import create_app
from cardrag.app.server import running as live_server
from cardrag.ingest.cards import Card
from cardrag.ingest.index import ingest_folder
from cardrag.ingest.settings import Settings
from tests.conftest import REAL_MODEL, card_folder

NARROW = "How long can an insulin pen stay out of the fridge?"


@pytest.fixture(scope="module")
def settings(shipped_index_dir: Path) -> Settings:
    # the session's shipped index: children only, built with all-MiniLM-L6-v2
    return Settings(store_dir=shipped_index_dir, embedding_model=REAL_MODEL, card_rows=False)


@pytest.fixture(scope="module")
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as client:
        yield client


def test_healthz_reports_the_loaded_store(client: TestClient) -> None:
    body = client.get("/healthz").json()
    assert body["index"].startswith("index-")
    assert {k: body[k] for k in ("loaded", "embedding_model", "cards", "children", "detail")} == {
        "loaded": True,
        "embedding_model": REAL_MODEL,
        "cards": 38,
        "children": 164,
        "detail": None,
    }


def test_ask_returns_the_structured_reply(client: TestClient) -> None:
    response = client.post("/ask", json={"question": f"  {NARROW} "})
    assert response.status_code == 200
    reply = response.json()
    assert reply["question"] == NARROW
    assert reply["answer"] == (
        "Keep unopened pens, cartridges and vials in the fridge, between 2 and 8 degrees "
        "Celsius, away from the freezer compartment and the back wall where items can freeze. "
        "The pen or vial you are using can stay at room temperature, below 25 to 30 degrees "
        "depending on the brand, for about four weeks. [cite:card-insulin-storage]"
    )
    assert reply["citations"] == [
        {"id": "card-insulin-storage", "title": "Insulin: storing pens and vials"}
    ]
    top = reply["retrieved"][0]
    assert (top["id"], top["matched_child_id"]) == (
        "card-insulin-storage",
        "card-insulin-storage::02",
    )
    assert (top["matched_start_index"], top["matched_end_index"]) == (424, 802)
    # grading (all-MiniLM-L6-v2's calibration) drops the third retrieved card, the time-zones
    # one (its similarity 0.393 is the lowest of the four): the rank is the retriever's
    assert [(c["id"], c["rank"]) for c in reply["retrieved"]] == [
        ("card-insulin-storage", 1),
        ("card-storage-heat-humidity", 2),
        ("card-travel-carry-on", 4),
    ]
    assert (reply["refused"], reply["uncited"], reply["rejected_citations"]) == (False, False, [])


def test_k_bounds_the_cards_retrieved(client: TestClient) -> None:
    reply = client.post("/ask", json={"question": NARROW, "k": 2}).json()
    assert [c["id"] for c in reply["retrieved"]] == [
        "card-insulin-storage",
        "card-storage-heat-humidity",
    ]


def test_an_off_topic_question_is_refused(client: TestClient) -> None:
    reply = client.post("/ask", json={"question": "Who won the football world cup in 1966?"}).json()
    assert (reply["refused"], reply["retrieved"], reply["citations"]) == (True, [], [])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"question": ""}, "Value error, the question is empty"),
        ({"question": " \n "}, "Value error, the question is empty"),
        (
            {"question": "x" * 2001},
            "Value error, the question is 2001 characters long; the limit is 2000",
        ),
        ({}, "Field required"),
        ({"question": 42}, "Input should be a valid string"),
        ({"question": "ok?", "k": 0}, "Input should be greater than or equal to 1"),
        ({"question": "ok?", "k": 21}, "Input should be less than or equal to 20"),
    ],
)
def test_bad_questions_get_422_with_a_message(
    client: TestClient, body: dict[str, object], message: str
) -> None:
    response = client.post("/ask", json=body)
    assert response.status_code == 422
    assert [d["msg"] for d in response.json()["detail"]] == [message]


def test_a_question_of_exactly_2000_characters_is_accepted(client: TestClient) -> None:
    question = ("Can I drink alcohol with it? " * 70)[:2000]
    assert client.post("/ask", json={"question": question}).status_code == 200


def test_cards_are_served_by_id(client: TestClient, shipped_cards: list[Card]) -> None:
    card = next(c for c in shipped_cards if c.id == "card-insulin-storage")
    assert client.get("/cards/card-insulin-storage").json() == {
        "id": card.id,
        "title": card.title,
        "body": card.body,
        "topics": ["storage", "travel", "diabetes"],
        "license": "CC-BY-4.0",
        "accessed_at": "2026-11-20",
    }


@pytest.mark.parametrize(
    "card_id", ["card-nope", "card-staff-escalation-protocol", "card-controlled-drugs-audit", "x"]
)
def test_unknown_and_restricted_cards_are_the_same_404(client: TestClient, card_id: str) -> None:
    response = client.get(f"/cards/{card_id}")
    assert (response.status_code, response.json()) == (404, {"detail": "card not found"})


def test_the_page_is_served(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert '<form id="ask-form">' in page.text
    assert client.get("/static/app.js").status_code == 200


@pytest.mark.real
def test_a_missing_store_is_a_503_until_it_is_ingested(
    tmp_path: Path, shipped_cards: list[Card]
) -> None:
    cards = card_folder(tmp_path / "cards", shipped_cards[:4])
    settings = Settings(cards_dir=cards, store_dir=tmp_path / "store", embedding_model=REAL_MODEL)
    with TestClient(create_app(settings)) as client:
        health = client.get("/healthz")
        assert health.status_code == 503
        assert health.json()["loaded"] is False
        expected = (
            f"{tmp_path / 'store'}: no index found; "
            "build one with `cardrag ingest` (or `make ingest`)"
        )
        assert health.json()["detail"] == expected
        asked = client.post("/ask", json={"question": NARROW})
        assert (asked.status_code, asked.json()) == (503, {"detail": expected})
        ingest_folder(settings)  # no restart: the next request finds the index
        assert client.get("/healthz").json()["cards"] == 4
        assert client.post("/ask", json={"question": NARROW}).status_code == 200


@pytest.mark.real
def test_concurrent_requests_and_a_reingest_while_serving_never_fail(
    tmp_path: Path, shipped_cards: list[Card]
) -> None:
    cards = card_folder(tmp_path / "cards", shipped_cards[:8])
    settings = Settings(
        cards_dir=cards, store_dir=tmp_path / "store", embedding_model=REAL_MODEL, card_rows=False
    )
    ingest_folder(settings)
    statuses: list[int] = []
    stop = threading.Event()

    def hammer(base: str) -> None:
        with httpx.Client(base_url=base, timeout=60) as http:
            while not stop.is_set():
                statuses.append(http.post("/ask", json={"question": NARROW}).status_code)

    with live_server(settings) as base:
        before = httpx.get(f"{base}/healthz").json()["index"]
        workers = [threading.Thread(target=hammer, args=(base,)) for _ in range(4)]
        for worker in workers:
            worker.start()
        for _ in range(2):  # two swaps: the index in use is replaced, then its successor
            shutil.rmtree(settings.store_dir / "embeddings")  # a re-ingest that embeds again
            ingest_folder(settings)
        stop.set()
        for worker in workers:
            worker.join()
        after = httpx.get(f"{base}/healthz").json()["index"]
    assert after != before
    assert len(statuses) >= 8
    assert set(statuses) == {200}


def test_a_lone_surrogate_or_an_unknown_field_is_a_422_with_the_reason(client: TestClient) -> None:
    response = client.post(
        "/ask",
        content=b'{"question": "insulin \\ud800 fridge"}',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 422
    assert response.json()["detail"][0]["msg"] == (
        "Value error, the question is not valid text (character 9 cannot be encoded)"
    )
    extra = client.post("/ask", json={"question": NARROW, "allow_restricted": True})
    assert extra.status_code == 422
    assert extra.json()["detail"][0]["msg"] == "Extra inputs are not permitted"


def test_an_over_long_body_is_refused_before_it_is_read(client: TestClient) -> None:
    big = {"question": NARROW, "pad": "x" * 40_000}
    declared = client.post("/ask", json=big)
    assert (declared.status_code, declared.json()) == (
        413,
        {"detail": "the request body is larger than 32768 bytes"},
    )

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams in
        yield b'{"question": "'
        for _ in range(40):
            yield b"x" * 1000
        yield b'"}'

    streamed = client.post("/ask", content=chunks(), headers={"content-type": "application/json"})
    assert streamed.status_code == 413


@pytest.mark.parametrize("card_id", ["card-insulin-storage%0A", "card-" + "a" * 300])
def test_odd_card_ids_are_a_plain_404(client: TestClient, card_id: str) -> None:
    response = client.get(f"/cards/{card_id}")
    assert (response.status_code, response.json()) == (404, {"detail": "card not found"})


@pytest.mark.parametrize("path", ["/", "/healthz", "/cards/card-nope"])
def test_every_response_carries_the_security_headers(client: TestClient, path: str) -> None:
    headers = client.get(path).headers
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["x-frame-options"] == "DENY"
    assert headers["content-security-policy"].startswith("default-src 'self'")


def _store(root: Path, cards: list[Card], embeddings: Embeddings, model: str) -> None:
    """A store (one more generation) built with ``embeddings``, recorded as ``model``."""
    from cardrag.ingest.index import build_index
    from cardrag.ingest.splitter import CardSplitter

    manifest = {"embedding_model": model}
    build_index(cards, root, embeddings, CardSplitter(), progress=False, extra_manifest=manifest)


@pytest.mark.real
def test_a_store_built_with_another_model_is_a_503_with_the_reason(
    tmp_path: Path, shipped_cards: list[Card]
) -> None:
    from tests.conftest import FakeEmbeddings

    _store(tmp_path, shipped_cards[:2], FakeEmbeddings(), "another-model")
    settings = Settings(store_dir=tmp_path, embedding_model=REAL_MODEL)
    with TestClient(create_app(settings)) as client:  # starts: no traceback, no exit 3
        health = client.get("/healthz")
        assert health.status_code == 503
        assert "built with embedding model 'another-model'" in health.json()["detail"]
        ask = client.post("/ask", json={"question": NARROW})
        assert ask.status_code == 503
        assert "built with embedding model 'another-model'" in ask.json()["detail"]


@pytest.mark.real
def test_a_newer_index_that_cannot_be_opened_leaves_the_served_one_answering(
    tmp_path: Path, shipped_cards: list[Card], real_embeddings: Embeddings
) -> None:
    from tests.conftest import FakeEmbeddings

    cards = [c for c in shipped_cards if c.id == "card-insulin-storage"]
    _store(tmp_path, cards, real_embeddings, REAL_MODEL)
    settings = Settings(store_dir=tmp_path, embedding_model=REAL_MODEL, min_similarity=0.0)
    with TestClient(create_app(settings)) as client:
        first = client.get("/healthz").json()
        assert (first["loaded"], first["stale"]) == (True, False)
        _store(tmp_path, cards, FakeEmbeddings(), "another-model")  # a re-ingest, wrong model
        health = client.get("/healthz").json()
        assert (health["loaded"], health["stale"], health["index"]) == (
            True,
            True,
            first["index"],
        )
        assert "cannot be served: " in health["detail"]
        assert "another-model" in health["detail"]
        reply = client.post("/ask", json={"question": NARROW})
        assert reply.status_code == 200
        assert [c["id"] for c in reply.json()["citations"]] == ["card-insulin-storage"]
        # a second re-ingest used to collect the generation still served: it is leased
        _store(tmp_path, cards, FakeEmbeddings(), "another-model")
        assert (tmp_path / first["index"]).is_dir()
        again = client.post("/ask", json={"question": NARROW})
        assert [c["id"] for c in again.json()["citations"]] == ["card-insulin-storage"]
        assert client.get("/healthz").json()["stale"] is True


@contextmanager
def _serving_insulin(
    tmp_path: Path, shipped_cards: list[Card], embeddings: Embeddings
) -> Iterator[tuple[TestClient, str, list[Card]]]:
    """A server on a store of the insulin card alone: its client, the generation it serves."""
    cards = [c for c in shipped_cards if c.id == "card-insulin-storage"]
    _store(tmp_path, cards, embeddings, REAL_MODEL)
    settings = Settings(store_dir=tmp_path, embedding_model=REAL_MODEL, min_similarity=0.0)
    with TestClient(create_app(settings)) as client:
        yield client, client.get("/healthz").json()["index"], cards


@pytest.mark.real
def test_a_generation_gone_under_the_server_is_a_503_then_the_new_one_serves(
    tmp_path: Path, shipped_cards: list[Card], real_embeddings: Embeddings
) -> None:
    with _serving_insulin(tmp_path, shipped_cards, real_embeddings) as (client, served, cards):
        shutil.rmtree(tmp_path / served)  # removed by hand, behind the server's lease
        health = client.get("/healthz")
        assert health.status_code == 503  # within one request
        assert health.json()["degraded"] is True
        assert f"the index it served, {served}, is gone" in health.json()["detail"]
        assert client.post("/ask", json={"question": NARROW}).status_code == 503
        _store(tmp_path, cards, real_embeddings, REAL_MODEL)  # a re-ingest
        back = client.get("/healthz")
        assert (back.status_code, back.json()["degraded"]) == (200, False)
        assert back.json()["index"] != served
        reply = client.post("/ask", json={"question": NARROW})
        assert [c["id"] for c in reply.json()["citations"]] == ["card-insulin-storage"]


@pytest.mark.real
def test_an_emptied_parent_store_is_a_degraded_503_with_the_reason(
    tmp_path: Path, shipped_cards: list[Card], real_embeddings: Embeddings
) -> None:
    with _serving_insulin(tmp_path, shipped_cards, real_embeddings) as (client, served, _):
        shutil.rmtree(tmp_path / served / "parents")
        health = client.get("/healthz")
        assert health.status_code == 503
        assert health.json()["detail"] == f"degraded: the parent store of {served} holds no cards"
        asked = client.post("/ask", json={"question": NARROW})  # not a 200 refusal
        assert asked.status_code == 503
        assert asked.json()["detail"] == f"degraded: the parent store of {served} holds no cards"


def _open_files_under(folder: Path) -> list[str]:
    """This process's open file descriptors whose target lies under ``folder``."""
    fds = Path("/proc/self/fd")
    targets = []
    for fd in fds.iterdir():
        try:
            targets.append(str(fd.readlink()))
        except OSError:  # closed while listing
            continue
    return [t for t in targets if t.startswith(str(folder))]


def _released(folder: Path, within: float = 5.0) -> bool:
    """Whether this process holds no file under ``folder`` within ``within`` seconds.

    Chroma's Rust engine closes its SQLite connections on its own runtime after the client is
    closed: the descriptors go 0-2 ms later (measured), not at the moment ``close`` returns.
    """
    deadline = time.monotonic() + within
    while _open_files_under(folder):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.mark.real
def test_the_server_releases_the_generations_it_no_longer_serves(
    tmp_path: Path, shipped_cards: list[Card]
) -> None:
    from cardrag.app.service import Service

    cards = card_folder(tmp_path / "cards", shipped_cards[:2])
    settings = Settings(store_dir=tmp_path / "store", embedding_model=REAL_MODEL)

    def reingest() -> str:  # as `cardrag ingest` would, which then exits
        index = ingest_folder(settings, cards)
        index.close()
        return index.generation

    generations = [reingest()]
    service = Service(settings)
    service.current()
    for _ in range(3):
        generations.append(reingest())
        assert service.current().index.generation == generations[-1]
    # served: the newest; kept open: the one before it (a request may still be on it);
    # released: every older one (their folders are gone from disk too)
    for old in generations[:-2]:
        assert _released(tmp_path / "store" / old), _open_files_under(tmp_path / "store" / old)
    assert _open_files_under(tmp_path / "store" / generations[-1]) != []


def test_the_shipped_internal_card_is_not_shown_to_patients(client: TestClient) -> None:
    # issue 19: card-refill-requests ("written for team members") was served and cited
    asked = client.post(
        "/ask", json={"question": "What is the on-call pharmacist direct line code?"}
    )
    card = client.get("/cards/card-refill-requests")
    assert asked.status_code == 200
    assert "card-refill-requests" not in asked.text
    assert (card.status_code, card.json()) == (404, {"detail": "card not found"})
