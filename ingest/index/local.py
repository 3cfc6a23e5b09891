"""Generations as folders of a store folder, ``current`` a symlink (:mod:`.generations`)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import BaseStore

from cardrag.ingest.index.cache import CACHE, RECORDS
from cardrag.ingest.index.collections import (
    Collections,
    chroma_client,
    open_collections,
    open_vectorstore,
)
from cardrag.ingest.index.generations import (
    CURRENT,
    LEASES,
    LOCK,
    MANIFEST,
    MARKER,
    GenerationCountError,
    StoreLockedError,
    StoreMissingError,
    check_counts,
    new_generation,
)
from cardrag.ingest.index.parents import count_parents, drop_parent_store, parent_store
from cardrag.ingest.index.record import GenerationRecord, Piece, local_record, store_of
from cardrag.ingest.lexical import BM25Index

logger = logging.getLogger(__name__)


@dataclass
class LocalGenerations:
    """Generations as folders of one store folder, ``current`` a symlink (atomic swap)."""

    store_dir: Path
    """The store folder."""
    parent_spec: str | None = None
    """``CARDRAG_PARENT_STORE`` (None: each generation folder's own ``parents/``)."""

    def path(self, generation: str) -> Path:
        """A generation's folder."""
        return self.store_dir / generation

    def new(self) -> str:
        """A fresh generation folder, marked as cardrag's before anything else is written."""
        generation = new_generation()
        self.path(generation).mkdir(parents=True)
        record = json.dumps(local_record(generation, self.parent_spec).to_metadata())
        (self.path(generation) / MARKER).write_text(f"{generation}\n{record}\n", encoding="utf-8")
        return generation

    def collections(self, generation: str, embeddings: Embeddings) -> Collections:
        """Three collections; one (``children``) for an index built before the split."""
        path = self.path(generation)
        if (path / MANIFEST).is_file() and not self.manifest(generation).get("collections"):
            return Collections(open_vectorstore(path / "chroma", embeddings))
        return open_collections(chroma_client(path / "chroma"), embeddings)

    def parent_store(self, generation: str) -> BaseStore[str, Document]:
        """The generation's parents: its folder's ``parents/`` unless a store is configured."""
        return parent_store(self.parent_spec, generation, self.path(generation) / "parents")

    def complete(self, generation: str, manifest: dict[str, Any], bm25: BM25Index) -> None:
        """Save BM25, then the manifest (last, by rename: its presence means complete)."""
        path = self.path(generation)
        bm25.save(path / "bm25")
        tmp = path / f".{MANIFEST}.tmp"
        tmp.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
        tmp.replace(path / MANIFEST)

    def current(self) -> str:
        """The generation ``current`` links to."""
        link = self.store_dir / CURRENT
        if self.store_dir.exists() and not self.store_dir.is_dir():
            msg = f"CARDRAG_STORE_DIR={self.store_dir} is a file, not a folder"
            raise StoreMissingError(msg)
        if not link.exists():
            msg = (
                f"{self.store_dir}: no index found; "
                "build one with `cardrag ingest` (or `make ingest`)"
            )
            raise StoreMissingError(msg)
        return link.resolve().name

    def manifest(self, generation: str) -> dict[str, Any]:
        """The generation's ``manifest.json``."""
        data: dict[str, Any] = json.loads(
            (self.path(generation) / MANIFEST).read_text(encoding="utf-8")
        )
        return data

    def bm25(self, generation: str, collections: Collections) -> BM25Index | None:
        """The saved BM25 index (None for an index built before BM25 existed)."""
        folder = self.path(generation) / "bm25"
        return BM25Index.load(folder) if folder.is_dir() else None

    def counts(self, generation: str) -> tuple[int, int]:
        """Rows in the generation's collections and records in its parent store."""
        client = chroma_client(self.path(generation) / "chroma")
        try:
            rows = sum(c.count() for c in client.list_collections())
        finally:
            client.close()  # a second reference to the writer's client: release it
        return rows, count_parents(self.parent_store(generation))

    def swap(self, generation: str) -> str | None:
        """Point ``current`` at a complete generation (``os.replace``: atomic on POSIX)."""
        path = self.path(generation)
        if not (path / MANIFEST).is_file():
            msg = f"{path}: incomplete generation (no {MANIFEST}); not swapped in"
            raise GenerationCountError(msg)
        check_counts(str(path), self.manifest(generation), *self.counts(generation))
        link = self.store_dir / CURRENT
        previous = link.resolve().name if link.exists() else None
        tmp = self.store_dir / f".{CURRENT}-{uuid.uuid4().hex[:6]}"
        tmp.symlink_to(generation)
        tmp.replace(link)
        return previous

    def drop(self, generation: str) -> None:
        """Remove what the record lists, the folder's files, then the record (the marker) last.

        A crash at any moment leaves the marker, so the folder is still listed and collected.
        Parents in another store than the one configured now are left, with the marker.
        """
        path = self.path(generation)
        lines = (path / MARKER).read_text(encoding="utf-8").splitlines() if ours(path) else []
        record = (
            GenerationRecord.from_metadata(json.loads(lines[1]))
            if len(lines) > 1
            else local_record(generation, self.parent_spec)  # a marker from before records
        )
        kept = [p for p in record.pieces if not self._remove(generation, path, p)]
        for entry in path.iterdir() if path.is_dir() else ():
            if entry.name == MARKER:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
        if kept:
            logger.warning(
                "generation %s keeps its parents in %s (this ingest's parent store is %s)",
                generation, kept[0].where, store_of(self.parent_spec),
            )  # fmt: skip
            return
        (path / MARKER).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            path.rmdir()

    def _remove(self, generation: str, path: Path, piece: Piece) -> bool:
        """Remove one piece outside the folder; False when it is in another store."""
        if piece.kind == "leases":
            for lease in (self.store_dir / LEASES).glob(f"*@{generation}"):
                lease.unlink(missing_ok=True)
        elif piece.where != store_of(self.parent_spec):
            return False
        else:
            drop_parent_store(self.parent_spec, generation, path / "parents")
        return True

    def generations(self) -> list[str]:
        """Every generation folder cardrag made, oldest first (:func:`ours`)."""
        return sorted(p.name for p in self.store_dir.glob("index-*") if ours(p))

    def lease(self, generation: str, holder: str, seconds: float) -> None:
        """A file ``leases/{holder}@{generation}`` holding the lease's expiry (epoch seconds)."""
        folder = self.store_dir / LEASES
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{holder}@{generation}.tmp"
        tmp.write_text(f"{time.time() + seconds}\n", encoding="utf-8")
        tmp.replace(folder / f"{holder}@{generation}")

    def release(self, generation: str, holder: str) -> None:
        """Remove ``holder``'s lease on ``generation``."""
        (self.store_dir / LEASES / f"{holder}@{generation}").unlink(missing_ok=True)

    def leased(self, now: float) -> set[str]:
        """Generations with a lease file whose expiry is still ahead."""
        held: set[str] = set()
        for path in (
            (self.store_dir / LEASES).glob("*@*") if (self.store_dir / LEASES).is_dir() else ()
        ):
            try:
                expires = float(path.read_text(encoding="utf-8").strip())
            except (OSError, ValueError):
                continue
            if expires > now:
                held.add(path.name.rpartition("@")[2])
        return held

    def looks_like_a_store(self) -> bool:
        """Whether the folder is missing, empty, or holds cardrag's files (``--clean`` asks)."""
        if not self.store_dir.exists():
            return True
        entries = {p.name for p in self.store_dir.iterdir()}
        ours = {CURRENT, LOCK, CACHE, RECORDS, LEASES} | set(self.generations())
        return not entries or bool(entries & ours)

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """``flock`` on ``.lock`` (released by the kernel if the holder dies), pid inside."""
        self.store_dir.mkdir(parents=True, exist_ok=True)
        with (self.store_dir / LOCK).open("a+", encoding="utf-8") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "unknown"
                msg = (
                    f"{self.store_dir}: another ingest (pid {holder}) is writing this store; "
                    "run again when it has finished"
                )
                raise StoreLockedError(msg) from None
            try:
                handle.seek(0)
                handle.truncate()
                handle.write(f"{os.getpid()}\n")
                handle.flush()
                yield
            finally:
                handle.seek(0)
                handle.truncate()
                handle.flush()
                fcntl.flock(handle, fcntl.LOCK_UN)


def ours(folder: Path) -> bool:
    """Whether a folder is a generation cardrag made.

    Its marker names it, or (a generation written before the marker existed) it holds a
    finished manifest of cardrag's. A folder merely named like one (``index-photos``) is
    neither, and is never removed.
    """
    if folder.is_symlink() or not folder.is_dir():
        return False
    marker = folder / MARKER
    if marker.is_file():
        lines = marker.read_text(encoding="utf-8").splitlines()
        return bool(lines) and lines[0].strip() == folder.name
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return False
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and {"embedding_model", "children"} <= set(data)
