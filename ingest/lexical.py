"""BM25 over the same children as the vector store (bm25s), persisted beside Chroma.

Why bm25s rather than LangChain's ``BM25Retriever``: bm25s scores with sparse matrices in
numpy and saves its index to plain files; ``BM25Retriever`` wraps ``rank_bm25``, which scores
every document in Python on each query and is pickled rather than saved.

Each child is analysed in its card's language (metadata ``language``; detected from the text
when a row has none), as :mod:`cardrag.ingest.analysis` says; the index is searched by
:mod:`cardrag.retrievers.bm25`.
"""

from __future__ import annotations

import functools
import json
import logging
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.stores import BaseStore

from cardrag.ingest import metadata as md
from cardrag.ingest.analysis import analyse
from cardrag.ingest.language import language_of

logger = logging.getLogger(__name__)

CHILD_IDS = "child_ids.json"
STORE_PREFIX = "bm25/"
"""Key prefix of the index files in a byte store (:meth:`BM25Index.save_to`)."""
READ_PAGE = 5000
"""Rows per Chroma ``get`` when rebuilding from a collection."""


@dataclass
class BM25Index:
    """A BM25 index of child chunks, searched by :func:`cardrag.retrievers.bm25.search`.

    Example:
        >>> index = BM25Index.build(["a::00"], ["a"], ["Keep insulin in the fridge."])
        >>> index.child_ids, index.parent_ids, index.languages
        (['a::00'], ['a'], ('en',))
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
    """The languages the rows are written in (a question is analysed in each)."""
    stemmed: tuple[str, ...] = ()
    """Languages whose tokens are stemmed (at indexing and at search alike)."""
    texts: list[str] | None = None
    """Every row's text and (``row_languages``) language, kept by an index that is updated
    in place (:meth:`updated`, a retriever built by hand); None where an ingest rebuilds it."""
    row_languages: list[str] | None = None
    """The language each row was analysed in (with ``texts``)."""

    @classmethod
    def build(
        cls,
        child_ids: Sequence[str],
        parent_ids: Sequence[str],
        texts: Sequence[str],
        restricted: Sequence[bool] | None = None,
        row_languages: Sequence[str] | None = None,
        *,
        stemmed: Sequence[str] = (),
        keep_texts: bool = False,
    ) -> BM25Index:
        """Index child texts, each analysed in its language (English without ``row_languages``).

        ``restricted`` flags rows of restricted cards; ``keep_texts`` keeps the texts for
        :meth:`updated`.
        """
        import bm25s

        langs = list(row_languages) if row_languages is not None else ["en"] * len(texts)
        model = None
        if texts:
            model = bm25s.BM25()
            corpus = [
                analyse(t, lang, stem=lang in stemmed) for t, lang in zip(texts, langs, strict=True)
            ]
            model.index(corpus, show_progress=False)
            model.scores = impact_ordered(model.scores)
        flags = list(restricted) if restricted is not None else [False] * len(child_ids)
        languages = tuple(sorted(set(langs))) or ("en",)
        kept = (list(texts), langs) if keep_texts else (None, None)
        return cls(
            list(child_ids), list(parent_ids), model, flags, languages, tuple(stemmed), *kept
        )

    def updated(
        self,
        removed: Iterable[str],
        rows: Iterable[tuple[str, str, dict[str, Any]]],
        *,
        id_key: str = md.PARENT_ID,
    ) -> BM25Index:
        """A new index: the rows of ``removed`` parents gone, ``rows`` added (bm25s is static).

        ``rows`` are ``(child id, text, metadata)`` as :meth:`from_rows` takes them. Only an
        index that kept its texts can be updated.

        Example:
            >>> index = BM25Index.build(["a::00"], ["a"], ["Fridge."], keep_texts=True)
            >>> index = index.updated(["a"], [("b::00", "Keep it cold.", {"doc_id": "b"})],
            ...                       id_key="doc_id")
            >>> index.child_ids, index.parent_ids
            (['b::00'], ['b'])
        """
        if self.texts is None or self.row_languages is None:
            msg = "this BM25 index did not keep its texts (build it with keep_texts=True)"
            raise ValueError(msg)
        gone = set(removed)
        old = [
            (c, p, t, r, lang)
            for c, p, t, r, lang in zip(
                self.child_ids,
                self.parent_ids,
                self.texts,
                self.restricted or [False] * len(self.child_ids),
                self.row_languages,
                strict=True,
            )
            if p not in gone
        ]
        new = [
            (
                c,
                str(meta.get(id_key, "")),
                text,
                meta.get(md.SENSITIVITY) == "restricted",
                language_of(meta, text),
            )
            for c, text, meta in rows
            if md.is_child(meta.get(md.CHUNK_INDEX))
        ]
        every = [*old, *new]
        return BM25Index.build(
            [r[0] for r in every],
            [r[1] for r in every],
            [r[2] for r in every],
            [r[3] for r in every],
            [r[4] for r in every],
            stemmed=self.stemmed,
            keep_texts=True,
        )

    @functools.cached_property
    def rows_by_parent(self) -> dict[str, list[int]]:
        """Row numbers per parent (built on first use)."""
        rows: dict[str, list[int]] = {}
        for i, parent in enumerate(self.parent_ids):
            rows.setdefault(parent, []).append(i)
        return rows

    @functools.cached_property
    def public_mask(self) -> Any:
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
            "stemmed": list(self.stemmed),
            "impact_ordered": True,
            **(
                {"texts": self.texts, "row_languages": self.row_languages}
                if self.texts is not None
                else {}
            ),
        }
        (folder / CHILD_IDS).write_text(json.dumps(rows), encoding="utf-8")

    @classmethod
    def load(cls, folder: Path) -> BM25Index:
        """Read an index written by :meth:`save`."""
        import bm25s

        rows = json.loads((folder / CHILD_IDS).read_text(encoding="utf-8"))
        model = bm25s.BM25.load(str(folder), show_progress=False) if rows["child_ids"] else None
        if model is not None and not rows.get("impact_ordered"):  # saved before the order
            model.scores = impact_ordered(model.scores)
        restricted = rows.get("restricted") or [False] * len(rows["child_ids"])
        languages = tuple(rows.get("languages") or ["en"])
        stemmed = tuple(rows.get("stemmed") or ())
        return cls(
            rows["child_ids"],
            rows["parent_ids"],
            model,
            restricted,
            languages,
            stemmed,
            rows.get("texts"),
            rows.get("row_languages"),
        )

    def save_to(self, store: BaseStore[str, bytes], prefix: str = STORE_PREFIX) -> None:
        """Write the index files into a byte store, as ``{prefix}{file}`` keys (:meth:`save`).

        Files an earlier save wrote under ``prefix`` and this one does not are removed.
        """
        with tempfile.TemporaryDirectory(prefix="cardrag-bm25-") as tmp:
            self.save(Path(tmp))
            files = sorted(Path(tmp).iterdir())
            names = {f"{prefix}{f.name}" for f in files}
            old = [k for k in store.yield_keys() if k.startswith(prefix) and k not in names]
            store.mset([(f"{prefix}{f.name}", f.read_bytes()) for f in files])
            if old:
                store.mdelete(old)

    @classmethod
    def load_from(
        cls, store: BaseStore[str, bytes], prefix: str = STORE_PREFIX
    ) -> BM25Index | None:
        """Read an index written by :meth:`save_to` (None when the store holds none)."""
        # every key, filtered here: RedisStore reads ``prefix`` as a whole pattern, not a prefix
        keys = sorted(k for k in store.yield_keys() if k.startswith(prefix))
        if f"{prefix}{CHILD_IDS}" not in keys:
            return None
        with tempfile.TemporaryDirectory(prefix="cardrag-bm25-") as tmp:
            for key, data in zip(keys, store.mget(keys), strict=True):
                if data is not None:
                    (Path(tmp) / key.removeprefix(prefix)).write_bytes(data)
            return cls.load(Path(tmp))

    @classmethod
    def from_rows(
        cls,
        rows: Iterable[tuple[str, str, dict[str, Any]]],
        *,
        stemmed: Sequence[str] = (),
        id_key: str = md.PARENT_ID,
        keep_texts: bool = False,
    ) -> BM25Index:
        """Index ``(child id, text, metadata)`` rows, in order (card and sentence rows left out).

        Each row is analysed in its metadata's ``language``, detected from its text when it
        has none. Ingest passes the rows it has just written, so it never reads them back.
        """
        kept = [(i, text, meta or {}) for i, text, meta in rows]
        kept = [row for row in kept if md.is_child(row[2].get(md.CHUNK_INDEX))]
        return cls.build(
            [i for i, _, _ in kept],
            [str(meta.get(id_key, "")) for _, _, meta in kept],
            [text for _, text, _ in kept],
            [meta.get(md.SENSITIVITY) == "restricted" for _, _, meta in kept],
            [language_of(meta, text) for _, text, meta in kept],
            stemmed=stemmed,
            keep_texts=keep_texts,
        )

    @classmethod
    def from_collections(
        cls,
        collections: Sequence[Any],
        *,
        stemmed: Sequence[str] = (),
        id_key: str = md.PARENT_ID,
        keep_texts: bool = False,
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
        return cls.from_rows(rows, stemmed=stemmed, id_key=id_key, keep_texts=keep_texts)


def impact_ordered(scores: dict[str, Any]) -> dict[str, Any]:
    """bm25s's score matrix with each token's postings sorted by contribution, highest first.

    The matrix is compressed by token (CSC: ``indptr``, ``indices`` = rows, ``data`` = the
    row's BM25 contribution for that token); summing a token's postings does not depend on
    their order, so bm25s reads the reordered matrix as before.

    Example:
        >>> import numpy as np
        >>> m = {"data": np.array([0.1, 0.5, 0.3], dtype=np.float32),
        ...      "indices": np.array([0, 1, 2]), "indptr": np.array([0, 3]), "num_docs": 3}
        >>> impact_ordered(m)["indices"].tolist()
        [1, 2, 0]
    """
    import numpy as np

    data, indices, indptr = scores["data"], scores["indices"], scores["indptr"]
    token = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    order = np.lexsort((indices, -data, token))  # by token, then contribution, then row
    return {**scores, "data": data[order], "indices": indices[order]}
