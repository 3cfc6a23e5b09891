from __future__ import annotations

from pathlib import Path

import pytest

from cardrag.evals.bench import growth


def test_a_growth_store_is_built_once_then_served_by_a_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(growth, "QUESTIONS", 5)
    built = growth.build(30, tmp_path)
    assert (built["cards"], built["reused"]) == (30, False)
    assert built["rows"] > 2 * 30  # children and a card row per card
    again = growth.build(30, tmp_path)
    assert again == {**built, "reused": True}  # nothing rebuilt
    served = growth.serve(tmp_path, rounds=1)
    systems = {"floor", "card-atomic", "vanilla-pdr", "children", "hybrid", "ours"}
    assert set(served["p50_ms"]) == systems  # card-like cards: no sentence-window store
    assert 0 < served["open_s"] <= served["ready_s"]
    assert served["worker_rss_mb"] >= 0  # 0 in a test process that already loaded Chroma
    assert served["peak_rss_mb"] > 100
    assert all(served["p95_ms"][s] >= served["p50_ms"][s] for s in served["p50_ms"])


def test_long_parents_are_built_with_a_sentence_window_store_beside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(growth, "QUESTIONS", 3)
    built = growth.build(4, tmp_path, chars=3000)
    assert (built["cards"], built["chars"], built["reused"]) == (4, 3000, False)
    assert built["rows"] > 4 * 8  # some ten children per 3,000-character parent
    assert growth.build(4, tmp_path, chars=3000)["reused"] is True
    assert "sentence-window" in growth.serve(tmp_path, rounds=1)["p50_ms"]
    assert growth.build(4, tmp_path)["reused"] is False  # another length: rebuilt
    assert (tmp_path / growth.WINDOWS).is_dir()  # the long build's, left beside, and
    assert "sentence-window" not in growth.serve(tmp_path, rounds=1)["p50_ms"]  # not timed
