"""The index on servers every worker reaches: Chroma over HTTP, parents in Redis (or a folder).

With ``CARDRAG_CHROMA_URL`` set, each ingest writes a new generation: children into a new
collections ``{namespace}-{kind}-{generation}`` (kind: children, cards, restricted; see
:mod:`ingest.store`) and parents into the parent store under
``{namespace}:{generation}``. Only when both are complete does it update the pointer, the
metadata of the collection ``{namespace}-current`` (one Chroma call: the server applies it
atomically). ``CARDRAG_NAMESPACE`` (default ``cardrag``) lets several knowledge bases share
one Chroma server and one Redis. Readers
follow the pointer; the generation before the new one is kept so requests that started on it
can finish, and older generations are deleted.

BM25 is not stored on the server: each process rebuilds it from the collection when it opens a
generation (a few hundred milliseconds at 10,000 children).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import chromadb
from chromadb.api import ClientAPI
from chromadb.config import Settings as ChromaSettings
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import BaseStore

from ingest.cards import Card
from ingest.lexical import BM25Index
from ingest.settings import Settings
from ingest.splitter import CardSplitter
from ingest.store import (
    COLLECTION_NAME,
    KINDS,
    Collections,
    Index,
    StoreMissingError,
    check_model,
    drop_parent_store,
    make_manifest,
    new_generation,
    open_collections,
    parent_store,
    upsert_documents,
)

logger = logging.getLogger(__name__)


def pointer_name(namespace: str) -> str:
    """The collection whose metadata names the live generation (it holds no rows)."""
    return f"{namespace}-current"


def prefix(namespace: str) -> str:
    """Children collections are ``{namespace}-children-{generation}``."""
    return f"{namespace}-{COLLECTION_NAME}-"


def generation_collections(
    client: ClientAPI, namespace: str, generation: str, embeddings: Embeddings
) -> Collections:
    """One generation's collections: ``{namespace}-{kind}-{generation}``."""
    return open_collections(client, embeddings, f"{namespace}-", f"-{generation}")


class StoreUnavailableError(ConnectionError):
    """The Chroma server (or Redis) does not answer; the request may be retried."""


@functools.cache
def http_client(url: str) -> ClientAPI:
    """A Chroma HTTP client for ``http(s)://host:port``, telemetry off, one per process.

    Raises:
        StoreUnavailableError: when the server does not answer.
    """
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        msg = f"CARDRAG_CHROMA_URL must look like http://host:port, got {url!r}"
        raise ValueError(msg)
    try:
        return chromadb.HttpClient(
            host=parsed.hostname,
            port=parsed.port or (443 if parsed.scheme == "https" else 8000),
            ssl=parsed.scheme == "https",
            settings=ChromaSettings(anonymized_telemetry=False),
        )
    except ValueError as exc:  # chromadb's "Could not connect to a Chroma server"
        raise StoreUnavailableError(f"{url}: the Chroma server does not answer") from exc


def read_pointer(url: str, namespace: str) -> tuple[str, dict[str, Any]]:
    """The live generation and its manifest.

    Raises:
        StoreMissingError: when nothing has been ingested into this server.
    """
    client = http_client(url)
    metadata = client.get_or_create_collection(pointer_name(namespace)).metadata or {}
    generation = metadata.get("generation")
    if not isinstance(generation, str):
        msg = (
            f"{url} ({namespace}): no index found; build one with `cardrag ingest` "
            "(or `make ingest`)"
        )
        raise StoreMissingError(msg)
    return generation, json.loads(str(metadata.get("manifest", "{}")))


def parents_of(settings: Settings, generation: str) -> BaseStore[str, Document]:
    """One generation's parent store (a local folder when ``CARDRAG_PARENT_STORE`` is unset)."""
    return parent_store(
        settings.parent_store, generation, _parents_folder(settings, generation), settings.namespace
    )


def _parents_folder(settings: Settings, generation: str) -> Path:
    return settings.store_dir / "parents" / generation


def open_remote(settings: Settings, embeddings: Embeddings) -> Index:
    """Open the generation the pointer names."""
    url = str(settings.chroma_url)
    generation, manifest = read_pointer(url, settings.namespace)
    check_model(f"{url} ({generation})", manifest, settings.embedding_model)
    stores = generation_collections(http_client(url), settings.namespace, generation, embeddings)
    return Index(
        path=settings.store_dir / generation,
        collections=stores,
        docstore=parents_of(settings, generation),
        manifest=manifest,
        bm25=BM25Index.from_collections(stores.with_children(), settings.bm25_languages),
        generation=generation,
    )


def build_remote(
    cards: Sequence[Card], settings: Settings, embeddings: Embeddings, splitter: CardSplitter
) -> Index:
    """Write a complete new generation, then move the pointer; drop generations before the last."""
    url = str(settings.chroma_url)
    client = http_client(url)
    generation = new_generation()
    namespace = settings.namespace
    try:
        stores = generation_collections(client, namespace, generation, embeddings)
        docstore = parents_of(settings, generation)
        written = upsert_documents(
            stores, docstore, splitter, [c.to_document() for c in cards], progress=True
        )
        rows = ((str(d.id), d.page_content, d.metadata) for d in written)
        bm25 = BM25Index.from_rows(rows, settings.bm25_languages)
        extra = {"embedding_model": settings.embedding_model, "chroma_url": url}
        manifest = make_manifest(splitter, len(cards), len(written), extra)
    except BaseException:
        logger.warning("ingest failed; removing the partial generation %s", generation)
        _drop(client, settings, generation)
        raise
    pointer = client.get_or_create_collection(pointer_name(namespace))
    previous = (pointer.metadata or {}).get("generation")
    pointer.modify(metadata={"generation": generation, "manifest": json.dumps(manifest)})
    keep = {generation, previous}
    for collection in client.list_collections():
        old = collection.name.removeprefix(prefix(namespace))
        if collection.name.startswith(prefix(namespace)) and old not in keep:
            _drop(client, settings, old)
    return Index(
        path=settings.store_dir / generation,
        collections=stores,
        docstore=docstore,
        manifest=manifest,
        bm25=bm25,
        generation=generation,
    )


def _drop(client: ClientAPI, settings: Settings, generation: str) -> None:
    for kind in KINDS:
        name = f"{settings.namespace}-{kind}-{generation}"
        try:
            client.delete_collection(name)
        except Exception:
            logger.debug("collection %s already gone", name)
    drop_parent_store(
        settings.parent_store, generation, _parents_folder(settings, generation), settings.namespace
    )
