"""The index: where children and parents live, generations, and the one write path.

Modules, one concept each:

* :mod:`~ingest.index.collections`: the Chroma collections and the row plan (which
  collection and filter serve which rows);
* :mod:`~ingest.index.parents`: parent records (versioned JSON) and their stores;
* :mod:`~ingest.index.rows`: the one write path (upsert and delete cards);
* :mod:`~ingest.index.generations`: the ``Generations`` protocol (new, complete, swap, drop,
  collect, current, and the one-writer lock), with :mod:`~ingest.index.local` (a store folder)
  and :mod:`~ingest.index.remote` (a Chroma server);
* :mod:`~ingest.index.manifest`: what a generation records, and the model check;
* :mod:`~ingest.index.reader`: opening the live generation (:class:`Index`);
* :mod:`~ingest.index.builder`: building one (validate, write, complete, swap, collect).

The names most callers need are importable from here.
"""

from ingest.index.builder import NotAStoreError, build, build_index, ingest_folder
from ingest.index.collections import (
    Collections,
    StoreUnavailableError,
    chroma_client,
    open_collections,
    open_vectorstore,
)
from ingest.index.generations import (
    GenerationCountError,
    Generations,
    StoreLockedError,
    StoreMissingError,
)
from ingest.index.local import LocalGenerations
from ingest.index.manifest import ModelMismatchError
from ingest.index.parents import parent_store
from ingest.index.reader import Index, current_generation, open_current, open_index
from ingest.index.remote import RemoteGenerations
from ingest.index.rows import delete_documents, upsert_documents

__all__ = [
    "Collections",
    "GenerationCountError",
    "Generations",
    "Index",
    "LocalGenerations",
    "ModelMismatchError",
    "NotAStoreError",
    "RemoteGenerations",
    "StoreLockedError",
    "StoreMissingError",
    "StoreUnavailableError",
    "build",
    "build_index",
    "chroma_client",
    "current_generation",
    "delete_documents",
    "ingest_folder",
    "open_collections",
    "open_current",
    "open_index",
    "open_vectorstore",
    "parent_store",
    "upsert_documents",
]
