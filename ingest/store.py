"""Where children and parents live, the one write path into them, and atomic index swaps.

Layout of the store folder (default ``.cardrag/``)::

    .cardrag/
        current -> index-20261129T142233-1a2b3c    (symlink: the index readers open)
        index-20261129T142233-1a2b3c/
            chroma/         Chroma persistent client, cosine space, three collections:
                            "children" (chunks), "cards" (whole-card rows) and
                            "restricted" (both kinds, of restricted cards only)
            parents/        LocalFileStore: one JSON record per card id
            bm25/           bm25s index over the same children (for hybrid retrieval)
            manifest.json   model, chunk budgets, counts, build time

``build_index`` writes a complete new index beside the old one and only then swaps the
``current`` link (``os.replace``, atomic on POSIX), so a failure midway leaves the previous
index answering. The previous index is kept one generation (a reader may still hold it open);
older ones are removed.

Why three collections: Chroma applies a metadata ``where`` before its vector search by first
collecting every row the filter admits, so a filter that admits nearly every row (``chunk_index
>= 0``, ``sensitivity != restricted``) costs time in proportion to the collection: at 49,000
rows a filtered query took 13-90 times an unfiltered one (``evals/bench.md``). Keeping each kind
of row in its own collection makes the frequent queries unfiltered, and restricted rows are
excluded by construction: the public queries never touch their collection.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import chromadb
from chromadb.api import ClientAPI
from chromadb.api.collection_configuration import (
    CreateCollectionConfiguration,
    CreateHNSWConfiguration,
)
from chromadb.api.types import Where
from chromadb.config import Settings as ChromaSettings
from langchain_chroma import Chroma
from langchain_classic.storage import EncoderBackedStore, LocalFileStore
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import BaseStore, InMemoryByteStore
from tqdm.auto import tqdm

from ingest import metadata as md
from ingest.cards import Card, load_cards
from ingest.embeddings import load_embeddings
from ingest.lexical import BM25Index
from ingest.settings import Settings
from ingest.splitter import CardSplitter

logger = logging.getLogger(__name__)

COLLECTION_NAME = "children"
"""Chroma collection holding one row per child chunk."""
CARDS_COLLECTION = "cards"
"""Chroma collection holding the whole-card rows (``chunk_index`` -1)."""
RESTRICTED_COLLECTION = "restricted"
"""Chroma collection holding every row of restricted cards, searched only when allowed."""
KINDS = (COLLECTION_NAME, CARDS_COLLECTION, RESTRICTED_COLLECTION)
"""An index's collections, in the order of :class:`Collections`' fields."""
DISTANCE_SPACE: Literal["cosine"] = "cosine"
"""Declared explicitly on the collection; the retriever converts distances for this space."""
PARENT_FORMAT_VERSION = 1
"""Version written into every parent record; readers fill defaults for older records."""
CURRENT = "current"
"""Name of the link to the live index inside the store folder."""
WRITE_BATCH = 256
"""Children embedded and written per Chroma call (well below Chroma's max batch size)."""

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


class StoreMissingError(FileNotFoundError):
    """No built index in the store folder."""


def chroma_client(path: Path) -> ClientAPI:
    """A persistent Chroma client on disk with telemetry off."""
    return chromadb.PersistentClient(
        path=str(path), settings=ChromaSettings(anonymized_telemetry=False)
    )


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

    def route(self, metadata: dict[str, Any]) -> Chroma:
        """The collection a row with this metadata belongs in."""
        if self.restricted is not None and metadata.get(md.SENSITIVITY) == "restricted":
            return self.restricted
        if self.cards is not None and metadata.get(md.CHUNK_INDEX) == md.CARD_ROW:
            return self.cards
        return self.children

    def all(self) -> list[Chroma]:
        """Every collection, children first."""
        return [c for c in (self.children, self.cards, self.restricted) if c is not None]

    def with_children(self) -> list[Chroma]:
        """The collections that hold child rows (what BM25 indexes): all but ``cards``."""
        return [c for c in self.all() if c is not self.cards]

    def count(self) -> int:
        """Rows in every collection."""
        return sum(c._collection.count() for c in self.all())


def open_collections(
    client: ClientAPI, embeddings: Embeddings, prefix: str = "", suffix: str = ""
) -> Collections:
    """The three collections of an index on ``client``, named ``{prefix}{kind}{suffix}``."""
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


def serialize_parent(doc: Document) -> bytes:
    """A parent card as a versioned JSON record."""
    record = {
        "format_version": PARENT_FORMAT_VERSION,
        "id": doc.id,
        "page_content": doc.page_content,
        "metadata": doc.metadata,
    }
    return json.dumps(record, ensure_ascii=False, sort_keys=True).encode("utf-8")


PARENT_DEFAULTS: dict[str, Any] = {
    md.LICENSE: "",
    md.TOPICS: [],
    md.ACCESSED_AT: "",
    md.SENSITIVITY: "public",
    md.SOURCE: "",
}
"""Metadata a record written before a field existed gets on reading. Version 0 (no
``format_version``, no ``id``) predates sensitivity, so everything in it was served: public."""


def deserialize_parent(data: bytes) -> Document:
    """Read a parent record of any known format version; missing fields get defaults.

    Reading never rewrites the record: an old store stays as it was written, and a re-ingest
    writes the new format into a new index beside it.
    """
    record: dict[str, Any] = json.loads(data.decode("utf-8"))
    metadata = dict(record.get("metadata") or {})
    doc_id = record.get("id") or metadata.get(md.PARENT_ID)
    metadata.setdefault(md.PARENT_ID, doc_id)
    metadata.setdefault(md.TITLE, doc_id)
    for key, default in PARENT_DEFAULTS.items():
        metadata.setdefault(key, list(default) if isinstance(default, list) else default)
    return Document(id=doc_id, page_content=record.get("page_content", ""), metadata=metadata)


def open_parent_store(path: Path) -> BaseStore[str, Document]:
    """Parent cards on disk: ``LocalFileStore`` with a versioned JSON encoding."""
    return encoded(LocalFileStore(path))


def encoded(store: BaseStore[str, bytes]) -> BaseStore[str, Document]:
    """Any byte store as a parent store: the same versioned JSON records everywhere."""
    return EncoderBackedStore(
        store,
        key_encoder=lambda key: key,
        value_serializer=serialize_parent,
        value_deserializer=deserialize_parent,
    )


_MEMORY: dict[str, InMemoryByteStore] = {}
"""Parent stores of ``CARDRAG_PARENT_STORE=memory``, per index generation (this process)."""
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def parent_store(
    spec: str | None, generation: str, default: Path, namespace: str = "cardrag"
) -> BaseStore[str, Document]:
    """The parent store of one index generation, wherever ``CARDRAG_PARENT_STORE`` says.

    Args:
        spec: ``None`` (the folder ``default``), ``memory``, a Redis URL (``redis://...``,
            LangChain's ``RedisStore``, keys prefixed ``{namespace}:{generation}/``), or a
            folder (one subfolder ``{namespace}/{generation}`` per generation).
        generation: The index generation the parents belong to.
        default: The folder used when ``spec`` is None.
        namespace: The knowledge base's prefix on shared stores (``CARDRAG_NAMESPACE``).
    """
    key = f"{namespace}:{generation}"
    if spec is None:
        return open_parent_store(default)
    if spec == "memory":
        return encoded(_MEMORY.setdefault(key, InMemoryByteStore()))
    if spec.startswith(REDIS_SCHEMES):
        return encoded(redis_store(spec, key))
    return open_parent_store(Path(spec) / namespace / generation)


def redis_store(url: str, prefix: str) -> BaseStore[str, bytes]:
    """LangChain's Redis byte store, keys under ``prefix`` (the ``distributed`` extra)."""
    try:
        from langchain_community.storage import RedisStore
    except ImportError as exc:  # pragma: no cover - depends on the environment
        msg = "a Redis parent store needs the extra: pip install 'cardrag[distributed]'"
        raise ImportError(msg) from exc
    store: BaseStore[str, bytes] = RedisStore(redis_url=url, namespace=prefix)
    return store


def drop_parent_store(
    spec: str | None, generation: str, default: Path, namespace: str = "cardrag"
) -> None:
    """Remove one generation's parents, wherever :func:`parent_store` put them."""
    key = f"{namespace}:{generation}"
    if spec is None:
        shutil.rmtree(default, ignore_errors=True)
    elif spec == "memory":
        _MEMORY.pop(key, None)
    elif spec.startswith(REDIS_SCHEMES):
        store = redis_store(spec, key)
        keys = list(store.yield_keys())
        for start in range(0, len(keys), 1000):
            store.mdelete(keys[start : start + 1000])
    else:
        shutil.rmtree(Path(spec) / namespace / generation, ignore_errors=True)


def upsert_documents(
    target: Chroma | Collections,
    docstore: BaseStore[str, Document],
    splitter: CardSplitter,
    parents: Sequence[Document],
    *,
    progress: bool = False,
) -> list[Document]:
    """The one write path: children into Chroma, parents into the docstore.

    Children get deterministic ids ``{card_id}::{NN}``; rows a card no longer has (it shrank,
    or its rows moved to another collection) are deleted after the new rows are written, so
    re-adding the same cards changes nothing.

    Args:
        target: The index's collections (each row goes where :meth:`Collections.route` says),
            or one collection for every row.
        docstore: The parent store.
        splitter: Splits each parent into children.
        parents: Parent documents whose ``id`` is the card id.
        progress: Show a progress bar over write batches.

    Returns:
        The rows written (each child as a ``Document`` whose ``id`` is its row id), grouped by
        collection in :meth:`Collections.all` order and in split order within each: the order
        the collections give them back.
    """
    for doc in parents:
        if not doc.id:
            msg = f"parent document has no id (title {doc.metadata.get(md.TITLE)!r})"
            raise ValueError(msg)
    stores = target if isinstance(target, Collections) else Collections(target)
    children = splitter.split_documents(parents)
    ids = [md.child_id(c.metadata[md.PARENT_ID], c.metadata[md.CHUNK_INDEX]) for c in children]
    parent_ids = [str(doc.id) for doc in parents]
    routed = [stores.route(c.metadata) for c in children]
    stale = {
        id(store): set(existing_child_ids(store, parent_ids))
        - {i for i, r in zip(ids, routed, strict=True) if r is store}
        for store in stores.all()
    }
    batches = range(0, len(children), WRITE_BATCH)
    for start in tqdm(
        batches, desc="embedding children", unit="batch", disable=None if progress else True
    ):
        end = start + WRITE_BATCH
        for store in stores.all():
            rows = [i for i in range(start, min(end, len(children))) if routed[i] is store]
            if rows:
                store.add_documents([children[i] for i in rows], ids=[ids[i] for i in rows])
    for store in stores.all():
        if stale[id(store)]:
            store.delete(ids=sorted(stale[id(store)]))
    docstore.mset([(str(doc.id), doc) for doc in parents])
    removed = sum(len(s) for s in stale.values())
    logger.info(
        "wrote %d children of %d parents (%d stale removed)", len(ids), len(parents), removed
    )
    return [
        Document(id=ids[i], page_content=children[i].page_content, metadata=children[i].metadata)
        for store in stores.all()
        for i in range(len(children))
        if routed[i] is store
    ]


def existing_child_ids(vectorstore: Chroma, parent_ids: Sequence[str]) -> list[str]:
    """Ids of the child rows the given parents have now."""
    found: list[str] = []
    for start in range(0, len(parent_ids), WRITE_BATCH):
        batch: list[str | int | float | bool] = list(parent_ids[start : start + WRITE_BATCH])
        where = cast(Where, {md.PARENT_ID: {"$in": batch}})
        found.extend(vectorstore.get(where=where, include=[])["ids"])
    return found


def delete_documents(
    target: Chroma | Collections, docstore: BaseStore[str, Document], parent_ids: Sequence[str]
) -> None:
    """Remove cards: their rows from every collection and their records from the docstore."""
    stores = target if isinstance(target, Collections) else Collections(target)
    for store in stores.all():
        stale = existing_child_ids(store, parent_ids)
        if stale:
            store.delete(ids=stale)
    docstore.mdelete(list(parent_ids))


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

    @property
    def vectorstore(self) -> Chroma:
        """The children collection."""
        return self.collections.children


class ModelMismatchError(ValueError):
    """The index was built with another embedding model than the one configured."""


def open_index(
    store_dir: Path,
    embeddings: Embeddings,
    model: str | None = None,
    parents: str | None = None,
) -> Index:
    """Open the index the ``current`` link points to.

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
    link = Path(store_dir) / CURRENT
    if not link.exists():
        msg = f"{store_dir}: no index found; build one with `cardrag ingest` (or `make ingest`)"
        raise StoreMissingError(msg)
    path = link.resolve()
    manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    check_model(str(path), manifest, model)
    bm25 = BM25Index.load(path / "bm25") if (path / "bm25").is_dir() else None
    if manifest.get("collections"):
        stores = open_collections(chroma_client(path / "chroma"), embeddings)
    else:  # built before the rows were split into collections: every row in "children"
        stores = Collections(open_vectorstore(path / "chroma", embeddings))
    return Index(
        path=path,
        collections=stores,
        docstore=parent_store(parents, path.name, path / "parents"),
        manifest=manifest,
        bm25=bm25,
        generation=path.name,
    )


def check_model(where: str, manifest: dict[str, Any], model: str | None) -> None:
    """Refuse an index built with another embedding model than the configured one."""
    built_with = manifest.get("embedding_model")
    if model is not None and built_with is not None and built_with != model:
        msg = (
            f"{where}: built with embedding model {built_with!r} but {model!r} is configured; "
            "re-ingest (`cardrag ingest`) or set CARDRAG_EMBEDDING_MODEL"
        )
        raise ModelMismatchError(msg)


def new_generation() -> str:
    """A fresh, sortable index generation name."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    return f"index-{stamp}-{uuid.uuid4().hex[:6]}"


def make_manifest(
    splitter: CardSplitter, cards: int, children: int, extra: dict[str, Any] | None
) -> dict[str, Any]:
    """What an index records about how it was built."""
    return {
        **(extra or {}),
        "built_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cards": cards,
        "children": children,
        "chunk_size": splitter._chunk_size,
        "chunk_overlap": splitter.overlap,
        "chunker": splitter.mode,
        "distance_space": DISTANCE_SPACE,
        "parent_format_version": PARENT_FORMAT_VERSION,
        "collections": list(KINDS),
    }


def build_index(
    cards: Sequence[Card],
    store_dir: Path,
    embeddings: Embeddings,
    splitter: CardSplitter,
    *,
    extra_manifest: dict[str, Any] | None = None,
    progress: bool = True,
    languages: Sequence[str] = ("en",),
    parents: str | None = None,
) -> Index:
    """Build a complete new index beside the current one, then swap it in atomically.

    Args:
        cards: Validated cards (validate before calling: nothing is touched on a bad corpus).
        store_dir: The store folder.
        embeddings: The embedding model.
        splitter: The child splitter.
        extra_manifest: Recorded in ``manifest.json`` (e.g. the model name).
        progress: Show progress bars.
        languages: Languages of the cards, for BM25 stop words.
        parents: ``CARDRAG_PARENT_STORE`` (None: inside the index folder).

    Returns:
        The new index, opened.
    """
    store_dir = Path(store_dir)
    store_dir.mkdir(parents=True, exist_ok=True)
    path = store_dir / new_generation()
    try:
        stores = open_collections(chroma_client(path / "chroma"), embeddings)
        docstore = parent_store(parents, path.name, path / "parents")
        written = upsert_documents(
            stores, docstore, splitter, [c.to_document() for c in cards], progress=progress
        )
        bm25 = BM25Index.from_rows(
            ((str(d.id), d.page_content, d.metadata) for d in written), languages
        )
        bm25.save(path / "bm25")
        manifest = make_manifest(splitter, len(cards), len(written), extra_manifest)
        (path / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    except BaseException:
        logger.warning("ingest failed; removing the partial index %s", path.name)
        shutil.rmtree(path, ignore_errors=True)
        drop_parent_store(parents, path.name, path / "parents")
        raise
    swap_current(store_dir, path, parents)
    return Index(
        path=path,
        collections=stores,
        docstore=docstore,
        manifest=manifest,
        bm25=bm25,
        generation=path.name,
    )


def swap_current(store_dir: Path, target: Path, parents: str | None = None) -> None:
    """Point ``current`` at ``target`` atomically, keep the previous index, drop older ones."""
    link = store_dir / CURRENT
    previous = link.resolve() if link.exists() else None
    tmp = store_dir / f".{CURRENT}-{uuid.uuid4().hex[:6]}"
    tmp.symlink_to(target.name)
    tmp.replace(link)  # os.replace: atomic on POSIX
    keep = {target.name} | ({previous.name} if previous else set())
    for old in store_dir.glob("index-*"):
        if old.name not in keep:
            shutil.rmtree(old, ignore_errors=True)
            drop_parent_store(parents, old.name, old / "parents")


def ingest_folder(
    settings: Settings, cards_dir: Path | None = None, *, clean: bool = False
) -> Index:
    """Load, validate and index a folder of cards with the configured model and budgets.

    Args:
        settings: Paths, model and chunk budgets.
        cards_dir: Overrides ``settings.cards_dir``.
        clean: Delete the whole store folder first (every previous index).

    Returns:
        The new index, already swapped in.
    """
    cards = load_cards(cards_dir or settings.cards_dir)  # fails before anything is touched
    if clean and settings.store_dir.exists():
        shutil.rmtree(settings.store_dir)
    embeddings = load_embeddings(settings.embedding_model, settings.threads)
    splitter = CardSplitter.from_settings(settings)
    if settings.chroma_url:
        from ingest.remote import build_remote

        return build_remote(cards, settings, embeddings, splitter)
    return build_index(
        cards,
        settings.store_dir,
        embeddings,
        splitter,
        extra_manifest={"embedding_model": settings.embedding_model},
        languages=settings.bm25_languages,
        parents=settings.parent_store,
    )


def open_current(settings: Settings, embeddings: Embeddings) -> Index:
    """The live index wherever the settings put it: a store folder, or a Chroma server."""
    if settings.chroma_url:
        from ingest.remote import open_remote

        return open_remote(settings, embeddings)
    model = settings.embedding_model
    return open_index(settings.store_dir, embeddings, model, settings.parent_store)


def current_generation(settings: Settings) -> str:
    """The live index generation's name; one cheap read (a link, or one Chroma call).

    Raises:
        StoreMissingError: when nothing has been ingested.
    """
    if settings.chroma_url:
        from ingest.remote import read_pointer

        return read_pointer(settings.chroma_url, settings.namespace)[0]
    link = settings.store_dir / CURRENT
    if not link.exists():
        msg = (
            f"{settings.store_dir}: no index found; "
            "build one with `cardrag ingest` (or `make ingest`)"
        )
        raise StoreMissingError(msg)
    return link.resolve().name
