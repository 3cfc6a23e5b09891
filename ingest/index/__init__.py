"""The index: where children and parents live, generations, and the one write path.

Modules, one concept each:

* :mod:`~cardrag.ingest.index.layout`: the collections' names, kinds of row and their filters
  (plain Python: no Chroma);
* :mod:`~cardrag.ingest.index.collections`: the Chroma collections and the row plan (which
  collection and filter serve which rows);
* :mod:`~cardrag.ingest.index.parents`: parent records (versioned JSON) and their stores;
* :mod:`~cardrag.ingest.index.rows`: the one write path (upsert and delete cards);
* :mod:`~cardrag.ingest.index.generations`: the ``Generations`` protocol (new, complete,
  swap, drop, collect, current, and the one-writer lock), with
  :mod:`~cardrag.ingest.index.local` (a store folder) and :mod:`~cardrag.ingest.index.remote`
  (a Chroma server);
* :mod:`~cardrag.ingest.index.manifest`: what a generation records, and the model check;
* :mod:`~cardrag.ingest.index.reader`: opening the live generation (:class:`Index`);
* :mod:`~cardrag.ingest.index.builder`: building one (validate, write, complete, swap, collect).

The names most callers need are importable from here, each imported when first asked for: a
retriever over another store imports the layout and the saved vectors without Chroma (the
``chroma`` extra).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cardrag.ingest.index.builder import NotAStoreError, build, build_index, ingest_folder
    from cardrag.ingest.index.collections import (
        Collections,
        StoreUnavailableError,
        chroma_client,
        open_collections,
        open_vectorstore,
    )
    from cardrag.ingest.index.generations import (
        GenerationCountError,
        Generations,
        StoreLockedError,
        StoreMissingError,
    )
    from cardrag.ingest.index.local import LocalGenerations
    from cardrag.ingest.index.manifest import ModelMismatchError
    from cardrag.ingest.index.parents import parent_store
    from cardrag.ingest.index.reader import Index, current_generation, open_current, open_index
    from cardrag.ingest.index.remote import RemoteGenerations
    from cardrag.ingest.index.rows import delete_documents, upsert_documents

_HOMES = {
    "Collections": "cardrag.ingest.index.collections",
    "GenerationCountError": "cardrag.ingest.index.generations",
    "Generations": "cardrag.ingest.index.generations",
    "Index": "cardrag.ingest.index.reader",
    "LocalGenerations": "cardrag.ingest.index.local",
    "ModelMismatchError": "cardrag.ingest.index.manifest",
    "NotAStoreError": "cardrag.ingest.index.builder",
    "RemoteGenerations": "cardrag.ingest.index.remote",
    "StoreLockedError": "cardrag.ingest.index.generations",
    "StoreMissingError": "cardrag.ingest.index.generations",
    "StoreUnavailableError": "cardrag.ingest.index.collections",
    "build": "cardrag.ingest.index.builder",
    "build_index": "cardrag.ingest.index.builder",
    "chroma_client": "cardrag.ingest.index.collections",
    "current_generation": "cardrag.ingest.index.reader",
    "delete_documents": "cardrag.ingest.index.rows",
    "ingest_folder": "cardrag.ingest.index.builder",
    "open_collections": "cardrag.ingest.index.collections",
    "open_current": "cardrag.ingest.index.reader",
    "open_index": "cardrag.ingest.index.reader",
    "open_vectorstore": "cardrag.ingest.index.collections",
    "parent_store": "cardrag.ingest.index.parents",
    "upsert_documents": "cardrag.ingest.index.rows",
}
"""Each name's module (imported on first use: most of them need Chroma)."""


def __getattr__(name: str) -> Any:
    """The name from its module, imported on first use (PEP 562)."""
    if name not in _HOMES:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    return getattr(importlib.import_module(_HOMES[name]), name)


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
