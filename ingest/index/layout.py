"""An index's layout without Chroma: its collections' names, kinds of row and their filters.

These names are plain Python, so the retriever imports them whatever the store (Chroma is the
``chroma`` extra); :mod:`~cardrag.ingest.index.collections` opens the collections they name.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Literal, TypeGuard

from cardrag.ingest import metadata as md

if TYPE_CHECKING:
    from langchain_chroma import Chroma

COLLECTION_NAME = "children"
"""Chroma collection holding one row per child chunk."""
CARDS_COLLECTION = "cards"
"""Chroma collection holding the whole-card rows (``chunk_index`` -1)."""
RESTRICTED_COLLECTION = "restricted"
"""Chroma collection holding every row of restricted cards, searched only when allowed."""
SENTENCES_COLLECTION = "sentences"
"""Chroma collection holding the sentence rows (``chunk_index`` -2 and below)."""
KINDS = (COLLECTION_NAME, CARDS_COLLECTION, RESTRICTED_COLLECTION, SENTENCES_COLLECTION)
"""An index's collections, in the order of :class:`Collections`' fields."""
DISTANCE_SPACE: Literal["cosine"] = "cosine"
"""Declared explicitly on the collection; the retriever converts distances for this space."""

Where = dict[str, Any]
RowKind = Literal["child", "card", "sentence"]
"""The kinds of row an index holds: a parent's children, its whole-card row, its sentences."""
CHILD_ROWS: Where = {md.CHUNK_INDEX: {"$ne": md.CARD_ROW}}
"""Real children only: every row but the card rows (``chunk_index`` -1), rows without a
``chunk_index`` included (children LangChain's own retriever wrote)."""
CARD_ROWS: Where = {md.CHUNK_INDEX: md.CARD_ROW}
"""Whole-card rows only."""
CHILDREN_ONLY: Where = {md.CHUNK_INDEX: {"$gte": 0}}
"""Real children only, in the restricted collection (every row there has a ``chunk_index``)."""
SENTENCE_ROWS: Where = {md.CHUNK_INDEX: {"$lte": md.SENTENCE_ROW}}
"""Sentence rows only."""
NOT_RESTRICTED: Where = {md.SENSITIVITY: {"$ne": "restricted"}}
"""Rows of cards that are not restricted (needed only where restricted rows share a collection)."""


def merge_filters(*filters: Where | None) -> Where | None:
    """Combine Chroma ``where`` filters with ``$and`` (multi-key dicts are split first).

    Example:
        >>> merge_filters({"a": 1}, None, {"b": 2, "c": 3})
        {'$and': [{'a': 1}, {'b': 2}, {'c': 3}]}
    """
    clauses: list[Where] = []
    for where in filters:
        if not where:
            continue
        if len(where) == 1 or any(key.startswith("$") for key in where):
            clauses.append(where)
        else:
            clauses.extend({key: value} for key, value in where.items())
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def is_chroma(store: object) -> TypeGuard[Chroma]:
    """Whether ``store`` is LangChain's ``Chroma``, without importing it.

    Chroma is the ``chroma`` extra: where ``langchain_chroma`` was never imported, nothing can
    be a ``Chroma``, so a FAISS or ``InMemoryVectorStore`` user never loads chromadb.

    Example:
        >>> is_chroma(object())
        False
    """
    module = sys.modules.get("langchain_chroma")
    return module is not None and isinstance(store, module.Chroma)
