"""Writing through the retriever: parents in, their children and BM25 kept in step.

``add_documents`` as ``ParentDocumentRetriever`` has it (re-adding a parent replaces its
children), and the ``DocumentIndex`` methods LangChain's indexing API calls (``upsert``,
``get``, ``delete``), so a re-index never leaves a stale child behind. Every write goes
through the index's one write path (:mod:`cardrag.ingest.index.rows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document
from langchain_core.indexing.base import DeleteResponse, DocumentIndex, UpsertResponse
from langchain_core.runnables.config import run_in_executor
from langchain_core.vectorstores import VectorStore
from pydantic import ConfigDict

from cardrag.ingest import documents as split
from cardrag.ingest.index.layout import is_chroma
from cardrag.ingest.index.rows import delete_documents, upsert_documents
from cardrag.ingest.lexical import BM25Index
from cardrag.retrievers.fields import BM25_PREFIX, ScoredParentFields

if TYPE_CHECKING:
    from cardrag.ingest.index.collections import Collections


class IndexedParents(ScoredParentFields, DocumentIndex):
    """The retriever's write side: add, upsert, get and delete parents with their children."""

    model_config = ConfigDict(extra="forbid")  # a misspelt field is refused, not ignored

    def add_documents(
        self,
        documents: list[Document],
        ids: list[str] | None = None,
        add_to_docstore: bool = True,
        **kwargs: Any,
    ) -> None:
        """Add parents (and their children) as ``ParentDocumentRetriever`` does; re-adding replaces.

        Each parent's id is ``ids[i]``, else its ``Document.id``, else a new uuid. With a
        ``parent_splitter`` each document is cut into sections first, ``{id}-01``, ``{id}-02``,
        ... (or, as LangChain allows, ``ids`` name the sections one for one). Children get
        deterministic ids ``{parent id}::{NN}`` and ``id_key``; the children a re-added parent
        no longer has, and the sections a re-added document no longer has, are deleted.

        Args:
            documents: Parent documents, from any loader.
            ids: Their ids (optional).
            add_to_docstore: False writes only the children (the parents are in the docstore
                already); then every parent needs an id.
            **kwargs: Passed to the vector store's ``add_documents``.
        """
        parents, replaced = self._parents(documents, ids, add_to_docstore=add_to_docstore)
        stale = [s for s in replaced if s not in {p.id for p in parents}]
        if stale:
            delete_documents(self._target, self.docstore, stale, self.id_key)
        children = split.child_documents(
            parents,
            self.child_splitter,
            id_key=self.id_key,
            child_metadata_fields=self.child_metadata_fields,
        )
        written = upsert_documents(
            self._target,
            self.docstore,
            self.child_splitter,
            parents,
            children=children,
            id_key=self.id_key,
            add_to_docstore=add_to_docstore,
            **kwargs,
        )
        self._keep_in_step([*stale, *(str(p.id) for p in parents)], written)

    async def aadd_documents(
        self,
        documents: list[Document],
        ids: list[str] | None = None,
        add_to_docstore: bool = True,
        **kwargs: Any,
    ) -> None:
        """Async :meth:`add_documents` (the write runs in an executor)."""
        body = partial(self.add_documents, documents, ids, add_to_docstore, **kwargs)
        await run_in_executor(None, body)

    def upsert(self, items: Sequence[Document], /, **kwargs: Any) -> UpsertResponse:
        """Add or replace parents by their ``id`` (a new uuid where they have none).

        The ``DocumentIndex`` write that LangChain's indexing API calls
        (``langchain_core.indexing.index``): a replaced parent's old children are deleted.
        """
        ids = split.parent_ids(list(items), None)
        self.add_documents(list(items), ids=ids, **kwargs)
        return {"succeeded": ids, "failed": []}

    def get(self, ids: Sequence[str], /, **kwargs: Any) -> list[Document]:
        """The stored parents with these ids (with a ``parent_splitter``: a document's sections).

        Missing ids are skipped; the order is that of ``ids``.
        """
        found = self._stored(ids)
        return [doc for _, docs in found for doc in docs]

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> DeleteResponse:
        """Remove parents with their children (a document's id removes all its sections).

        Raises:
            ValueError: without ``ids`` (nothing is deleted by default).
        """
        if ids is None:
            msg = "delete() needs the ids of the parents to remove"
            raise ValueError(msg)
        found = self._stored(ids)
        parents = list(dict.fromkeys([*ids, *(str(d.id) for _, docs in found for d in docs)]))
        delete_documents(self._target, self.docstore, parents, self.id_key)
        self._keep_in_step(parents, [])
        done = [i for i, docs in found if docs]
        return {"num_deleted": len(done), "succeeded": done, "num_failed": 0, "failed": []}

    def _parents(
        self, documents: Sequence[Document], ids: Sequence[str] | None, *, add_to_docstore: bool
    ) -> tuple[list[Document], list[str]]:
        """The parents to write (ids set) and the sections they replace."""
        if not add_to_docstore and ids is None and not all(d.id for d in documents):
            msg = "If IDs are not passed in, `add_to_docstore` MUST be True"
            raise ValueError(msg)
        if self.parent_splitter is None:
            return split.with_ids(documents, split.parent_ids(documents, ids)), []
        if ids is not None and len(ids) != len(documents):  # LangChain's: one id per section
            pieces = self.parent_splitter.split_documents(list(documents))
            return split.with_ids(pieces, split.parent_ids(pieces, ids)), []
        names = split.parent_ids(documents, ids)
        before = [str(d.id) for _, docs in self._stored(names) for d in docs]
        return split.sections(documents, names, self.parent_splitter), before

    def _stored(self, ids: Sequence[str]) -> list[tuple[str, list[Document]]]:
        """Each id with its stored parents: its own record, else its sections' records."""
        records = self.docstore.mget(list(ids))
        out: list[tuple[str, list[Document]]] = []
        for doc_id, record in zip(ids, records, strict=True):
            if record is not None:
                out.append((doc_id, [split.with_ids([record], [doc_id])[0]]))
            elif self.parent_splitter is not None:
                out.append((doc_id, split.stored_sections(self.docstore, doc_id)))
            else:
                out.append((doc_id, []))
        return out

    def _keep_in_step(self, removed: Sequence[str], written: Sequence[Document]) -> None:
        """Keep BM25 in step with a write: rows of ``removed`` parents gone, ``written`` in.

        The saved row vectors (``row_vectors``) describe the rows before the write: dropped.
        """
        self.row_vectors = None
        if self.bm25 is None:
            return
        if self.bm25.texts is not None:
            rows = [(str(d.id), d.page_content, d.metadata) for d in written]
            self.bm25 = self.bm25.updated(removed, rows, id_key=self.id_key)
        elif is_chroma(self.vectorstore):  # an ingest's index: rebuilt from its rows
            self.bm25 = BM25Index.from_collections(
                self.collections.with_children(), stemmed=self.bm25.stemmed, id_key=self.id_key
            )
        if self.bm25_store is not None:
            self.bm25.save_to(self.bm25_store, BM25_PREFIX)

    @property
    def _target(self) -> VectorStore | Collections:
        """Where children are written: the index's collections (Chroma), or the store."""
        return self.collections if is_chroma(self.vectorstore) else self.vectorstore
