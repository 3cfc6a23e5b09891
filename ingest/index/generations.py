"""Index generations: a new one is built beside the live one and swapped in when complete.

One protocol, :class:`Generations`, with two implementations:

* :class:`~cardrag.ingest.index.local.LocalGenerations`, a store folder (default ``.cardrag/``)::

      .cardrag/
          .lock           held (``flock``) by the one ingest writing; holds its pid
          current -> index-20261129T142233-1a2b3c    (symlink: the index readers open)
          index-20261129T142233-1a2b3c/
              chroma/         Chroma persistent client, cosine space, four collections
                              (:mod:`cardrag.ingest.index.collections`)
              parents/        LocalFileStore: one JSON record per card id
              bm25/           bm25s index over the same children (hybrid retrieval)
              manifest.json   model, chunk budgets, counts, build time: written last, so a
                              generation without one is incomplete

* :class:`~cardrag.ingest.index.remote.RemoteGenerations`, a Chroma server every worker reaches
  (``CARDRAG_CHROMA_URL``): collections ``{namespace}-{kind}-{generation}`` and the
  generation's record ``{namespace}-record-{generation}`` (:mod:`.record`), parents in the
  parent store under ``{namespace}:{generation}``, and a pointer, the metadata of the collection
  ``{namespace}-current`` (generation and manifest; one Chroma call, applied atomically).
  The writer's lock is the collection ``{namespace}-lock`` (creating an existing collection
  fails on the server, so only one writer gets it). BM25's files are stored beside the
  parents (``{namespace}:{generation}:files`` in Redis, ``{generation}.files`` in a shared
  folder), so a worker opening a generation reads them instead of every row.

One writer at a time: :meth:`Generations.lock` is held for a whole ingest, so garbage
collection (:func:`collect`, run under the lock) can only ever meet complete
generations and the leftovers of a writer that died; it never removes a generation another
ingest is building. Each generation's record (the marker file of a folder) is written before
any of its pieces and removed after all of them, so a writer killed at any moment leaves
nothing a later collection does not find. :meth:`Generations.swap` refuses a generation whose
row and record counts differ from its manifest.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
import uuid
from collections.abc import Collection
from pathlib import Path
from typing import Any, Protocol

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import BaseStore

from cardrag.ingest.index.collections import Collections
from cardrag.ingest.lexical import BM25Index

CURRENT = "current"
"""Name of the link to the live index inside the store folder."""
LOCK = ".lock"
"""The writer's lock file inside the store folder."""
MANIFEST = "manifest.json"
"""Written last into a local generation: its presence marks the generation complete."""


class StoreMissingError(FileNotFoundError):
    """No built index in the store folder (or on the server)."""


class StoreLockedError(RuntimeError):
    """Another ingest is writing to this store; the message names it."""


class GenerationCountError(RuntimeError):
    """A generation's rows or records do not match its manifest; it is not swapped in."""


LEASES = "leases"
"""Folder of a store folder holding the servers' leases on the generations they serve."""
MARKER = ".cardrag-generation"
"""File cardrag writes first into every generation folder it makes (the folder's name inside):
only folders that hold it, or a finished cardrag manifest, are ever collected or cleaned
(issue 32: a folder a user named ``index-photos`` was taken for an old generation)."""


def new_generation() -> str:
    """A fresh, sortable index generation name."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    return f"index-{stamp}-{uuid.uuid4().hex[:6]}"


def check_counts(where: str, manifest: dict[str, Any], rows: int, parents: int) -> None:
    """Refuse a generation whose rows or parent records differ from what its manifest says.

    Example:
        >>> check_counts("g", {"children": 3, "cards": 1}, rows=3, parents=1)
        >>> try:
        ...     check_counts("g", {"children": 3, "cards": 1}, rows=2, parents=1)
        ... except GenerationCountError as exc:
        ...     print(exc)
        g: 2 rows and 1 parent records, but its manifest says 3 and 1; not swapped in
    """
    if (rows, parents) != (manifest.get("children"), manifest.get("cards")):
        msg = (
            f"{where}: {rows} rows and {parents} parent records, but its manifest says "
            f"{manifest.get('children')} and {manifest.get('cards')}; not swapped in"
        )
        raise GenerationCountError(msg)


class Generations(Protocol):
    """Where one store's index generations live, which one is live, and who may write."""

    def path(self, generation: str) -> Path:
        """A generation's local folder (its files, or its parents when none are configured)."""
        ...

    def new(self) -> str:
        """Name (and, where needed, make room for) a fresh generation."""
        ...

    def collections(self, generation: str, embeddings: Embeddings) -> Collections:
        """A generation's collections (created empty when new)."""
        ...

    def parent_store(self, generation: str) -> BaseStore[str, Document]:
        """A generation's parent store."""
        ...

    def complete(self, generation: str, manifest: dict[str, Any], bm25: BM25Index) -> None:
        """Record a fully written generation's manifest (and BM25 where it is stored)."""
        ...

    def current(self) -> str:
        """The live generation. Raises :class:`StoreMissingError` when there is none."""
        ...

    def manifest(self, generation: str) -> dict[str, Any]:
        """A complete generation's manifest."""
        ...

    def bm25(self, generation: str, collections: Collections) -> BM25Index | None:
        """A generation's BM25 index (None where an old generation has none)."""
        ...

    def swap(self, generation: str) -> str | None:
        """Make a complete generation live (counts checked first); the one it replaces."""
        ...

    def drop(self, generation: str) -> None:
        """Remove a generation's rows and records."""
        ...

    def generations(self) -> list[str]:
        """Every generation there is (complete or not), oldest first."""
        ...

    def lock(self) -> contextlib.AbstractContextManager[None]:
        """Hold the store's one writer lock, or raise :class:`StoreLockedError` at once."""
        ...

    def lease(self, generation: str, holder: str, seconds: float) -> None:
        """Record (or renew) that ``holder`` serves ``generation`` for ``seconds`` more."""
        ...

    def release(self, generation: str, holder: str) -> None:
        """``holder`` no longer serves ``generation``."""
        ...

    def leased(self, now: float) -> set[str]:
        """The generations a server holds a lease on that has not expired at ``now``."""
        ...


def collect(generations: Generations, keep: Collection[str]) -> list[str]:
    """Drop every generation not in ``keep`` nor leased (under ``generations.lock()``).

    A generation a live server still serves is leased (:meth:`Generations.lease`) and never
    dropped, whichever generation is current (issue 32: a second re-ingest with another model
    collected the one a server could still answer from).

    Returns:
        The dropped generations.
    """
    held = set(keep) | generations.leased(time.time())
    dropped = [g for g in generations.generations() if g not in held]
    for generation in dropped:
        generations.drop(generation)
    return dropped


def lease_expired(held: dict[str, Any], now: float) -> bool:
    """Whether a lock's lease has ended (a lock written before leases never expires here).

    Example:
        >>> lease_expired({"expires": 100.0}, 101.0), lease_expired({"expires": 100.0}, 99.0)
        (True, False)
    """
    expires = held.get("expires")
    return isinstance(expires, int | float) and expires < now


def describe(held: dict[str, Any]) -> str:
    """A lock's holder in words.

    Example:
        >>> describe({"pid": 7, "host": "w1", "since": "2026-12-01T10:00:00+00:00"})
        'pid 7 on w1, since 2026-12-01T10:00:00+00:00'
    """
    return f"pid {held.get('pid', '?')} on {held.get('host', '?')}, since {held.get('since', '?')}"


def now_iso() -> str:
    """Now, UTC, to the second (ISO 8601)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
