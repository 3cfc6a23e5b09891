"""A generation's record: every piece it owns, written before the first and removed after the last.

An ingest writes a generation in pieces: its collections (children, card rows, restricted rows,
sentence rows), its parents and BM25's files in the parent store, its saved vectors, and the
leases servers take on it. A process killed between two of them (``kill -9``, a lost machine)
must never leave a piece no later ingest can find (issue 50: a kill right after the pointer swap
left the old generation's sentence rows and 44 Redis keys for ever, because generations were
listed by their children collection and that was the first piece removed).

So the record is written before any piece, lists them all, and is removed after every one of
them (:meth:`RemoteGenerations.drop <cardrag.ingest.index.remote.RemoteGenerations.drop>`;
in a store folder the record is the generation folder's marker file). Whatever moment a crash
comes, the record is still there and the next ingest's collection finds and finishes the job.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from cardrag.ingest.index.layout import KINDS
from cardrag.ingest.index.parents import FILES, REDIS_SCHEMES

RECORD = "record"
"""The kind of collection that holds a generation's record on a Chroma server."""

PieceKind = Literal["collection", "parents", "files", "leases"]
"""What a piece is: a Chroma collection, the parent records, the other files (BM25), leases."""


@dataclass(frozen=True)
class Piece:
    """One thing a generation owns, named so that it can be found and removed later."""

    kind: PieceKind
    """What it is."""
    name: str
    """The collection's name, the parent store's key prefix, or the leases' name prefix."""
    where: str = ""
    """For parents and files: the store that holds them (:func:`store_of`), credentials left
    out; a later ingest configured with another store leaves them, and the record, in place."""


@dataclass(frozen=True)
class GenerationRecord:
    """A generation's name, when it was started, and every piece it owns."""

    generation: str
    """The generation, ``index-{stamp}-{hex}``."""
    pieces: tuple[Piece, ...]
    """In the order they are removed: rows first, then parents and files, then leases."""
    created: str = ""
    """When the record was written (ISO 8601, UTC)."""

    def to_metadata(self) -> dict[str, str]:
        """The record as a Chroma collection's metadata (strings only).

        Example:
            >>> r = GenerationRecord("index-1", (Piece("collection", "kb-children-index-1"),))
            >>> GenerationRecord.from_metadata(r.to_metadata()) == r
            True
        """
        pieces = [[p.kind, p.name, p.where] for p in self.pieces]
        return {
            "generation": self.generation,
            "created": self.created,
            "pieces": json.dumps(pieces),
        }

    @classmethod
    def from_metadata(cls, metadata: dict[str, Any]) -> GenerationRecord:
        """The record :meth:`to_metadata` wrote."""
        pieces = tuple(
            Piece(kind, name, where) for kind, name, where in json.loads(metadata["pieces"])
        )
        return cls(str(metadata["generation"]), pieces, str(metadata.get("created", "")))


def store_of(spec: str | None) -> str:
    """Which parent store a ``CARDRAG_PARENT_STORE`` names, without its credentials.

    Example:
        >>> store_of("redis://user:secret@cache.local:6379/2")
        'redis://cache.local:6379/2'
        >>> store_of(None), store_of("memory")
        ('folder', 'memory')
    """
    if spec is None or spec == "memory":
        return spec or "folder"
    if spec.startswith(REDIS_SCHEMES):
        parts = urlsplit(spec)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}{parts.path}"
    return str(Path(spec).resolve())


def remote_record(namespace: str, generation: str, parent_spec: str | None) -> GenerationRecord:
    """The record of a generation on a Chroma server, its parents in ``parent_spec``.

    Example:
        >>> r = remote_record("kb", "index-1", "redis://localhost:6379/0")
        >>> [p.name for p in r.pieces][-4:]
        ['kb-sentences-index-1', 'kb:index-1', 'kb:index-1:files', 'kb-lease-index-1-']
    """
    where = store_of(parent_spec)
    pieces = (
        *(Piece("collection", f"{namespace}-{kind}-{generation}") for kind in KINDS),
        Piece("parents", f"{namespace}:{generation}", where),
        Piece("files", f"{namespace}:{generation}:{FILES}", where),
        Piece("leases", f"{namespace}-lease-{generation}-"),
    )
    created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return GenerationRecord(generation, pieces, created)


def local_record(generation: str, parent_spec: str | None) -> GenerationRecord:
    """The record of a generation in a store folder: what lies outside its folder.

    Its folder's own files (collections, BM25, saved vectors, manifest) are listed by the folder
    itself; the record names the parents when a parent store is configured, and the leases.

    Example:
        >>> [(p.kind, p.name) for p in local_record("index-1", "redis://localhost:6379/0").pieces]
        [('parents', 'cardrag:index-1'), ('leases', 'index-1')]
        >>> [p.kind for p in local_record("index-1", None).pieces]
        ['leases']
    """
    outside = () if parent_spec is None else (
        Piece("parents", f"cardrag:{generation}", store_of(parent_spec)),
    )  # fmt: skip
    created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return GenerationRecord(generation, (*outside, Piece("leases", generation)), created)
