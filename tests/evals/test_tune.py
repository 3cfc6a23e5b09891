from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings

import cardrag.evals.tune as tune_module
from cardrag.app.cli import main as cli
from cardrag.evals import systems
from cardrag.evals.cases import GOLDEN
from cardrag.evals.datasets import Dataset, load_golden
from cardrag.evals.split import part, split
from cardrag.evals.sweep import build, run
from cardrag.evals.systems import configured
from cardrag.evals.tune import Candidate, choose, grid, tune, write_settings
from cardrag.ingest.settings import PROJECT_ROOT, Settings
from tests.conftest import REAL_MODEL

BASE = Settings(embedding_model=REAL_MODEL, min_similarity=None)
BM25_ONLY = BASE.model_copy(
    update={"dense_weight": 0.0, "card_weight": 0.0, "sentence_weight": 0.0, "bm25_weight": 1.0}
)


@pytest.fixture(scope="module")
def golden() -> Dataset:
    return load_golden(GOLDEN, PROJECT_ROOT / "data" / "cards")


@pytest.fixture(scope="module")
def cached(real_embeddings: Embeddings) -> Embeddings:
    return systems.cached(real_embeddings, "t")


def test_the_grid_starts_with_the_current_settings_and_has_no_repeats() -> None:
    candidates = grid(BASE, rerank=False)
    assert candidates[0] is BASE
    assert len(candidates) == 96  # 6 chunkings x 8 fusions x 2 c; the current one is among them
    assert len({tune_module.tuned(c) for c in candidates}) == 96
    assert len(grid(BASE, rerank=True)) == 192


def test_choose_prefers_the_objective_then_the_earlier_candidate() -> None:
    def c(mrr: float, r1: float) -> Candidate:
        return Candidate(BASE, {"mrr@10": mrr, "recall@1": r1, "recall@5": 1.0})

    first, better, tied = c(0.9, 0.8), c(0.95, 0.7), c(0.95, 0.7)
    assert choose([first, better, tied]) is better


def test_tuning_never_reads_the_held_out_part(
    golden: Dataset, cached: Embeddings, tmp_path: Path
) -> None:
    """Poison the held-out part: questions that only the BM25-only candidate gets right.

    Seen during the search, they make BM25-only win (the control below proves it); kept in the
    held-out part, the choice is the one the tuning part alone makes.
    """
    built = build(golden.cards, cached, BASE, tmp_path / "probe")
    dense = run(configured(built.base, BASE, built.bm25), golden.queries)
    lexical = run(configured(built.base, BM25_ONLY, built.bm25), golden.queries)

    def top(result: dict[str, float]) -> str:
        return max(result, key=lambda card: result[card], default="")

    differ = [q for q in golden.queries if top(lexical[q]) not in ("", top(dense[q]))]
    assert len(differ) >= 10
    poison = Dataset(
        name="poison",
        license="test",
        cards=golden.cards,
        queries={f"p{i}": golden.queries[q] for i, q in enumerate(differ * 4)},
        qrels={f"p{i}": {top(lexical[q]): 1} for i, q in enumerate(differ * 4)},
        kinds={},
    )
    tuning_ids, _ = split(list(golden.queries), golden.kinds)
    tuning = part(golden, tuning_ids, "tuning")
    candidates = [BASE, BM25_ONLY]

    rows, winner, decision = tune(tuning, poison, cached, BASE, tmp_path, candidates=candidates)
    assert winner.settings is BASE
    assert decision.settings is BASE
    assert rows[1].held_out is not None
    assert rows[0].held_out is not None
    assert rows[1].held_out["mrr@10"] == 1.0 > rows[0].held_out["mrr@10"]  # the poison works

    # control: the same poison in the tuning part flips the choice
    merged = Dataset(
        name="merged",
        license="test",
        cards=golden.cards,
        queries={**tuning.queries, **poison.queries},
        qrels={**tuning.qrels, **poison.qrels},
        kinds={},
    )
    _, seen, _ = tune(merged, poison, cached, BASE, tmp_path, candidates=candidates)
    assert seen.settings is BM25_ONLY


def test_the_settings_file_is_read_back_and_the_environment_still_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chosen = BASE.model_copy(update={"chunk_size": 250, "bm25_weight": 0.5, "rerank": True})
    metrics = {"recall@1": 0.9, "recall@5": 1.0, "mrr@10": 0.95}
    path = tmp_path / "cardrag.toml"
    write_settings(
        path,
        Candidate(chosen, metrics, metrics),
        Candidate(BASE, metrics, metrics),
        {"date": "2026-11-29T00:00:00+00:00", "embedding_model": REAL_MODEL, "cases": "golden"},
    )
    record = tomllib.loads(path.read_text(encoding="utf-8"))
    assert record["tuned"]["chosen"] == "250/60 w=1/0.5/1/1 c=20 rerank"
    assert record["tuned"]["held_out"] == metrics
    monkeypatch.setenv("CARDRAG_SETTINGS_FILE", str(path))
    read = Settings()
    assert (read.chunk_size, read.chunk_overlap, read.bm25_weight, read.rerank) == (
        250,
        60,
        0.5,
        True,
    )
    monkeypatch.setenv("CARDRAG_CHUNK_SIZE", "300")
    assert Settings().chunk_size == 300


@pytest.mark.real
def test_cardrag_tune_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(tune_module, "CHUNKINGS", [(400, 60), (250, 60)])
    monkeypatch.setattr(tune_module, "FUSIONS", [tune_module.FUSIONS[0], tune_module.FUSIONS[2]])
    monkeypatch.setattr(tune_module, "RRF_CS", [20])  # the shipped c: the base is in the grid
    monkeypatch.setattr(tune_module, "reranker_available", lambda: False)
    monkeypatch.setenv("CARDRAG_EMBEDDING_MODEL", REAL_MODEL)
    out, report = tmp_path / "tuned.toml", tmp_path / "tune.md"
    assert cli(["tune", "--max-questions", "30", "--out", str(out), "--report", str(report)]) == 0
    printed = capsys.readouterr().out
    assert "21 tuning and 9 held-out questions" in printed
    assert printed.count("| 400/60 ") + printed.count("| 250/60 ") == 4
    record = tomllib.loads(out.read_text(encoding="utf-8"))
    assert record["tuned"]["embedding_model"] == REAL_MODEL
    assert record["tuned"]["tuning_questions"] == 21
    assert set(record["tuned"]["held_out"]) >= {"recall@1", "recall@5", "mrr@10"}
    assert report.read_text(encoding="utf-8").startswith("# `cardrag tune`")
