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
    assert not (tmp_path / growth.WINDOWS).exists()  # the long build's removed with it
    assert "sentence-window" not in growth.serve(tmp_path, rounds=1)["p50_ms"]


def test_a_store_built_with_other_settings_is_rebuilt_not_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = growth.build(6, tmp_path)
    assert first["holds"] == growth.holds(growth.settings())
    assert (first["holds"]["card_rows"], first["holds"]["sentence_rows"]) == (True, True)
    # a store from before sentence rows shipped: same size, other settings
    monkeypatch.setattr(
        growth,
        "settings",
        lambda **c: growth.Settings(
            embedding_model=growth.MODEL, min_similarity=-1.0, sentence_rows=False, **c
        ),
    )
    older = growth.build(6, tmp_path)
    assert older["reused"] is False
    assert older["holds"]["sentence_rows"] is False
    assert older["rows"] < first["rows"]  # no sentence rows
    assert growth.build(6, tmp_path)["reused"] is True  # the same settings again: kept


def test_the_tables_mark_a_reused_store_and_say_what_the_stores_hold() -> None:
    from cardrag.evals.bench.__main__ import held_line, lengths_table

    row = {
        "cards": 10,
        "chars": 1000,
        "rows": 55,
        "reused": True,
        "holds": {"model": "h", "sentence_rows": True},
        "p50_ms": {"floor": 1.0, "ours": 2.0},
        "p95_ms": {"ours": 3.0},
    }
    table = lengths_table([row])
    assert table[5].startswith("| 1,000 | 10 | 55 (reused) | 1.0 |")
    assert table[-1] == 'Stores hold (built with): {"model": "h", "sentence_rows": true}'
    assert held_line([{**row, "holds": None}]) == (
        "Stores: built before the bench recorded what they hold."
    )
