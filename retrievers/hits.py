"""Reading rows back: the nearest rows of one kind, and given rows by id, scored.

The retriever's narrow view of an index (:class:`RowReader`): it asks for rows of a kind
(children or whole-card rows) and gets scored hits; which collections hold them and which
metadata filters tell them apart stays in the row plan (:meth:`Collections.plan`).

Reads are lean: a hit first carries only its id, its score and what its id says (parent and
chunk index, :func:`~cardrag.ingest.metadata.child_id`); :meth:`RowReader.complete` reads the
text and metadata of the rows the retriever returns (from beside the index where they are
saved: :mod:`~cardrag.ingest.index.row_texts`). Reading metadata costs Chroma more than the
vector search (10,000 cards, 16 rows: 3.1 ms with it, 1.5 ms with distances only). Every
hit's score is a cosine similarity (:mod:`cardrag.retrievers.similarity`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from cardrag.ingest import metadata as md
from cardrag.ingest.index.layout import RowKind, Where
from cardrag.ingest.index.vectors import RowVectors
from cardrag.retrievers.checked import checked_nearest
from cardrag.retrievers.child_hit import (
    ChildHit,
    best_by_parent,
    best_hits,
    lean_hit,
    nearest,
    orphans,
)
from cardrag.retrievers.scan import best_of_parents, nearest_ids, scores_of
from cardrag.retrievers.similarity import cosine_similarities, scored_query

if TYPE_CHECKING:  # Chroma is the `chroma` extra: a RowReader exists only where it is
    from langchain_chroma import Chroma

    from cardrag.ingest.index.collections import Collections

SCAN_ROWS = 20_000
"""Saved rows up to which a window is found by scanning them (well under a millisecond at
this size, against 2 to 3 ms for a Chroma query); a larger collection is asked (HNSW)."""

SCORED_SENTENCES = 16_000
"""Sentence rows of the candidate parents up to which their best ones are scored from the saved
vectors rather than a window of all of them asked of Chroma. A long parent's rows are one
slice of the matrix (:func:`~cardrag.retrievers.scan.best_of_parents`), so scoring them costs
less than the query up to some twelve thousand rows: with a limit of 2,000 against 20,000,
the retriever took 8.1 against 7.2 ms at 139,000 rows (40 candidates holding some 4,000
sentence rows) and 9.6 against 9.2 ms at 413,000 (some 12,000), and the same with AVX-512
off (8.9 against 7.9, 9.4 against 9.1; Intel Xeon, 2 cores, interleaved). The gain shrinks
as the rows grow: the limit is not set far above the largest count measured."""


@dataclass(frozen=True)
class RowReader:
    """Scored rows of one index, as one caller may see them.

    Example:
        >>> reader = RowReader(collections, allow_restricted=False)   # doctest: +SKIP
        >>> reader.nearest(vector, 8, None, kind="child")[0].parent_id  # doctest: +SKIP
        'card-iron-tablets'
    """

    collections: Collections
    """The index's collections (and with them the row plan)."""
    allow_restricted: bool = False
    """Read restricted cards' rows too (otherwise they are outside every read)."""
    id_key: str = md.PARENT_ID
    """Row metadata key holding the parent's id."""
    vectors: RowVectors | None = None
    """The children collection's vectors beside the index (:mod:`~cardrag.ingest.index.vectors`):
    rows read by id from that collection, unfiltered, are scored from them, not read from
    Chroma (same scores). None: every read asks Chroma."""
    only_children: bool = False
    """The children collection was found to hold no card row and no restricted row
    (:meth:`for_question`): it is read without the filters that keep those out."""
    checked: bool = False
    """The index's one collection, nothing saved beside it, is asked for its nearest children
    without those filters, each row read whole and checked against them instead
    (:meth:`for_question`); a row they keep out sends the read to the filtered plan."""

    def nearest(
        self, vector: Sequence[float], fetch: int, where: Where | None, *, kind: RowKind
    ) -> list[ChildHit]:
        """The ``fetch`` rows of one kind nearest the question, over every collection of it.

        A collection whose rows are all saved beside the index, and no more than
        :data:`SCAN_ROWS` of them, is scanned there
        (:func:`~cardrag.retrievers.scan.nearest_ids`) instead of asked: exact, cheaper than one
        query, and a retriever that doubles its window to find k parents among a few long ones
        does not pay a query per window.
        """
        if self.checked and kind == "child":
            args = (self.collections.children, vector, fetch, where, self.id_key)
            if (hits := checked_nearest(*args, allow_restricted=self.allow_restricted)) is not None:
                return hits  # none of the rows read is one the filters drop
        hits = []
        for store, only in self._plan(kind, where):
            if (saved := self._saved(store, only)) is not None and len(saved.ids) <= SCAN_ROWS:
                ids, scores = scores_of(saved, vector, nearest_ids(saved, vector, fetch))
                hits += self._lean(store, ids, scores)
            else:
                hits += self._query(store, vector, fetch, only)
        return nearest(hits, fetch)

    def by_ids(
        self,
        vector: Sequence[float],
        row_ids: Sequence[str],
        where: Where | None,
        *,
        kind: RowKind,
    ) -> list[ChildHit]:
        """The given rows of one kind (those that exist and pass ``where``), scored, best first.

        Read by id (``get``, a primary-key lookup whose cost follows the number of ids, not
        the size of the collection) and scored here. A vector query restricted to a few rows
        costs Chroma far more than an unrestricted one (30 ms against 4 ms at 40,000
        children), and so does a ``get`` by parent id (a metadata lookup: 16 ms for 16
        parents at 49,000 rows, against 2 ms for their 70 rows' vectors by id).
        """
        if not row_ids:
            return []
        hits: list[ChildHit] = []
        for store, plan_filter in self._plan(kind, where):
            if (saved := self._saved(store, plan_filter)) is not None:
                ids, scores = scores_of(saved, vector, row_ids)
            else:
                rows = store._collection.get(
                    ids=list(row_ids), where=plan_filter, include=["embeddings"]
                )
                ids, scores = rows["ids"], cosine_similarities(vector, rows["embeddings"])
            hits += self._lean(store, ids, scores)
        return nearest(hits, len(hits))

    def best_of(
        self, vector: Sequence[float], row_ids: Sequence[str], where: Where | None
    ) -> list[ChildHit]:
        """Each parent's best child among the given rows, scored, best first.

        The hits of :meth:`by_ids` reduced to one per parent, with the tie-break of
        :func:`~cardrag.retrievers.fusion.best_per_parent` (higher score, then lower child id).
        From the saved vectors the reduction comes before any hit is made: a long parent's
        hundred rows cost more as hits than as scores.
        """
        if not self._saved_children(where):
            return best_hits(self.by_ids(vector, row_ids, where, kind="child"))
        assert self.vectors is not None  # checked by _saved_children
        ids, scores = scores_of(self.vectors, vector, row_ids)
        best = best_by_parent(
            (i, i.rpartition("::")[0], s) for i, s in zip(ids, scores, strict=True)
        )
        hits = self._lean(self.collections.children, list(best), list(best.values()))
        return nearest(hits, len(hits))

    def best_of_parents(
        self,
        vector: Sequence[float],
        parent_ids: Sequence[str],
        rows_of: Callable[[Sequence[str]], list[str]],
        where: Where | None,
    ) -> list[ChildHit]:
        """Each given parent's best child over all its rows, scored, best first.

        :meth:`best_of` over ``rows_of(parent_ids)``; from the saved vectors each parent's rows
        are one slice (:func:`~cardrag.retrievers.scan.best_of_parents`), with no row id handled
        one by one.
        """
        if not self._saved_children(where):
            return self.best_of(vector, rows_of(parent_ids), where)
        assert self.vectors is not None  # checked by _saved_children
        ids, scores = best_of_parents(self.vectors, vector, parent_ids)
        hits = self._lean(self.collections.children, ids, scores)
        return nearest(hits, len(hits))

    def sentences_by_parent(self, where: object) -> bool:
        """Whether the sentence ranking is each candidate's best sentence (:meth:`best_sentences`).

        So where the saved sentence rows are more than :data:`SCAN_ROWS` and read unfiltered:
        their window would cost another HNSW query (2.6 ms at 126,000 rows), while the
        candidates' own rows are a few hundred, scored here.
        """
        saved = self.vectors.sentences if self.vectors is not None else None
        if saved is None or len(saved.ids) <= SCAN_ROWS or where is not None:
            return False
        return self._plan("sentence", None) == [(self.collections.sentences, None)]

    def best_sentences(
        self, vector: Sequence[float], parent_ids: Sequence[str]
    ) -> list[ChildHit] | None:
        """Each given parent's best sentence row, from the saved vectors, best first.

        None where those parents hold more than :data:`SCORED_SENTENCES` rows (long parents):
        scoring them would cost more than the window's query.
        """
        read, asks = self.sentences_of(vector, parent_ids, 0)
        return None if asks else read()

    def sentences_of(
        self, vector: Sequence[float], parent_ids: Sequence[str], fetch: int
    ) -> tuple[Callable[[], list[ChildHit]], bool]:
        """The sentence ranking where :meth:`sentences_by_parent`, as a read; whether it queries.

        The parents' best sentences (:meth:`best_sentences`, a scan), else a window of all
        sentence rows (a query, which can run beside the scans of the same step).
        """
        saved = self.vectors.sentences if self.vectors is not None else None
        if saved is not None and self._few_sentences(saved, parent_ids):
            return partial(self._scored_sentences, saved, vector, parent_ids), False
        return partial(self.nearest, vector, fetch, None, kind="sentence"), True

    @staticmethod
    def _few_sentences(saved: RowVectors, parent_ids: Sequence[str]) -> bool:
        rows = saved.rows_by_parent
        return sum(len(rows.get(p, ())) for p in set(parent_ids)) <= SCORED_SENTENCES

    def _scored_sentences(
        self, saved: RowVectors, vector: Sequence[float], parent_ids: Sequence[str]
    ) -> list[ChildHit]:
        ids, scores = best_of_parents(saved, vector, parent_ids)
        hits = self._lean(cast("Chroma", self.collections.sentences), ids, scores)
        return nearest(hits, len(hits))

    def window_queries(self, where: Where | None) -> list[bool]:
        """Whether each window under ``where`` (children, card rows, sentence rows) is a query."""
        return [self.queries(where, [kind]) > 0 for kind in ("child", "card", "sentence")]

    def by_id_reads(self, where: Where | None) -> list[bool]:
        """Whether reading children, and card rows, by id under ``where`` asks Chroma."""
        kinds: tuple[RowKind, ...] = ("child", "card")
        return [any(self._saved(s, f) is None for s, f in self._plan(k, where)) for k in kinds]

    def queries(self, where: Where | None, kinds: Sequence[RowKind]) -> int:
        """How many Chroma queries a window of each of ``kinds`` under ``where`` takes.

        The others are scans of saved vectors: Python and NumPy in this process, which run in
        threads beside each other or beside a query only wait for each other's GIL.
        """
        return sum(
            (saved := self._saved(store, only)) is None or len(saved.ids) > SCAN_ROWS
            for kind in kinds
            for store, only in self._plan(kind, where)
        )

    def _saved_children(self, where: Where | None) -> bool:
        """Whether the children read under ``where`` are exactly the saved vectors' rows."""
        plan = self._plan("child", where)
        return self.vectors is not None and plan == [(self.collections.children, None)]

    def complete(self, hits: Sequence[ChildHit]) -> list[ChildHit]:
        """The hits with their text and metadata read (one ``get`` per collection read).

        The nearest rows and the rows read by id carry their id and score only
        (:attr:`ChildHit.complete` False): reading the metadata of every candidate costs
        more than the vector search itself, and only the rows shown need it.
        """
        missing = [h for h in hits if not h.complete]
        if not missing:
            return list(hits)
        read: dict[str, tuple[str, dict[str, Any]]] = {}
        kinds: tuple[RowKind, ...] = ("child", "card", "sentence")
        for kind in kinds:
            ids = list(dict.fromkeys(h.child_id for h in missing if h.kind == kind))
            for store, _ in self._plan(kind, None) if ids else []:
                if (saved := self._saved(store, None)) is not None and saved.texts is not None:
                    held = [i for i in ids if i in saved.positions]  # read there, not asked
                    read.update(zip(held, saved.texts.read(held, saved.positions), strict=True))
                    continue
                rows = store._collection.get(ids=ids, include=["documents", "metadatas"])
                for i, text, meta in zip(
                    rows["ids"], rows["documents"] or [], rows["metadatas"] or [], strict=True
                ):
                    read[i] = (text or "", dict(meta or {}))
        return [
            replace(h, text=read[h.child_id][0], metadata=read[h.child_id][1], complete=True)
            if not h.complete and h.child_id in read
            else h
            for h in hits
        ]

    def _query(
        self, store: Chroma, vector: Sequence[float], fetch: int, where: Where | None
    ) -> list[ChildHit]:
        """One vector query: the ``fetch`` nearest rows of ``store``, scored (ids and scores)."""
        found, scores = scored_query(store, vector, fetch, where)
        return self._lean(store, found["ids"][0], scores)

    def _lean(self, store: Chroma, ids: Sequence[str], scores: Sequence[float]) -> list[ChildHit]:
        """Hits known by id and score; rows whose id is not a child id get their metadata now."""
        hits = [lean_hit(i, s, self.id_key) for i, s in zip(ids, scores, strict=True)]
        if all(h is not None for h in hits):
            return [h for h in hits if h is not None]
        # a collection written by other means (uuid ids): its parent is in the metadata
        rows = store._collection.get(ids=list(ids), include=["metadatas"])
        read = zip(rows["ids"], rows["metadatas"] or [], strict=True)
        metadata = {i: dict(m or {}) for i, m in read}
        out = []
        skipped = 0
        for row_id, score, hit in zip(ids, scores, hits, strict=True):
            if hit is None:
                meta = metadata.get(row_id, {})
                if self.id_key not in meta:
                    skipped += 1
                    continue
                hit = ChildHit(row_id, str(meta[self.id_key]), score, "", meta, False)
            out.append(hit)
        if skipped:
            orphans(skipped, self.id_key, store._collection.name)
        return out

    def _saved(self, store: Chroma, plan_filter: Where | None) -> RowVectors | None:
        """The saved vectors that hold every row of ``store`` read unfiltered (None: ask Chroma)."""
        if self.vectors is None or plan_filter:
            return None
        if store is self.collections.children:
            return self.vectors
        if store is self.collections.sentences:
            return self.vectors.sentences
        return self.vectors.cards if store is self.collections.cards else None

    def for_question(self) -> RowReader:
        """This reader for one question: a shared collection holding only children read unfiltered.

        A LangChain user's collection (the index's only one, nothing saved beside it) is
        :attr:`checked` by the rows each query reads. Otherwise the collection is looked up
        again for every question (:meth:`Collections.only_children`). Either way a row written
        since is never read past its filter; the retriever's check of each parent's
        sensitivity stays behind it.
        """
        if not self.collections.shares_children:
            return self  # a collection per kind: no filter to drop, nothing to look up
        if self.vectors is None and len(self.collections.all()) == 1:
            return replace(self, checked=True)
        plain = self.collections.only_children()
        return self if plain == self.only_children else replace(self, only_children=plain)

    def _plan(self, kind: RowKind, where: Where | None) -> list[tuple[Chroma, Where | None]]:
        return self.collections.plan(
            kind=kind,
            where=where,
            allow_restricted=self.allow_restricted,
            only_children=self.only_children,
        )
