"""Every child row's vector beside the index, to score a parent's rows without asking Chroma.

A parent that only BM25 found gets its dense similarity, the best over all its rows, for the
gate and the dense ranking (:func:`cardrag.retrievers.candidates.resolve`). Chroma serves
those rows by id (``get`` with embeddings): a primary-key lookup, but its cost follows the
rows read, and a long parent has a hundred of them (100 parents of 30,000 characters: about
1,000 rows and 22 ms a question, against 2.3 ms for the first window's query). The same
vectors, kept in a NumPy file in the generation's folder and memory-mapped, are scored in well
under a millisecond, with the same float32 values and the same cosine
(:func:`~cardrag.retrievers.similarity.cosine_similarities`): the scores are identical.

Ingest writes them (:meth:`RowVectors.from_collection`, read back page by page from the
children collection it has just written; restricted rows and whole-card rows live in their own
collections and are read from Chroma as before). A generation is never written again, so the
file cannot go stale; a retriever written to (``add_documents``, ``delete``) stops using it.
Generations on a Chroma server keep none (the file would have to travel through the parent
store): they read from Chroma.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cardrag.ingest.index.row_texts import RowTexts

READ_PAGE = 5000
"""Rows read back from Chroma per ``get`` while writing (one ``get`` of a whole large
collection fails inside Chroma: "too many SQL variables")."""
MATRIX, IDS = "vectors.npy", "ids.json"
"""The two files of a saved :class:`RowVectors`."""
NORMS = "norms.npy"
"""Each saved row's length, beside the matrix (a generation written before it has none)."""
NORM_PAGE = 20_000
"""Rows whose lengths are computed at a time where none were saved."""
VECTORS = "vectors"
"""The folder of a generation that holds its children's vectors."""
CARDS = "cards"
"""The subfolder of :data:`VECTORS` that holds the whole-card rows' vectors."""
SENTENCES = "sentences"
"""The subfolder of :data:`VECTORS` that holds the sentence rows' vectors."""


@dataclass(frozen=True)
class RowVectors:
    """Row ids and their vectors (float32, one row each), as Chroma stores them.

    Scored by :mod:`cardrag.retrievers.scan`.

    Example:
        >>> vectors = RowVectors(["a::00", "a::01", "b::00"], np.eye(3, dtype=np.float32))
        >>> vectors.positions["b::00"], vectors.rows_by_parent["a"].tolist()
        (2, [0, 1])
    """

    ids: list[str]
    """Row id of every vector, in the matrix's order."""
    matrix: Any
    """``len(ids)`` x dimensions, float32 (memory-mapped once loaded)."""
    cards: RowVectors | None = None
    """The whole-card rows' vectors (the ``cards`` collection), saved beside the children's in
    :data:`CARDS`; None for a generation written before they were (read from Chroma)."""
    sentences: RowVectors | None = None
    """The sentence rows' vectors (the ``sentences`` collection), saved in :data:`SENTENCES`;
    None for a generation written without them (read from Chroma)."""
    texts: RowTexts | None = None
    """Each row's text and metadata, in the matrix's order (:mod:`.row_texts`); None for a
    generation written before they were saved (read from Chroma)."""

    saved_norms: np.ndarray | None = None
    """Each row's length as :data:`NORMS` holds it (memory-mapped); None: :attr:`norms`
    computes them on first use."""

    @functools.cached_property
    def norms(self) -> np.ndarray:
        """Each row's L2 length (float32): saved, else computed a page at a time on first use.

        A scan of a long parent's hundred rows otherwise spends more on their lengths than on
        the product (3,400 rows: 0.9 of 2.0 ms).
        """
        if self.saved_norms is not None:
            return self.saved_norms
        return row_norms(self.matrix)

    @functools.cached_property
    def positions(self) -> dict[str, int]:
        """Each row id's position in the matrix (built on first use)."""
        return {row_id: n for n, row_id in enumerate(self.ids)}

    @functools.cached_property
    def unit(self) -> np.ndarray:
        """The rows scaled to unit length (float32; built on first use)."""
        matrix = np.asarray(self.matrix, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix / np.where(norms == 0, 1.0, norms)

    @functools.cached_property
    def rows_by_parent(self) -> dict[str, np.ndarray]:
        """Each parent's row positions, in child-id order (built on first use)."""
        rows: dict[str, list[int]] = {}
        for n, row_id in enumerate(self.ids):
            rows.setdefault(row_id.rpartition("::")[0], []).append(n)
        ids = self.ids
        return {
            parent: np.array(sorted(found, key=ids.__getitem__), dtype=np.int64)
            for parent, found in rows.items()
        }

    @functools.cached_property
    def spans(self) -> dict[str, tuple[int, int]]:
        """Each parent whose rows are one block of the matrix: ``(start, stop)``.

        An ingest writes a parent's rows together, so every parent's are; a scan reads such a
        block as a slice, not row by row. Parents whose rows are not one block are left out.

        Example:
            >>> RowVectors(["a::00", "b::00", "a::01"], np.eye(3, dtype=np.float32)).spans
            {'b': (1, 2)}
        """
        return {
            parent: (int(rows.min()), int(rows.max()) + 1)
            for parent, rows in self.rows_by_parent.items()
            if int(rows.max()) - int(rows.min()) + 1 == len(rows)
        }

    @functools.cached_property
    def longest(self) -> int:
        """The most rows any one parent has (0 without rows).

        Example:
            >>> RowVectors(["a::00", "b::00", "a::01"], np.eye(3, dtype=np.float32)).longest
            2
        """
        return max((len(rows) for rows in self.rows_by_parent.values()), default=0)

    @classmethod
    def from_collection(cls, collection: Any) -> RowVectors:
        """Every row of a Chroma collection with its vector, read a page at a time."""
        ids: list[str] = []
        pages: list[np.ndarray] = []
        while True:
            page = collection.get(include=["embeddings"], limit=READ_PAGE, offset=len(ids))
            if len(page["ids"]):
                ids += page["ids"]
                pages.append(np.asarray(page["embeddings"], dtype=np.float32))
            if len(page["ids"]) < READ_PAGE:
                break
        matrix = np.concatenate(pages) if pages else np.zeros((0, 0), dtype=np.float32)
        return cls(ids, matrix)

    @classmethod
    def write(cls, collection: Any, folder: Path) -> RowVectors:
        """Every row of a Chroma collection written into ``folder`` page by page; the result.

        The file is filled a page at a time (``numpy.lib.format.open_memmap``), so an ingest
        never holds every vector in memory at once (100,000 cards: some 750 MB of them).
        """
        folder.mkdir(parents=True, exist_ok=True)
        total = collection.count()
        ids: list[str] = []
        matrix: Any = None
        norms: Any = None
        include = ["embeddings", "documents", "metadatas"]
        with RowTexts.writer(folder) as add:
            while len(ids) < total:
                page = collection.get(include=include, limit=READ_PAGE, offset=len(ids))
                if not len(page["ids"]):
                    break
                block = np.asarray(page["embeddings"], dtype=np.float32)
                if matrix is None:
                    shape = (total, block.shape[1])
                    matrix = np.lib.format.open_memmap(folder / MATRIX, "w+", np.float32, shape)
                    norms = np.lib.format.open_memmap(folder / NORMS, "w+", np.float32, (total,))
                matrix[len(ids) : len(ids) + len(block)] = block
                norms[len(ids) : len(ids) + len(block)] = row_norms(block)
                ids += page["ids"]
                for text, metadata in zip(page["documents"], page["metadatas"], strict=True):
                    add(text or "", dict(metadata or {}))
        if matrix is None:
            np.save(folder / MATRIX, np.zeros((0, 0), dtype=np.float32))
        else:
            matrix.flush()
            norms.flush()
            del matrix, norms
        (folder / IDS).write_text(json.dumps(ids), encoding="utf-8")
        loaded = cls.load(folder)
        assert loaded is not None  # just written
        return loaded

    def save(self, folder: Path) -> None:
        """Write the matrix and the ids into ``folder``."""
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / MATRIX, np.asarray(self.matrix, dtype=np.float32))
        np.save(folder / NORMS, self.norms)
        (folder / IDS).write_text(json.dumps(self.ids), encoding="utf-8")

    @classmethod
    def write_index(
        cls, children: Any, cards: Any, folder: Path, sentences: Any = None
    ) -> RowVectors:
        """The children's vectors, the card rows' and the sentence rows' beside them; the result.

        The card rows' go in :data:`CARDS`, the sentence rows' in :data:`SENTENCES`.

        Whole-card rows are scored by id as children are: is a candidate's card row there, and
        how close is it (:func:`cardrag.retrievers.candidates.card_rows_of`)?
        """
        if cards is not None:  # None: the card rows share the children's collection
            cls.write(cards, folder / CARDS)
        if sentences is not None:
            cls.write(sentences, folder / SENTENCES)
        return cls.write(children, folder)  # loads the card rows' beside it too

    @classmethod
    def load(cls, folder: Path) -> RowVectors | None:
        """The vectors :meth:`save` wrote (memory-mapped), or None when the folder has none.

        With the card rows' (:attr:`cards`) and the sentence rows' (:attr:`sentences`) when
        :meth:`write_index` saved them too.
        """
        if not (folder / MATRIX).is_file() or not (folder / IDS).is_file():
            return None
        ids = json.loads((folder / IDS).read_text(encoding="utf-8"))
        cards = cls.load(folder / CARDS) if (folder / CARDS).is_dir() else None
        sentences = cls.load(folder / SENTENCES) if (folder / SENTENCES).is_dir() else None
        matrix = np.load(folder / MATRIX, mmap_mode="r")
        norms = np.load(folder / NORMS, mmap_mode="r") if (folder / NORMS).is_file() else None
        return cls(ids, matrix, cards, sentences, RowTexts.load(folder), norms)


def row_norms(matrix: Any) -> np.ndarray:
    """Each row's L2 length in float32, :data:`NORM_PAGE` rows at a time.

    Example:
        >>> row_norms(np.array([[3, 4], [0, 0]], dtype=np.float32)).tolist()
        [5.0, 0.0]
    """
    out = np.empty(len(matrix), dtype=np.float32)
    for start in range(0, len(matrix), NORM_PAGE):
        block = np.asarray(matrix[start : start + NORM_PAGE], dtype=np.float32)
        out[start : start + len(block)] = np.sqrt(np.einsum("ij,ij->i", block, block))
    return out
