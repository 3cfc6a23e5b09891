from __future__ import annotations

from typing import Any

from cardrag.retrievers.candidates import (
    card_rows_of,
    first_fetch,
    next_fetch,
    resolve,
    without_card_row,
)
from cardrag.retrievers.child_hit import ChildHit


def test_pure_fetch_planning() -> None:
    hits = [ChildHit(f"a::{i:02d}", "a", 0.9 - i / 100) for i in range(8)]
    assert first_fetch(4, 4, 200) == 16
    assert first_fetch(4, 4, 10) == 10
    assert next_fetch(hits, 8, 200, found=1, k=4, min_similarity=None) == 16
    assert next_fetch(hits, 8, 12, found=1, k=4, min_similarity=None) == 12
    assert next_fetch(hits, 8, 200, found=4, k=4, min_similarity=None) is None
    assert (
        next_fetch(hits[:5], 8, 200, found=1, k=4, min_similarity=None) is None
    )  # store exhausted
    assert next_fetch(hits, 8, 8, found=1, k=4, min_similarity=None) is None  # at max_fetch
    assert next_fetch(hits, 8, 200, found=1, k=4, min_similarity=0.85) is None  # tail below gate


class _Reader:
    """Records what :func:`resolve` asks the index for."""

    def __init__(self) -> None:
        self.asked: list[tuple[list[str], Any, bool]] = []

    def by_ids(
        self, vector: list[float], row_ids: list[str], where: Any, *, kind: str
    ) -> list[ChildHit]:
        self.asked.append((list(row_ids), where, kind == "card"))
        return [ChildHit(i, i.split("::")[0], 0.5) for i in row_ids]

    def best_of(self, vector: list[float], row_ids: list[str], where: Any) -> list[ChildHit]:
        self.asked.append((list(row_ids), where, False))
        return [ChildHit(i, i.split("::")[0], 0.5) for i in row_ids if i.endswith("::01")]

    def best_of_parents(
        self, vector: list[float], parent_ids: list[str], rows_of: Any, where: Any
    ) -> list[ChildHit]:
        return self.best_of(vector, rows_of(parent_ids), where)


def _rows_of(parent_ids: list[str]) -> list[str]:
    return [f"{p}::{i:02d}" for p in parent_ids for i in range(2)]


def test_resolve_scores_every_row_of_the_parents_the_dense_window_missed_keeping_the_best() -> None:
    reader = _Reader()
    lexical = ["a", "b", "c", "b"]  # a: in a dense window; b: found by BM25 and a sentence
    where = {"topics": "x"}
    found = resolve(reader, [1.0], {"a"}, lexical, _rows_of, where)  # type: ignore[arg-type]
    assert [h.child_id for h in found] == ["b::01", "c::01"]  # the reader's best of each
    assert reader.asked == [(["b::00", "b::01", "c::00", "c::01"], where, False)]
    reader.asked.clear()
    assert resolve(reader, [1.0], {"a"}, lexical[:1], _rows_of, None) == []  # type: ignore[arg-type]
    assert reader.asked == []


class _CardRows(_Reader):
    """Holds card rows for parents a, b and d (c has none: too long for one)."""

    def by_ids(
        self, vector: list[float], row_ids: list[str], where: Any, *, kind: str
    ) -> list[ChildHit]:
        self.asked.append((list(row_ids), where, kind == "card"))
        return [ChildHit(i, i.split("::")[0], 0.4) for i in row_ids if i[0] in "abd"]


def test_card_rows_of_bm25_only_parents_join_and_card_less_parents_are_named() -> None:
    reader = _CardRows()
    cards = [ChildHit("a::card", "a", 0.8)]
    # a: in both windows; b, c: children window only; d: BM25 only
    more, without = card_rows_of(reader, [1.0], ["a", "b", "c", "d"], {"a", "b", "c"}, cards, None)  # type: ignore[arg-type]
    assert reader.asked == [(["b::card", "c::card", "d::card"], None, True)]  # one read
    assert [h.child_id for h in more] == ["d::card"]  # b's row exists but stays out of ranking
    assert without == {"c"}
    reader.asked.clear()
    assert card_rows_of(reader, [1.0], ["a"], {"a"}, cards, None) == ([], set())  # type: ignore[arg-type]
    assert reader.asked == []


def test_hits_of_card_less_parents_are_marked_for_fusion() -> None:
    hits = [ChildHit("c::00", "c", 0.5, metadata={"chunk_index": 0}), ChildHit("a::00", "a", 0.6)]
    marked = without_card_row(hits, {"c"})
    assert marked[0].metadata == {"chunk_index": 0, "has_card_row": False}
    assert marked[1] is hits[1]
