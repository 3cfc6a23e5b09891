"""The one write path into an index: children into the vector store, parents into the docstore.

Children get deterministic ids ``{parent_id}::{NN}`` (:func:`~cardrag.ingest.metadata.child_id`),
so re-adding a parent overwrites its rows, and the rows it no longer has are deleted. Chroma
is asked which rows a parent has with a metadata filter (``id_key``); any other LangChain
vector store is probed by id (``get_by_ids``) for the rows the id scheme allows.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from langchain_core.documents import Document
from langchain_core.stores import BaseStore
from langchain_core.vectorstores import VectorStore
from langchain_text_splitters import TextSplitter
from tqdm.auto import tqdm

from cardrag.ingest import metadata as md
from cardrag.ingest.index.layout import Where, is_chroma

if TYPE_CHECKING:
    from cardrag.ingest.index.collections import Collections

logger = logging.getLogger(__name__)

WRITE_BATCH = 256
"""Children embedded and written per Chroma call (well below Chroma's max batch size)."""
PROBE = 32
"""Child ids asked for at a time per parent when probing a store without metadata reads."""


def upsert_documents(
    target: VectorStore | Collections,
    docstore: BaseStore[str, Document],
    splitter: TextSplitter,
    parents: Sequence[Document],
    *,
    progress: bool = False,
    children: Sequence[Document] | None = None,
    id_key: str = md.PARENT_ID,
    add_to_docstore: bool = True,
    **write_options: Any,
) -> list[Document]:
    """The one write path: children into Chroma, parents into the docstore.

    Children get deterministic ids ``{card_id}::{NN}``; rows a card no longer has (it shrank,
    or its rows moved to another collection) are deleted after the new rows are written, so
    re-adding the same cards changes nothing.

    Args:
        target: The index's collections (each row goes where :meth:`Collections.route` says),
            or one vector store (Chroma or any other) for every row.
        docstore: The parent store.
        splitter: Splits each parent into children.
        parents: Parent documents whose ``id`` is the parent's id.
        progress: Show a progress bar over write batches.
        children: ``splitter.split_documents(parents)``, when the caller has them already;
            each carries ``id_key`` and ``chunk_index``.
        id_key: Child metadata key holding the parent's id.
        add_to_docstore: Store the parents too (False: they are in the docstore already).
        **write_options: Passed to the vector store's ``add_documents``.

    Returns:
        The rows written (each child as a ``Document`` whose ``id`` is its row id), grouped by
        collection in :meth:`Collections.all` order and in split order within each: the order
        the collections give them back.
    """
    for doc in parents:
        if not doc.id:
            msg = f"parent document has no id (title {doc.metadata.get(md.TITLE)!r})"
            raise ValueError(msg)
    stores = Layout.of(target)
    children = list(children) if children is not None else splitter.split_documents(parents)
    ids = [md.child_id(str(c.metadata[id_key]), c.metadata[md.CHUNK_INDEX]) for c in children]
    parent_ids = [str(doc.id) for doc in parents]
    routed = [stores.route(c.metadata) for c in children]
    held = {id(s): set(existing_child_ids(s, parent_ids, id_key)) for s in stores.all()}
    stale = {
        id(store): held[id(store)] - {i for i, r in zip(ids, routed, strict=True) if r is store}
        for store in stores.all()
    }
    for store in stores.all():
        # a store other than Chroma may refuse an id it holds (FAISS): its rows go first
        if not is_chroma(store) and held[id(store)]:
            store.delete(ids=sorted(held[id(store)]))
            stale[id(store)] = set()
    batches = range(0, len(children), WRITE_BATCH)
    for start in tqdm(
        batches, desc="embedding children", unit="batch", disable=None if progress else True
    ):
        end = start + WRITE_BATCH
        for store in stores.all():
            rows = [i for i in range(start, min(end, len(children))) if routed[i] is store]
            if rows:
                store.add_documents(
                    [children[i] for i in rows], ids=[ids[i] for i in rows], **write_options
                )
    for store in stores.all():
        if stale[id(store)]:
            store.delete(ids=sorted(stale[id(store)]))
    if add_to_docstore:
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


def existing_child_ids(
    vectorstore: VectorStore, parent_ids: Sequence[str], id_key: str = md.PARENT_ID
) -> list[str]:
    """Ids of the child rows the given parents have now.

    Chroma is asked by metadata (rows written by any means, LangChain's own retriever's
    uuid rows included); any other store is probed by id for ``{parent}::card`` and
    ``{parent}::00``, ``::01``, ... until a parent's run of ids ends (:func:`probe_child_ids`).
    """
    if not is_chroma(vectorstore):
        return probe_child_ids(vectorstore, parent_ids)
    found: list[str] = []
    for start in range(0, len(parent_ids), WRITE_BATCH):
        batch: list[str | int | float | bool] = list(parent_ids[start : start + WRITE_BATCH])
        where = cast(Where, {id_key: {"$in": batch}})
        found.extend(vectorstore.get(where=where, include=[])["ids"])
    return found


def probe_child_ids(vectorstore: VectorStore, parent_ids: Sequence[str]) -> list[str]:
    """The deterministic child ids of the given parents that the store holds.

    Children are numbered from 00 without gaps, so a parent's ids are asked for
    :data:`PROBE` at a time until fewer come back than were asked.
    """
    found: list[str] = []
    pending = {p: 0 for p in dict.fromkeys(parent_ids)}
    asked_card = False
    while pending:
        asked = {
            p: [md.child_id(p, n) for n in range(start, start + PROBE)]
            for p, start in pending.items()
        }
        extra = [] if asked_card else [md.child_id(p, md.CARD_ROW) for p in pending]
        asked_card = True
        flat = [i for ids in asked.values() for i in ids] + extra
        held = {str(d.id) for d in vectorstore.get_by_ids(flat)}
        found += [i for i in flat if i in held]
        pending = {p: pending[p] + PROBE for p, ids in asked.items() if all(i in held for i in ids)}
    return found


def delete_documents(
    target: VectorStore | Collections,
    docstore: BaseStore[str, Document],
    parent_ids: Sequence[str],
    id_key: str = md.PARENT_ID,
) -> None:
    """Remove parents: their rows from every collection and their records from the docstore."""
    for store in Layout.of(target).all():
        stale = existing_child_ids(store, parent_ids, id_key)
        if stale:
            store.delete(ids=stale)
    docstore.mdelete(list(parent_ids))


class Layout:
    """Where rows are written: an index's collections, or one vector store for every row."""

    def __init__(self, collections: Collections | None, store: VectorStore) -> None:
        self.collections = collections
        self.store = store

    @classmethod
    def of(cls, target: VectorStore | Collections) -> Layout:
        """The layout of a write target."""
        if isinstance(target, VectorStore):
            return cls(None, target)
        return cls(target, target.children)

    def route(self, metadata: dict[str, object]) -> VectorStore:
        """The store a row with this metadata belongs in."""
        return self.collections.route(metadata) if self.collections else self.store

    def all(self) -> list[VectorStore]:
        """Every store rows are written to, children first."""
        return list(self.collections.all()) if self.collections else [self.store]
