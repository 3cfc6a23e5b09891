"""BM25 over the same children as the vector store (bm25s), persisted beside Chroma.

Why bm25s rather than LangChain's ``BM25Retriever``: bm25s scores with sparse matrices in
numpy and saves its index to plain files; ``BM25Retriever`` wraps ``rank_bm25``, which scores
every document in Python on each query and is pickled rather than saved.

Tokens are lower-cased words of two or more characters; stop words of the cards' language(s)
are dropped (``en`` by default: a mixed list removes English content words such as "come" or
"con" and cost 2 points of recall@1 on the golden set); there is no stemming.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cardrag.ingest import metadata as md

logger = logging.getLogger(__name__)

CHILD_IDS = "child_ids.json"
READ_PAGE = 5000
"""Rows per Chroma ``get`` when rebuilding from a collection."""


STOPWORD_LISTS = {
    "en": "STOPWORDS_EN",
    "es": "STOPWORDS_SPANISH",
    "pt": "STOPWORDS_PORTUGUESE",
    "it": "STOPWORDS_ITALIAN",
    "fr": "STOPWORDS_FRENCH",
    "de": "STOPWORDS_GERMAN",
}
"""Languages with a stop-word list, by ISO 639-1 code."""


def stopwords(languages: Sequence[str]) -> list[str]:
    """The union of the stop-word lists of ``languages`` (computed once per language set)."""
    return list(_stopwords(tuple(languages)))


@functools.cache
def _stopwords(languages: tuple[str, ...]) -> tuple[str, ...]:
    """The union of the stop-word lists of ``languages``.

    Raises:
        ValueError: for a language without a list.
    """
    from bm25s import stopwords as sw

    words: set[str] = set()
    for lang in languages:
        if lang not in STOPWORD_LISTS:
            msg = f"no stop-word list for {lang!r}; known: {', '.join(STOPWORD_LISTS)}"
            raise ValueError(msg)
        words |= set(getattr(sw, STOPWORD_LISTS[lang]))
    return tuple(sorted(words))


@dataclass
class BM25Index:
    """A BM25 index of child chunks; ``search`` returns ``(child_id, parent_id, score)``.

    Example:
        >>> index = BM25Index.build(["a::00"], ["a"], ["Keep insulin in the fridge."])
        >>> [(child, parent) for child, parent, _ in index.search("insulin fridge", 5)]
        [('a::00', 'a')]
    """

    child_ids: list[str]
    """Child id of every indexed row, in index order."""
    parent_ids: list[str]
    """Parent id of every indexed row."""
    model: Any
    """The ``bm25s.BM25`` index (None when there are no rows)."""
    restricted: list[bool] = field(default_factory=list)
    """Whether each row belongs to a restricted card (skipped unless allowed)."""
    languages: tuple[str, ...] = ("en",)
    """Languages whose stop words are dropped, at indexing and at search."""

    @classmethod
    def build(
        cls,
        child_ids: Sequence[str],
        parent_ids: Sequence[str],
        texts: Sequence[str],
        restricted: Sequence[bool] | None = None,
        languages: Sequence[str] = ("en",),
    ) -> BM25Index:
        """Index child texts (``restricted`` flags rows of restricted cards)."""
        import bm25s

        model = None
        if texts:
            model = bm25s.BM25()
            tokens = bm25s.tokenize(
                list(texts), stopwords=stopwords(languages), show_progress=False
            )
            model.index(tokens, show_progress=False)
        flags = list(restricted) if restricted is not None else [False] * len(child_ids)
        return cls(list(child_ids), list(parent_ids), model, flags, tuple(languages))

    def search(
        self, query: str, n: int, *, allow_restricted: bool = False
    ) -> list[tuple[str, str, float]]:
        """The ``n`` best-scoring children (score > 0), best first; restricted rows skipped."""
        import bm25s

        if self.model is None or n <= 0:
            return []
        tokens = bm25s.tokenize([query], stopwords=stopwords(self.languages), show_progress=False)
        if not tokens.vocab:
            return []
        mask = None if allow_restricted else self._public_mask
        docs, scores = self.model.retrieve(
            tokens,
            k=min(n, len(self.child_ids)),
            show_progress=False,
            n_threads=1,  # one question per call: bm25s threads split batches of queries only
            weight_mask=mask,
        )
        return [
            (self.child_ids[i], self.parent_ids[i], float(s))
            for i, s in zip(docs[0], scores[0], strict=True)
            if s > 0
        ]

    @functools.cached_property
    def _public_mask(self) -> Any:
        """1 for rows of cards that are not restricted, 0 for the others (None: no row is)."""
        if not any(self.restricted):
            return None
        import numpy as np

        return np.array([not r for r in self.restricted], dtype=np.float32)

    def save(self, folder: Path) -> None:
        """Write the index files and the row ids into ``folder``."""
        folder.mkdir(parents=True, exist_ok=True)
        if self.model is not None:
            self.model.save(str(folder), show_progress=False)
        rows = {
            "child_ids": self.child_ids,
            "parent_ids": self.parent_ids,
            "restricted": self.restricted,
            "languages": list(self.languages),
        }
        (folder / CHILD_IDS).write_text(json.dumps(rows), encoding="utf-8")

    @classmethod
    def load(cls, folder: Path) -> BM25Index:
        """Read an index written by :meth:`save`."""
        import bm25s

        rows = json.loads((folder / CHILD_IDS).read_text(encoding="utf-8"))
        model = bm25s.BM25.load(str(folder), show_progress=False) if rows["child_ids"] else None
        restricted = rows.get("restricted") or [False] * len(rows["child_ids"])
        languages = tuple(rows.get("languages") or ["en"])
        return cls(rows["child_ids"], rows["parent_ids"], model, restricted, languages)

    @classmethod
    def from_rows(
        cls, rows: Iterable[tuple[str, str, dict[str, Any]]], languages: Sequence[str] = ("en",)
    ) -> BM25Index:
        """Index ``(child id, text, metadata)`` rows, in order (card rows are left out).

        Ingest passes the rows it has just written, so it never reads them back.
        """
        kept = [(i, text, meta or {}) for i, text, meta in rows]
        kept = [row for row in kept if row[2].get(md.CHUNK_INDEX) != md.CARD_ROW]
        return cls.build(
            [i for i, _, _ in kept],
            [str(meta.get(md.PARENT_ID, "")) for _, _, meta in kept],
            [text for _, text, _ in kept],
            [meta.get(md.SENSITIVITY) == "restricted" for _, _, meta in kept],
            languages,
        )

    @classmethod
    def from_collections(
        cls, collections: Sequence[Any], languages: Sequence[str] = ("en",)
    ) -> BM25Index:
        """Rebuild from the child rows of Chroma collections (after a write to an open index).

        Rows are read a page at a time, unfiltered: one filtered ``get`` of a whole large
        collection fails inside Chroma ("too many SQL variables", seen at 10,000 cards).
        """
        rows: list[tuple[str, str, dict[str, Any]]] = []
        for collection in collections:
            read = 0
            while True:
                page = collection.get(
                    include=["documents", "metadatas"], limit=READ_PAGE, offset=read
                )
                read += len(page["ids"])
                rows += zip(page["ids"], page["documents"], page["metadatas"], strict=True)
                if len(page["ids"]) < READ_PAGE:
                    break
        return cls.from_rows(rows, languages)
