"""Generations on a Chroma server every worker reaches (see :mod:`.generations`)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import BaseStore

from cardrag.ingest.index.collections import (
    COLLECTION_NAME,
    KINDS,
    Collections,
    http_client,
    open_collections,
)
from cardrag.ingest.index.generations import (
    GenerationCountError,
    StoreLockedError,
    StoreMissingError,
    check_counts,
    new_generation,
)
from cardrag.ingest.index.parents import (
    count_parents,
    drop_generation_files,
    drop_parent_store,
    generation_files,
    parent_store,
)
from cardrag.ingest.lexical import BM25Index

logger = logging.getLogger(__name__)


@dataclass
class RemoteGenerations:
    """Generations as collections of a Chroma server, the pointer a collection's metadata."""

    url: str
    """``CARDRAG_CHROMA_URL``."""
    namespace: str
    """``CARDRAG_NAMESPACE``: the knowledge base's prefix on the shared server."""
    store_dir: Path
    """Local folder for parents when no parent store is configured."""
    parent_spec: str | None = None
    """``CARDRAG_PARENT_STORE``."""
    _manifests: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    @property
    def pointer(self) -> str:
        """The collection whose metadata names the live generation (it holds no rows)."""
        return f"{self.namespace}-current"

    @property
    def prefix(self) -> str:
        """Children collections are ``{namespace}-children-{generation}``."""
        return f"{self.namespace}-{COLLECTION_NAME}-"

    def path(self, generation: str) -> Path:
        """Where a generation's parents go when no parent store is configured."""
        return self.store_dir / "parents" / generation

    def new(self) -> str:
        """A fresh generation name (its collections are made when first opened)."""
        return new_generation()

    def collections(self, generation: str, embeddings: Embeddings) -> Collections:
        """``{namespace}-{kind}-{generation}`` for each kind."""
        client = http_client(self.url)
        return open_collections(client, embeddings, f"{self.namespace}-", f"-{generation}")

    def parents(self, generation: str) -> BaseStore[str, Document]:
        """The generation's parent store (a local folder when none is configured)."""
        return parent_store(self.parent_spec, generation, self.path(generation), self.namespace)

    def files_path(self, generation: str) -> Path:
        """Where a generation's other files (BM25) go when no parent store is configured."""
        return self.store_dir / "files" / generation

    def files(self, generation: str) -> BaseStore[str, bytes]:
        """The generation's other files, beside its parents (:func:`generation_files`)."""
        return generation_files(
            self.parent_spec, generation, self.files_path(generation), self.namespace
        )

    def complete(self, generation: str, manifest: dict[str, Any], bm25: BM25Index) -> None:
        """Store BM25 beside the parents, and keep the manifest for the swap."""
        bm25.save_to(self.files(generation))
        self._manifests[generation] = manifest

    def _read_pointer(self) -> dict[str, Any]:
        meta = http_client(self.url).get_or_create_collection(self.pointer).metadata or {}
        return dict(meta)

    def current(self) -> str:
        """The generation the pointer names."""
        generation = self._read_pointer().get("generation")
        if not isinstance(generation, str):
            msg = (
                f"{self.url} ({self.namespace}): no index found; build one with `cardrag ingest` "
                "(or `make ingest`)"
            )
            raise StoreMissingError(msg)
        return generation

    def manifest(self, generation: str) -> dict[str, Any]:
        """The manifest of the live generation (in the pointer) or of one just completed."""
        if generation in self._manifests:
            return self._manifests[generation]
        pointer = self._read_pointer()
        if pointer.get("generation") != generation:
            msg = f"{self.url} ({self.namespace}): generation {generation} is not live"
            raise StoreMissingError(msg)
        data: dict[str, Any] = json.loads(str(pointer.get("manifest", "{}")))
        return data

    def bm25(self, generation: str, collections: Collections) -> BM25Index | None:
        """The BM25 index stored with the generation (:meth:`complete`).

        A generation built before BM25 was stored with it is rebuilt from its child rows,
        analysed as its manifest records (every row is read: slow for a large store).
        """
        stored = BM25Index.load_from(self.files(generation))
        if stored is not None:
            return stored
        logger.info("generation %s has no stored BM25; rebuilding it from its rows", generation)
        stemmed = self.manifest(generation).get("bm25_stemmed") or []
        return BM25Index.from_collections(collections.with_children(), stemmed=stemmed)

    def counts(self, generation: str) -> tuple[int, int]:
        """Rows in the generation's collections and records in its parent store."""
        client = http_client(self.url)
        rows = sum(
            client.get_collection(f"{self.namespace}-{kind}-{generation}").count() for kind in KINDS
        )
        return rows, count_parents(self.parents(generation))

    def swap(self, generation: str) -> str | None:
        """Write the pointer (generation and manifest) after checking the counts."""
        manifest = self._manifests.get(generation)
        if manifest is None:
            msg = f"{self.url} ({generation}): incomplete generation; not swapped in"
            raise GenerationCountError(msg)
        check_counts(f"{self.url} ({generation})", manifest, *self.counts(generation))
        pointer = http_client(self.url).get_or_create_collection(self.pointer)
        previous = (pointer.metadata or {}).get("generation")
        pointer.modify(metadata={"generation": generation, "manifest": json.dumps(manifest)})
        return previous if isinstance(previous, str) else None

    def drop(self, generation: str) -> None:
        """Delete the generation's collections and parents."""
        client = http_client(self.url)
        for kind in KINDS:
            name = f"{self.namespace}-{kind}-{generation}"
            try:
                client.delete_collection(name)
            except Exception:
                logger.debug("collection %s already gone", name)
        drop_parent_store(self.parent_spec, generation, self.path(generation), self.namespace)
        drop_generation_files(
            self.parent_spec, generation, self.files_path(generation), self.namespace
        )
        self._manifests.pop(generation, None)

    def generations(self) -> list[str]:
        """Every generation with a children collection on the server, oldest first."""
        names = [c.name for c in http_client(self.url).list_collections()]
        return sorted(n.removeprefix(self.prefix) for n in names if n.startswith(self.prefix))

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """The collection ``{namespace}-lock``: created by the one writer, deleted after."""
        client = http_client(self.url)
        name = f"{self.namespace}-lock"
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "since": _now()}
        try:
            client.create_collection(name, metadata=holder)
        except Exception as exc:  # chromadb reports an existing collection as a server error
            try:
                held = client.get_collection(name).metadata or {}
            except Exception:  # no lock there: the server failed for another reason
                raise exc from None
            msg = (
                f"{self.url} ({self.namespace}): another ingest (pid {held.get('pid', '?')} on "
                f"{held.get('host', '?')}, since {held.get('since', '?')}) is writing this store; "
                f"run again when it has finished (if it died, delete the collection {name!r})"
            )
            raise StoreLockedError(msg) from None
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                client.delete_collection(name)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
