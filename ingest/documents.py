"""A user's documents into parents and children, as LangChain's ``ParentDocumentRetriever`` does.

Pure functions shared by the retriever's sync and async write paths (and its
``DocumentIndex`` methods). Parents come from any loader: no id and no special metadata are
needed.

* **Parent ids** (:func:`parent_ids`): ``ids=`` when given, else each document's own ``id``,
  else a new uuid, as LangChain does.
* **Sections** (:func:`sections`): with a ``parent_splitter``, each document is cut into
  parents first. A section's id is ``{document id}-{NN}`` (from 01, as a long card's sections)
  and its metadata names the document in ``document_id``, so the whole document can be
  replaced or deleted by the id it came with (LangChain's indexing API does exactly that).
* **Children** (:func:`child_documents`): ``child_splitter`` cuts each parent; every child
  carries ``id_key`` (the parent's id) and ``chunk_index``, and, where the splitter records
  one (``add_start_index=True``, or :class:`~cardrag.ingest.splitter.CardSplitter` always),
  ``start_index`` and ``end_index``. With ``child_metadata_fields`` a child keeps only those
  fields of its parent's metadata, plus these.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.stores import BaseStore
from langchain_text_splitters import TextSplitter

from cardrag.ingest import metadata as md

PROBE = 16
"""Section ids asked for at a time when reading a document's sections back."""
POSITION_KEYS = (md.CHUNK_INDEX, md.START_INDEX, md.END_INDEX, md.HAS_CARD_ROW)
"""Child metadata the retriever writes itself and keeps whatever ``child_metadata_fields`` says
(its row id, provenance and the card-row flag); sentence windows' keys join them."""


def parent_ids(documents: Sequence[Document], ids: Sequence[str] | None) -> list[str]:
    """The id of each parent: ``ids`` when given, else its own ``id``, else a new uuid.

    Raises:
        ValueError: when ``ids`` and ``documents`` differ in length.

    Example:
        >>> parent_ids([Document("a", id="x"), Document("b", id="y")], None)
        ['x', 'y']
        >>> len(parent_ids([Document("a")], None)[0])
        36
    """
    if ids is not None:
        if len(ids) != len(documents):
            msg = (
                f"Got {len(documents)} documents but {len(ids)} ids: "
                "ids, when given, name the documents one for one"
            )
            raise ValueError(msg)
        return [str(i) for i in ids]
    return [str(d.id) if d.id else str(uuid.uuid4()) for d in documents]


def section_id(document_id: str, number: int) -> str:
    """The id of a document's ``number``-th section (from 1).

    Example:
        >>> section_id("essay", 3)
        'essay-03'
    """
    return f"{document_id}-{number:02d}"


def sections(
    documents: Sequence[Document], ids: Sequence[str], splitter: TextSplitter
) -> list[Document]:
    """Each document cut by the parent splitter, every piece a parent with its own id.

    Example:
        >>> from langchain_text_splitters import CharacterTextSplitter
        >>> cut = CharacterTextSplitter(separator=" ", chunk_size=5, chunk_overlap=0)
        >>> parts = sections([Document("ab cd ef")], ["d"], cut)
        >>> [(s.id, s.page_content, s.metadata) for s in parts]
        [('d-01', 'ab cd', {'document_id': 'd'}), ('d-02', 'ef', {'document_id': 'd'})]
    """
    out: list[Document] = []
    for doc, doc_id in zip(documents, ids, strict=True):
        pieces = splitter.split_documents([doc])
        for number, piece in enumerate(pieces, 1):
            meta = {**piece.metadata, md.DOCUMENT_ID: doc_id}
            out.append(
                Document(
                    id=section_id(doc_id, number), page_content=piece.page_content, metadata=meta
                )
            )
    return out


def stored_sections(docstore: BaseStore[str, Document], document_id: str) -> list[Document]:
    """The sections of a document the docstore holds, in order, ids set.

    Sections are numbered from 01 without gaps, so they are asked for :data:`PROBE` at a time
    until one is missing.
    """
    found: list[Document] = []
    start = 1
    while True:
        ids = [section_id(document_id, n) for n in range(start, start + PROBE)]
        records = docstore.mget(ids)
        for i, record in zip(ids, records, strict=True):
            if record is None:
                return found
            found.append(with_ids([record], [i])[0])
        start += PROBE


def with_ids(documents: Sequence[Document], ids: Sequence[str]) -> list[Document]:
    """Documents with ``id`` set from ``ids`` (text and metadata unchanged)."""
    return [
        d if d.id == i else Document(id=i, page_content=d.page_content, metadata=d.metadata)
        for d, i in zip(documents, ids, strict=True)
    ]


def child_documents(
    parents: Sequence[Document],
    splitter: TextSplitter,
    *,
    id_key: str,
    child_metadata_fields: Sequence[str] | None = None,
) -> list[Document]:
    """Split parents (each with its ``id``) into children that point back at them.

    Raises:
        ValueError: when a parent has no id, or lacks a field of ``child_metadata_fields``.

    Example:
        >>> from langchain_text_splitters import CharacterTextSplitter
        >>> cut = CharacterTextSplitter(separator=" ", chunk_size=5, chunk_overlap=0)
        >>> kids = child_documents([Document("ab cd ef", id="p", metadata={"x": 1})], cut,
        ...                        id_key="doc_id")
        >>> [(c.page_content, c.metadata) for c in kids]  # doctest: +NORMALIZE_WHITESPACE
        [('ab cd', {'x': 1, 'chunk_index': 0, 'doc_id': 'p'}),
         ('ef', {'x': 1, 'chunk_index': 1, 'doc_id': 'p'})]
    """
    children: list[Document] = []
    for parent in parents:
        if not parent.id:
            msg = f"parent document has no id (metadata {parent.metadata!r})"
            raise ValueError(msg)
        # a parent's own position keys (a section's start_index, a retrieved parent's
        # chunk_index) are not its children's: only the splitter's are kept
        bare = Document(
            id=parent.id,
            page_content=parent.page_content,
            metadata={k: v for k, v in parent.metadata.items() if k not in POSITION_KEYS},
        )
        for index, child in enumerate(splitter.split_documents([bare])):
            meta = _kept(child.metadata, child_metadata_fields, parent.id)
            meta.setdefault(md.CHUNK_INDEX, index)
            start = meta.get(md.START_INDEX)
            if isinstance(start, int) and md.END_INDEX not in meta:
                meta[md.END_INDEX] = start + len(child.page_content)
            meta[id_key] = parent.id
            children.append(Document(page_content=child.page_content, metadata=meta))
    return children


def _kept(meta: dict[str, Any], fields: Sequence[str] | None, parent: str) -> dict[str, Any]:
    """A child's metadata: all of it, or only ``fields`` plus the retriever's own keys."""
    if fields is None:
        return dict(meta)
    missing = [f for f in fields if f not in meta]
    if missing:
        msg = (
            f"parent {parent!r} has no metadata field {missing[0]!r} "
            f"(child_metadata_fields asks for {list(fields)!r})"
        )
        raise ValueError(msg)
    own = {k: v for k, v in meta.items() if k in POSITION_KEYS or k.startswith("window_")}
    return {**{f: meta[f] for f in fields}, **own}
