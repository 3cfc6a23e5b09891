from __future__ import annotations

from typing import Any

from cardrag.ingest.index.search import ChildHit
from cardrag.retrievers.candidates import first_fetch, next_fetch, resolve
from cardrag.retrievers.fusion import ParentHit


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
        self.asked: list[tuple[list[str], int, Any, bool]] = []

    def of_parents(
        self,
        vector: list[float],
        parent_ids: list[str],
        window: int,
        where: Any,
        *,
        card_rows: bool,
    ) -> list[ChildHit]:
        self.asked.append((list(parent_ids), window, where, card_rows))
        return [ChildHit(f"{p}::{'card' if card_rows else '00'}", p, 0.5) for p in parent_ids]


def _parent(pid: str) -> ParentHit:
    return ParentHit(pid, 1.0, ChildHit(f"{pid}::00", pid, 1.0))


def test_resolve_reads_only_the_parents_bm25_found_and_the_dense_window_did_not() -> None:
    reader = _Reader()
    dense = [ChildHit("a::00", "a", 0.9)]
    lexical = [_parent("a"), _parent("b"), _parent("c")]
    where = {"topics": "x"}
    found = resolve(reader, [1.0], dense, lexical, where, 4, max_fetch=200, card_rows=True)  # type: ignore[arg-type]
    assert [h.child_id for h in found] == ["b::00", "c::00", "b::card", "c::card"]
    # the window: at least the fetch, 4 rows per unknown parent, at most max_fetch
    assert reader.asked == [(["b", "c"], 8, where, False), (["b", "c"], 8, where, True)]
    reader.asked.clear()
    resolve(reader, [1.0], dense, lexical, None, 4, max_fetch=6, card_rows=False)  # type: ignore[arg-type]
    assert reader.asked == [(["b", "c"], 6, None, False)]
    reader.asked.clear()
    assert resolve(reader, [1.0], dense, [_parent("a")], None, 4, max_fetch=6, card_rows=True) == []  # type: ignore[arg-type]
    assert reader.asked == []
