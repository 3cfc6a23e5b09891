"""Opening an index generation: the live one of a store folder or of a Chroma server."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from chromadb.api.client import Client
from langchain_chroma import Chroma
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import BaseStore

from cardrag.ingest import metadata as md
from cardrag.ingest.index.collections import Collections
from cardrag.ingest.index.generations import Generations
from cardrag.ingest.index.local import LocalGenerations
from cardrag.ingest.index.manifest import check_model
from cardrag.ingest.index.remote import RemoteGenerations
from cardrag.ingest.index.vectors import VECTORS, RowVectors
from cardrag.ingest.lexical import BM25Index
from cardrag.ingest.settings import Settings


@dataclass
class Index:
    """An opened index: its collections and the parent store."""

    path: Path
    """The index folder (``index-*``), resolved from the ``current`` link."""
    collections: Collections
    """Children, card rows and restricted rows (one collection for all in older indexes)."""
    docstore: BaseStore[str, Document]
    """Parent cards by card id."""
    manifest: dict[str, Any]
    """What the index was built with (model, budgets, counts)."""
    bm25: BM25Index | None = None
    """BM25 over the same children (None for indexes built before it existed)."""
    generation: str = ""
    """The index generation's name (``index-<time>-<id>``); a re-ingest makes a new one."""
    client: Client | None = None
    """The generation's own Chroma client, released by :meth:`close` (None: a shared one,
    such as the HTTP client of a Chroma server, which stays open)."""
    vectors: RowVectors | None = None
    """The children's vectors beside the index (:mod:`~cardrag.ingest.index.vectors`; None for
    a generation on a Chroma server, or built before they were kept)."""
    removed: list[str] = field(default_factory=list)
    """The old generations the ingest that built this index removed (only ever its own)."""

    def close(self) -> None:
        """Release the generation's file handles and memory (its own Chroma client); idempotent.

        The index must not be searched afterwards; a server closes a generation only once no
        request can still be running on it.
        """
        if self.client is not None:
            self.client.close()
            self.client = None

    @property
    def vectorstore(self) -> Chroma:
        """The children collection."""
        return self.collections.children

    def problem(self) -> str | None:
        """Why this index cannot answer, checked cheaply (None: it can).

        Its folder must still exist, the children collection must answer and hold rows, and
        the parent store must hold the parent of its first row: a generation collected under a
        server, a Chroma server or Redis away, a parent store emptied behind it or another
        index's parent store all fail here.
        """
        if self.client is not None and not self.path.exists():
            return f"the index it serves, {self.generation}, is gone"
        try:
            first = self.collections.children._collection.get(limit=1, include=["metadatas"])
            if not first["ids"]:
                return f"the vector store of {self.generation} holds no rows"
            if next(iter(self.docstore.yield_keys()), None) is None:
                return f"the parent store of {self.generation} holds no cards"
            parent = str((first["metadatas"] or [{}])[0].get(md.PARENT_ID, ""))
            if parent and self.docstore.mget([parent]) == [None]:  # another index's parents
                return f"the parent store holds no card of {self.generation} ({parent})"
        except Exception as exc:  # a server away, a folder gone: whatever the store says
            return f"{self.generation} cannot be read: {type(exc).__name__}: {exc}"
        return None


def generations_of(settings: Settings) -> LocalGenerations | RemoteGenerations:
    """Where the settings keep generations: a Chroma server, or the store folder."""
    if settings.chroma_url:
        return RemoteGenerations(
            str(settings.chroma_url),
            settings.namespace,
            settings.store_dir,
            settings.parent_store,
            lease_seconds=settings.lock_lease_seconds,
        )
    return LocalGenerations(settings.store_dir, settings.parent_store)


def own_client(generations: Generations, collections: Collections) -> Client | None:
    """The Chroma client a generation's index owns (local), or None (a shared server client)."""
    if isinstance(generations, LocalGenerations):
        return cast(Client, collections.children._client)
    return None


def open_generation(
    generations: Generations,
    embeddings: Embeddings,
    model: str | None,
    where: str,
) -> Index:
    """Open the live generation, checking it was built with ``model``.

    Raises:
        StoreMissingError: when nothing has been ingested.
        ModelMismatchError: when ``model`` differs from the index's.
    """
    generation = generations.current()
    manifest = generations.manifest(generation)
    check_model(f"{where} ({generation})", manifest, model)
    collections = generations.collections(generation, embeddings)
    return Index(
        path=generations.path(generation),
        collections=collections,
        docstore=generations.parent_store(generation),
        manifest=manifest,
        bm25=generations.bm25(generation, collections),
        generation=generation,
        client=own_client(generations, collections),
        vectors=row_vectors(generations, generation),
    )


def row_vectors(generations: Generations, generation: str) -> RowVectors | None:
    """A generation's saved children vectors (only a store folder's generations keep them)."""
    if not isinstance(generations, LocalGenerations):
        return None
    return RowVectors.load(generations.path(generation) / VECTORS)


def open_index(
    store_dir: Path,
    embeddings: Embeddings,
    model: str | None = None,
    parents: str | None = None,
) -> Index:
    """Open the index the ``current`` link of a store folder points to.

    Args:
        store_dir: The store folder.
        embeddings: The embedding model for queries.
        model: The configured model's name; when given, it must be the one the index was built
            with (vectors of different models are not comparable, even at equal dimensions).
        parents: ``CARDRAG_PARENT_STORE`` (None: the index folder's own ``parents/``).

    Raises:
        StoreMissingError: when nothing has been ingested into ``store_dir``.
        ModelMismatchError: when ``model`` differs from the index's.
    """
    generations = LocalGenerations(Path(store_dir), parents)
    return open_generation(generations, embeddings, model, str(store_dir))


def open_current(settings: Settings, embeddings: Embeddings) -> Index:
    """The live index wherever the settings put it: a store folder, or a Chroma server."""
    generations = generations_of(settings)
    where = str(settings.chroma_url or settings.store_dir)
    return open_generation(generations, embeddings, settings.embedding_model, where)


def current_generation(settings: Settings) -> str:
    """The live index generation's name; one cheap read (a link, or one Chroma call).

    Raises:
        StoreMissingError: when nothing has been ingested.
    """
    return generations_of(settings).current()
