"""Generations on a Chroma server every worker reaches (see :mod:`.generations`)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import BaseStore

from cardrag.ingest.index.collections import Collections, http_client, open_collections
from cardrag.ingest.index.generations import (
    GenerationCountError,
    StoreLockedError,
    StoreMissingError,
    check_counts,
    describe,
    lease_expired,
    new_generation,
    now_iso,
)
from cardrag.ingest.index.layout import COLLECTION_NAME, KINDS
from cardrag.ingest.index.parents import (
    count_parents,
    drop_generation_files,
    drop_parent_store,
    generation_files,
    parent_store,
)
from cardrag.ingest.index.record import RECORD, GenerationRecord, Piece, remote_record, store_of
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
    lease_seconds: float = 120.0
    """``CARDRAG_LOCK_LEASE_SECONDS``: the writer lock's lease, renewed while the ingest runs."""
    break_lock: bool = False
    """Take the writer lock whoever holds it (``cardrag ingest --break-lock``)."""
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
        """A fresh generation, its record written before any of its pieces (:mod:`.record`)."""
        generation = new_generation()
        record = remote_record(self.namespace, generation, self.parent_spec)
        http_client(self.url).create_collection(
            self._record_name(generation), metadata=record.to_metadata()
        )
        return generation

    def _record_name(self, generation: str) -> str:
        return f"{self.namespace}-{RECORD}-{generation}"

    def collections(self, generation: str, embeddings: Embeddings) -> Collections:
        """``{namespace}-{kind}-{generation}`` for each kind."""
        client = http_client(self.url)
        return open_collections(client, embeddings, f"{self.namespace}-", f"-{generation}")

    def parent_store(self, generation: str) -> BaseStore[str, Document]:
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
        return rows, count_parents(self.parent_store(generation))

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
        """Remove every piece its record lists, then the record (last: a crash leaves it).

        A generation written before records existed has the pieces of :func:`remote_record`.
        Parents in another store than the one configured now are left, with the record, and
        named in a warning.
        """
        client = http_client(self.url)
        try:
            meta = client.get_collection(self._record_name(generation)).metadata or {}
            record = GenerationRecord.from_metadata(dict(meta))
        except Exception:  # no record: a generation written before records
            record = remote_record(self.namespace, generation, self.parent_spec)
        kept = [p for p in record.pieces if not self._remove(client, generation, p)]
        self._manifests.pop(generation, None)
        if kept:
            logger.warning(
                "generation %s keeps its %s in %s (this ingest's parent store is %s)",
                generation, " and ".join(p.kind for p in kept), kept[0].where,
                store_of(self.parent_spec),
            )  # fmt: skip
            return
        with contextlib.suppress(Exception):
            client.delete_collection(self._record_name(generation))

    def _remove(self, client: Any, generation: str, piece: Piece) -> bool:
        """Remove one piece (already gone is removed); False when it is in another store."""
        if piece.kind == "collection":
            with contextlib.suppress(Exception):  # already gone
                client.delete_collection(piece.name)
        elif piece.kind == "leases":
            for name in [c.name for c in client.list_collections()]:
                if name.startswith(piece.name):
                    with contextlib.suppress(Exception):
                        client.delete_collection(name)
        elif piece.where != store_of(self.parent_spec):
            return False
        elif piece.kind == "parents":
            drop_parent_store(self.parent_spec, generation, self.path(generation), self.namespace)
        else:
            drop_generation_files(
                self.parent_spec, generation, self.files_path(generation), self.namespace
            )
        return True

    def generations(self) -> list[str]:
        """Every generation with a record or any piece on the server, oldest first.

        A generation is listed by its record, by any of its collections (a generation written
        before records, or a crash in one's collection), or by a lease on it.
        """
        found: set[str] = set()
        for collection in http_client(self.url).list_collections():
            name = collection.name
            for kind in (RECORD, *KINDS):
                if name.startswith(f"{self.namespace}-{kind}-index-"):
                    found.add(name.removeprefix(f"{self.namespace}-{kind}-"))
            if name.startswith(f"{self.namespace}-lease-"):
                found.add(str((collection.metadata or {}).get("generation")))
        return sorted(found)

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """The collection ``{namespace}-lock``: a lease with its owner and expiry.

        Created by the one writer and renewed every third of ``lease_seconds`` while it writes,
        deleted after. A lock whose lease has expired (its writer was killed) is taken over,
        with a warning naming the dead holder; ``break_lock`` takes any.
        """
        client = http_client(self.url)
        name = f"{self.namespace}-lock"
        owner = uuid.uuid4().hex
        try:
            client.create_collection(name, metadata=self._lease(owner))
        except Exception as exc:  # chromadb reports an existing collection as a server error
            try:
                held = client.get_collection(name).metadata or {}
            except Exception:  # no lock there: the server failed for another reason
                raise exc from None
            if not (self.break_lock or lease_expired(held, time.time())):
                msg = (
                    f"{self.url} ({self.namespace}): another ingest ({describe(held)}) is "
                    "writing this store; run again when it has finished (a dead writer's lock "
                    f"is taken over when its lease ends; `cardrag ingest --break-lock` now)"
                )
                raise StoreLockedError(msg) from None
            why = "broken by --break-lock" if self.break_lock else "its lease expired"
            logger.warning("took over the writer lock of %s: %s", describe(held), why)
            client.delete_collection(name)
            try:
                client.create_collection(name, metadata=self._lease(owner))
            except Exception:  # another writer took it in between
                msg = f"{self.url} ({self.namespace}): another ingest took the lock first"
                raise StoreLockedError(msg) from None
        stop = threading.Event()
        renewal = threading.Thread(
            target=self._renew, args=(client, name, owner, stop), daemon=True
        )
        renewal.start()
        try:
            yield
        finally:
            stop.set()
            renewal.join()
            with contextlib.suppress(Exception):
                if (client.get_collection(name).metadata or {}).get("owner") == owner:
                    client.delete_collection(name)

    def lease(self, generation: str, holder: str, seconds: float) -> None:
        """A collection ``{namespace}-lease-{generation}-{holder}``, holding no rows.

        Its metadata holds the lease's expiry; renewing it updates the expiry.
        """
        client = http_client(self.url)
        metadata = {"generation": generation, "holder": holder, "expires": time.time() + seconds}
        lease = client.get_or_create_collection(self._lease_name(generation, holder))
        lease.modify(metadata=metadata)

    def release(self, generation: str, holder: str) -> None:
        """Delete ``holder``'s lease collection for ``generation``."""
        with contextlib.suppress(Exception):
            http_client(self.url).delete_collection(self._lease_name(generation, holder))

    def leased(self, now: float) -> set[str]:
        """Generations with a lease collection whose expiry is still ahead."""
        client = http_client(self.url)
        held: set[str] = set()
        for collection in client.list_collections():
            if not collection.name.startswith(f"{self.namespace}-lease-"):
                continue
            meta = collection.metadata or {}
            expires = meta.get("expires")
            if isinstance(expires, int | float) and expires > now:
                held.add(str(meta.get("generation")))
        return held

    def _lease_name(self, generation: str, holder: str) -> str:
        safe = re.sub(r"[^a-zA-Z0-9._-]", "-", holder)
        return f"{self.namespace}-lease-{generation}-{safe}"[:500]

    def _lease(self, owner: str) -> dict[str, Any]:
        """The lock's metadata: who holds it, since when, until when unless renewed."""
        return {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": now_iso(),
            "owner": owner,
            "expires": time.time() + self.lease_seconds,
        }

    def _renew(self, client: Any, name: str, owner: str, stop: threading.Event) -> None:
        """Push the lease's expiry forward every third of it until ``stop`` is set."""
        while not stop.wait(self.lease_seconds / 3):
            try:
                lock = client.get_collection(name)
                held = lock.metadata or {}
                if held.get("owner") != owner:
                    logger.warning("the writer lock was taken over by %s", describe(held))
                    return
                lock.modify(metadata={**held, "expires": time.time() + self.lease_seconds})
            except Exception:  # the server is away for a moment: try again next time
                logger.warning("could not renew the writer lock", exc_info=True)
