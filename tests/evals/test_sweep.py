from __future__ import annotations

from pathlib import Path

import pytest

import cardrag.evals.sweep as sweep_module
from cardrag.evals.sweep import CachedScores, chunking_key, sweep
from cardrag.ingest.settings import Settings
from tests.conftest import FakeEmbeddings
from tests.evals.test_systems import CARDS, QRELS, QUERIES
from tests.retrievers.test_rerank import ByLength


def test_the_chunking_key_is_what_changes_the_index() -> None:
    assert chunking_key(Settings(chunk_size=300, bm25_weight=0.1)) == (
        "parent_child",
        300,
        60,
        2500,
    )
    assert chunking_key(Settings(rrf_c=5)) == chunking_key(Settings(rrf_c=60))


def test_one_index_per_chunking_and_every_fusion_scored_on_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[tuple[object, ...]] = []
    real_build = sweep_module.build

    def counting_build(cards, embeddings, settings, workdir):  # type: ignore[no-untyped-def]
        built.append(chunking_key(settings))
        return real_build(cards, embeddings, settings, workdir)

    monkeypatch.setattr(sweep_module, "build", counting_build)
    base = Settings(embedding_model="fake", chunk_overlap=0, min_similarity=None)
    candidates = [
        base.model_copy(update={"chunk_size": 40}),
        base.model_copy(update={"chunk_size": 40, "bm25_weight": 0.0}),
        base.model_copy(update={"chunk_size": 80}),
    ]
    out = sweep(CARDS, QUERIES, QRELS, FakeEmbeddings(), candidates, tmp_path, progress=False)
    assert built == [("parent_child", 40, 0, 2500), ("parent_child", 80, 0, 2500)]
    assert [s.chunk_size for s, _, _ in out] == [40, 40, 80]
    assert out[0][1] is out[1][1]  # the same index for both fusions of one chunking
    assert [m["recall@1"] for _, _, m in out] == [1.0, 1.0, 1.0]


def test_cached_scores_compute_each_pair_once() -> None:
    model = ByLength()
    scores = CachedScores(model)
    assert scores.score("q", ["aa", "b"]) == [2.0, 1.0]
    assert scores.score("q", ["b", "ccc", "aa"]) == [1.0, 3.0, 2.0]
    assert scores.score("other", ["b"]) == [1.0]
    assert model.calls == [["aa", "b"], ["ccc"], ["b"]]
