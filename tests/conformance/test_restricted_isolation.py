"""A restricted card never escapes, and an internal one reaches staff only: not through
retrieval, BM25, parent expansion, the graph, the CLI or the logs, even when the question
quotes its text verbatim.

Every test runs with the planted card ``restricted`` and again ``internal`` (written for staff:
shown only to a request that asks for staff access on a deployment that allows it).

Paths covered here, each with the ``parent_child`` and the ``sentence_window`` chunker (whose
children carry a window of the planted card's neighbouring sentences), and in client-server
mode (Chroma over HTTP, parents in Redis): dense retrieval, hybrid
(BM25) retrieval, card rows, parent expansion (a restricted parent reached through a child that
slipped past the query filter), the answering graph, the ``cardrag ask`` and ``retrieve``
commands, the web API (``POST /ask``, ``GET /cards/{id}``, ``GET /healthz``), and every log
record.
"""

from __future__ import annotations

import json
import logging
import re

import pytest
from fastapi.testclient import TestClient
from langchain_core.documents import Document

from cardrag.app.cli import main
from cardrag.app.context import Context
from cardrag.app.graph import answer
from cardrag.app.server import create_app
from cardrag.ingest.cards import Card
from cardrag.ingest.index import ingest_folder
from cardrag.ingest.settings import Settings
from cardrag.retrievers.child_hit import ChildHit
from cardrag.retrievers.expansion import select
from cardrag.retrievers.fusion import ParentHit
from cardrag.retrievers.parent import ScoredParentDocumentRetriever
from tests.conftest import REAL_MODEL, card_folder

pytestmark = pytest.mark.real  # real models, a Chroma server, the CLI and the API

SECRET = "The vault override phrase is ZEBRA-42-OMEGA and only supervisors may read it aloud."
PLANTED = """---
id: card-vault-override
title: "Vault override phrase"
license: CC-BY-4.0
topics: [process]
accessed_at: 2026-11-20
sensitivity: {sensitivity}
---

{secret}

Supervisors rotate the phrase every month and record the change in the vault log.
"""
FRAGMENTS = ["card-vault-override", "Vault override phrase", "Supervisors rotate", "vault log"]
"""Text only the card can supply: the question quotes its first sentence, so that one is echoed
back as the question itself; these come from its id, its title and its second paragraph."""


PLANTINGS = [
    (mode, sensitivity)
    for sensitivity in ("restricted", "internal")
    for mode in ("parent_child", "sentence_window", "client-server")
]
OPT_IN = {"restricted": "allow_restricted", "internal": "allow_internal"}
"""The retriever field that lets a caller see the planted card."""


@pytest.fixture(scope="module", params=PLANTINGS, ids=["-".join(p) for p in PLANTINGS])
def planted(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    shipped_cards: list[Card],
) -> tuple[Settings, str]:
    mode, sensitivity = request.param
    root = tmp_path_factory.mktemp(f"{sensitivity}-{mode}")
    card_folder(root / "cards", shipped_cards[:6])
    (root / "cards" / "vault-override.md").write_text(
        PLANTED.format(sensitivity=sensitivity, secret=SECRET), encoding="utf-8"
    )
    servers = {}
    if mode == "client-server":  # Chroma and Redis on loopback
        servers = {
            "chroma_url": request.getfixturevalue("chroma_url"),
            "parent_store": request.getfixturevalue("redis_url"),
            "namespace": f"conformance-{sensitivity}",
        }
    settings = Settings(
        cards_dir=root / "cards",
        store_dir=root / "store",
        embedding_model=REAL_MODEL,
        min_similarity=-1.0,
        chunker="parent_child" if mode == "client-server" else mode,
        **servers,
    )
    ingest_folder(settings)
    return settings, sensitivity


@pytest.fixture(scope="module")
def settings(planted: tuple[Settings, str]) -> Settings:
    return planted[0]


@pytest.fixture(scope="module")
def sensitivity(planted: tuple[Settings, str]) -> str:
    return planted[1]


def _cli_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment ``cardrag`` reads, set to these settings."""
    for key, value in {
        "CARDRAG_CARDS_DIR": settings.cards_dir,
        "CARDRAG_STORE_DIR": settings.store_dir,
        "CARDRAG_EMBEDDING_MODEL": REAL_MODEL,
        "CARDRAG_MIN_SIMILARITY": "-1",
        "CARDRAG_CHUNKER": settings.chunker,
        "CARDRAG_CHROMA_URL": settings.chroma_url or "",  # empty = unset
        "CARDRAG_PARENT_STORE": settings.parent_store or "",
        "CARDRAG_NAMESPACE": settings.namespace,
    }.items():
        monkeypatch.setenv(key, str(value))


def _leaks(text: str) -> list[str]:
    return [f for f in FRAGMENTS if f in text]


@pytest.mark.parametrize("mode", ["dense", "hybrid", "hybrid+card"])
def test_retrieval_never_returns_it(settings: Settings, mode: str) -> None:
    overrides = {
        "dense": {"hybrid": False, "card_rows": False},
        "hybrid": {"hybrid": True, "card_rows": False},
        "hybrid+card": {"hybrid": True, "card_rows": True},
    }[mode]
    ctx = Context.from_settings(settings.model_copy(update=overrides))
    docs = ctx.retriever.invoke(SECRET, k=7)
    assert len(docs) == 6  # every public card comes back, the restricted one never does
    assert _leaks(json.dumps([[d.id, d.page_content, d.metadata] for d in docs], default=str)) == []


@pytest.mark.parametrize("sensitivity", ["restricted", "internal"])
def test_expansion_drops_the_parent_even_if_a_child_slipped_through(sensitivity: str) -> None:
    hit = ParentHit(
        "card-vault-override",
        0.99,
        ChildHit("card-vault-override::00", "card-vault-override", 0.99),
    )
    parent = Document(
        id="card-vault-override", page_content=SECRET, metadata={"sensitivity": sensitivity}
    )
    assert select([hit], [parent], 4, allow_restricted=False) == ([], [])


def test_the_graph_and_the_logs_never_show_it(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        reply = answer(SECRET, Context.from_settings(settings))
    assert "card-vault-override" not in [c.id for c in reply.retrieved]
    assert _leaks(reply.model_dump_json()) == []
    assert _leaks("\n".join(r.getMessage() for r in caplog.records)) == []


def test_the_cli_never_prints_it(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _cli_env(settings, monkeypatch)
    printed = []
    for argv in (["ask", SECRET, "--json"], ["ask", SECRET], ["retrieve", SECRET, "--k", "7"]):
        assert main(argv) == 0
        out = capsys.readouterr()
        assert _leaks(out.out + out.err) == []
        printed.append(out.out)
    # the store really was read: grading refuses the question, naming the closest public card
    # (never the planted one), and retrieve lists public cards
    assert json.loads(printed[0])["refused"] is True
    assert 'The closest card, "' in printed[1]
    assert len(set(re.findall(r"card-[\w-]+", printed[2]))) == 6  # the six public cards


def test_seeing_it_is_an_explicit_opt_in(settings: Settings, sensitivity: str) -> None:
    ctx = Context.from_settings(settings)
    assert isinstance(ctx.retriever, ScoredParentDocumentRetriever)
    opened = ctx.retriever.model_copy(update={OPT_IN[sensitivity]: True})
    assert opened.invoke(SECRET, k=1)[0].id == "card-vault-override"


def test_the_planted_card_really_has_windows_around_its_secret(
    settings: Settings, sensitivity: str
) -> None:
    """Without this the sentence-window runs would prove nothing about windows."""
    ctx = Context.from_settings(settings)
    opened = ctx.retriever.model_copy(update={OPT_IN[sensitivity]: True})
    [doc] = opened.invoke(SECRET, k=1)
    if settings.chunker == "sentence_window":
        assert doc.metadata["matched_child_id"] == "card-vault-override::00"
        assert "Supervisors rotate" in doc.metadata["prompt_text"]
    else:
        assert "prompt_text" not in doc.metadata


def test_the_api_never_serves_it(settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG), TestClient(create_app(settings)) as client:
        asked = client.post("/ask", json={"question": SECRET, "k": 7})
        card = client.get("/cards/card-vault-override")
        health = client.get("/healthz")
    assert asked.status_code == 200
    # grading refuses it; its reason names the closest card read from the store, a public one
    assert asked.json()["refusal_reason"].startswith('The closest card, "')
    assert _leaks(asked.text) == []
    assert (card.status_code, card.json()) == (404, {"detail": "card not found"})
    assert _leaks(health.text) == []
    # the test client's own log names the URL it asked for; everything else must be clean
    server_logs = [r.getMessage() for r in caplog.records if not r.name.startswith("httpx")]
    assert server_logs
    assert _leaks("\n".join(server_logs)) == []


def test_staff_access_is_refused_unless_the_deployment_allows_it(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with TestClient(create_app(settings)) as client:
        asked = client.post("/ask", json={"question": SECRET, "staff": True})
        card = client.get("/cards/card-vault-override", params={"staff": "true"})
    expected = "staff access is not enabled here (set CARDRAG_STAFF_ACCESS=true to allow it)"
    assert (asked.status_code, asked.json()) == (403, {"detail": expected})
    assert (card.status_code, card.json()) == (403, {"detail": expected})
    _cli_env(settings, monkeypatch)
    assert main(["ask", SECRET, "--staff"]) == 2
    out = capsys.readouterr()
    assert (out.out, out.err) == ("", f"cardrag: {expected}\n")


def test_staff_see_an_internal_card_and_never_a_restricted_one(
    settings: Settings,
    sensitivity: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    allowed = settings.model_copy(update={"staff_access": True})
    with TestClient(create_app(allowed)) as client:
        staff = client.post("/ask", json={"question": SECRET, "k": 7, "staff": True})
        public = client.post("/ask", json={"question": SECRET, "k": 7})
        card = client.get("/cards/card-vault-override", params={"staff": "true"})
        unasked = client.get("/cards/card-vault-override")
    assert public.status_code == staff.status_code == 200
    assert _leaks(public.text) == []
    assert unasked.status_code == 404
    monkeypatch.setenv("CARDRAG_STAFF_ACCESS", "true")
    _cli_env(settings, monkeypatch)
    assert main(["retrieve", SECRET, "--k", "7", "--staff"]) == 0
    printed = capsys.readouterr().out
    retrieved = [c["id"] for c in staff.json()["retrieved"]]
    if sensitivity == "internal":
        assert retrieved[0] == "card-vault-override"
        assert card.status_code == 200
        assert card.json()["body"].startswith(SECRET)
        assert printed.splitlines()[1].startswith("#1 (")  # ranked first
        assert "  card-vault-override  " in printed.splitlines()[1]
    else:
        assert "card-vault-override" not in retrieved
        assert _leaks(staff.text) == []
        assert (card.status_code, card.json()) == (404, {"detail": "card not found"})
        assert _leaks(printed) == []
