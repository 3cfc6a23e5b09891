"""The Chroma collections of one index generation, and which collection serves which rows.

Why four collections: Chroma applies a metadata ``where`` before its vector search by first
collecting every row the filter admits, so a filter that admits nearly every row (``chunk_index
>= 0``, ``sensitivity != restricted``) costs time in proportion to the collection: at 49,000
rows a filtered query took 13-90 times an unfiltered one (``evals/bench.md``). Keeping each kind
of row in its own collection makes the frequent queries unfiltered, and restricted rows are
excluded by construction: the public queries never touch their collection.

:meth:`Collections.plan` is the row plan: the (collection, filter) pairs that hold one kind of
row for a caller with or without restricted access. Readers ask it instead of knowing the
layout; an index made by hand (one collection holding every row) gets metadata filters instead.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlparse

import chromadb
from chromadb.api import ClientAPI
from chromadb.api.client import Client
from chromadb.api.collection_configuration import (
    CreateCollectionConfiguration,
    CreateHNSWConfiguration,
)
from chromadb.config import Settings as ChromaSettings
from langchain_chroma import Chroma
from langchain_core.embeddings import Embeddings

from cardrag.ingest import metadata as md
from cardrag.ingest.configuration import check_chroma_url
from cardrag.ingest.index.layout import (
    CARD_ROWS,
    CHILD_ROWS,
    CHILDREN_ONLY,
    COLLECTION_NAME,
    DISTANCE_SPACE,
    KINDS,
    NOT_RESTRICTED,
    SENTENCE_ROWS,
    RowKind,
    Where,
    merge_filters,
)

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


class StoreUnavailableError(ConnectionError):
    """The Chroma server (or Redis) does not answer; the request may be retried."""


def chroma_client(path: Path) -> Client:
    """A persistent Chroma client on disk with telemetry off (``close()`` releases it)."""
    client = chromadb.PersistentClient(
        path=str(path), settings=ChromaSettings(anonymized_telemetry=False)
    )
    return cast(Client, client)


@functools.cache
def http_client(url: str) -> ClientAPI:
    """A Chroma HTTP client for ``http(s)://host:port``, telemetry off, one per process.

    Raises:
        StoreUnavailableError: when the server does not answer.
    """
    check_chroma_url(url)  # the settings' own check, for a URL given by hand
    parsed = urlparse(url)
    try:
        return chromadb.HttpClient(
            host=parsed.hostname or "",  # set: check_chroma_url
            port=parsed.port or (443 if parsed.scheme == "https" else 8000),
            ssl=parsed.scheme == "https",
            settings=ChromaSettings(anonymized_telemetry=False),
        )
    except ValueError as exc:  # chromadb's "Could not connect to a Chroma server"
        raise StoreUnavailableError(f"{url}: the Chroma server does not answer") from exc


def open_vectorstore(path: Path, embeddings: Embeddings) -> Chroma:
    """The children collection under ``path``, created with the cosine space if new."""
    return open_collection(chroma_client(path), COLLECTION_NAME, embeddings)


@dataclass(frozen=True)
class Collections:
    """The Chroma collections of one index, and which row goes where.

    With only ``children`` set, every row lives there and queries tell the kinds apart with
    metadata filters (a collection made by hand, or an index built before the split).
    """

    children: Chroma
    """Child chunks (and, where the others are None, every other row too)."""
    cards: Chroma | None = None
    """Whole-card rows; None: they live in ``children``."""
    restricted: Chroma | None = None
    """Rows of restricted cards; None: they live with the public rows."""
    sentences: Chroma | None = None
    """Sentence rows; None: the index has none (a sentence row cannot be written to it)."""

    def route(self, metadata: dict[str, Any]) -> Chroma:
        """The collection a row with this metadata belongs in.

        Raises:
            ValueError: for a sentence row where the index has no sentences collection.
        """
        sentence = md.is_sentence_row(metadata.get(md.CHUNK_INDEX))
        if sentence and self.sentences is None:
            msg = "sentence rows need an index with a sentences collection (cardrag ingest's)"
            raise ValueError(msg)
        if self.restricted is not None and metadata.get(md.SENSITIVITY) == "restricted":
            return self.restricted
        if sentence:
            return cast(Chroma, self.sentences)
        if self.cards is not None and metadata.get(md.CHUNK_INDEX) == md.CARD_ROW:
            return self.cards
        return self.children

    @property
    def shares_children(self) -> bool:
        """Whether card rows or restricted rows may live in the children collection."""
        return self.cards is None or self.restricted is None

    def only_children(self) -> bool:
        """Whether the children collection holds no row its queries would filter out.

        Where card rows or restricted rows may share the children collection (a collection
        made by hand, or a LangChain user's own), one lookup of at most one row says whether
        any is there. A user's collection has none, and a query without a filter costs
        Chroma a quarter of one with it (825 children: 0.77 against 3.3 ms; the lookup 0.49).
        """
        if not self.shares_children:
            return True
        probes = [CARD_ROWS] if self.cards is None else []
        probes += [{md.SENSITIVITY: "restricted"}] if self.restricted is None else []
        probe: Where = probes[0] if len(probes) == 1 else {"$or": probes}
        found = self.children._collection.get(where=probe, limit=1, include=[])
        return not found["ids"]

    def plan(
        self,
        *,
        kind: RowKind,
        where: Where | None,
        allow_restricted: bool,
        only_children: bool = False,
    ) -> list[tuple[Chroma, Where | None]]:
        """The (collection, filter) pairs that hold one kind of row.

        Where each kind has its own collection the queries need no filter of their own (only
        ``where``); where rows share one collection, metadata filters tell them apart, unless
        ``only_children`` (:meth:`only_children` found no row to filter out: no card rows
        there to read either). Restricted rows are read only with ``allow_restricted``. An
        index without a sentences collection has no sentence rows (no pairs).
        """
        if kind == "sentence" and self.sentences is None:
            return []
        if only_children and kind == "card" and self.cards is None:
            return []
        rows_of_kind = {"card": CARD_ROWS, "sentence": SENTENCE_ROWS}.get(kind, CHILD_ROWS)
        restricted_kind = (
            CHILDREN_ONLY if kind == "child" and self.sentences is not None else rows_of_kind
        )
        if kind == "sentence":
            public, kind_filter = cast(Chroma, self.sentences), None
        elif self.cards is None:  # children and card rows share one collection
            public, kind_filter = self.children, rows_of_kind
        else:
            public, kind_filter = (self.cards if kind == "card" else self.children), None
        # only_children speaks of the children collection: another may hold restricted rows
        plain = only_children and public is self.children
        hidden = self.restricted is None and not allow_restricted and not plain
        kind_filter = None if plain else kind_filter
        queries = [(public, merge_filters(where, kind_filter, NOT_RESTRICTED if hidden else None))]
        if allow_restricted and self.restricted is not None:
            queries.append((self.restricted, merge_filters(where, restricted_kind)))
        return queries

    def all(self) -> list[Chroma]:
        """Every collection, children first."""
        collections = (self.children, self.cards, self.restricted, self.sentences)
        return [c for c in collections if c is not None]

    def with_children(self) -> list[Chroma]:
        """The collections that hold child rows (what BM25 indexes): children and restricted.

        BM25 leaves out the restricted collection's card and sentence rows.
        """
        return [c for c in self.all() if c is not self.cards and c is not self.sentences]

    def count(self) -> int:
        """Rows in every collection."""
        return sum(c._collection.count() for c in self.all())


def open_collections(
    client: ClientAPI, embeddings: Embeddings, prefix: str = "", suffix: str = ""
) -> Collections:
    """The four collections of an index on ``client``, named ``{prefix}{kind}{suffix}``."""
    return Collections(
        *(open_collection(client, f"{prefix}{kind}{suffix}", embeddings) for kind in KINDS)
    )


def open_collection(client: ClientAPI, name: str, embeddings: Embeddings) -> Chroma:
    """A children collection on any Chroma client (on disk or over HTTP), cosine space."""
    return Chroma(
        client=client,
        collection_name=name,
        embedding_function=embeddings,
        collection_configuration=CreateCollectionConfiguration(
            hnsw=CreateHNSWConfiguration(space=DISTANCE_SPACE)
        ),
    )
