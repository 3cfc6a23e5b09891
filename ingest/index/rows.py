"""The one write path into an index: children into Chroma, parent records into the docstore."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import cast

from chromadb.api.types import Where
from langchain_chroma import Chroma
from langchain_core.documents import Document
from langchain_core.stores import BaseStore
from tqdm.auto import tqdm

from cardrag.ingest import metadata as md
from cardrag.ingest.index.collections import Collections
from cardrag.ingest.splitter import CardSplitter

logger = logging.getLogger(__name__)

WRITE_BATCH = 256
"""Children embedded and written per Chroma call (well below Chroma's max batch size)."""


def upsert_documents(
    target: Chroma | Collections,
    docstore: BaseStore[str, Document],
    splitter: CardSplitter,
    parents: Sequence[Document],
    *,
    progress: bool = False,
    children: Sequence[Document] | None = None,
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
        children: ``splitter.split_documents(parents)``, when the caller has them already.

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
    children = list(children) if children is not None else splitter.split_documents(parents)
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


def with_ids(documents: Sequence[Document], ids: Sequence[str] | None) -> list[Document]:
    """Documents with ``id`` set from ``ids`` when given."""
    if ids is None:
        return list(documents)
    if len(ids) != len(documents):
        msg = f"got {len(documents)} documents but {len(ids)} ids"
        raise ValueError(msg)
    return [
        Document(id=i, page_content=d.page_content, metadata=d.metadata)
        for d, i in zip(documents, ids, strict=True)
    ]
