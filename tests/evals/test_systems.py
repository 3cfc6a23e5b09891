from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

import cardrag.evals.systems as systems
from cardrag.evals.metrics import evaluate
from cardrag.evals.systems import EVAL_CACHE, cached, describe, run_systems, timed_runs
from cardrag.ingest.settings import Settings
from tests.conftest import CountingEmbeddings, FakeEmbeddings

CARDS = [
    Document(id=f"c{i}", page_content=text, metadata={"parent_id": f"c{i}", "title": title})
    for i, (title, text) in enumerate(
        [
            ("Insulin", "Keep insulin pens in the fridge. Never freeze them."),
            ("Iron", "Take iron tablets with orange juice, away from tea."),
            ("Alcohol", "Avoid alcohol with metronidazole for three days."),
        ]
    )
]
QUERIES = {"q1": "insulin fridge", "q2": "iron tablets tea", "q3": "alcohol metronidazole"}
QRELS = {"q1": {"c0": 1}, "q2": {"c1": 1}, "q3": {"c2": 1}}


def test_every_system_runs_on_the_same_cards_and_questions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(systems, "reranker_available", lambda: False)
    settings = Settings(embedding_model="fake", chunk_size=40, chunk_overlap=0)
    runs = run_systems(CARDS, QUERIES, cached(FakeEmbeddings(), "fake"), settings, tmp_path)
    assert [r.name for r in runs] == [
        "card-atomic",
        "vanilla-pdr",
        "bm25",
        "children",
        "dense",
        "hybrid",
        "hybrid+card",
        "ours",
        "sentence-window",
    ]
    for r in runs:  # word-overlap questions: every system finds the one card first
        assert evaluate(QRELS, r.run)["recall@1"] == 1.0, r.name
    by_name = {r.name: r for r in runs}
    assert by_name["ours"].parents_per_query == 3.0  # all three cards, asked for 5
    assert by_name["vanilla-pdr"].parents_per_query <= 3.0  # k counts children there
    # BM25 alone ranks only the cards that share a word with the question
    assert by_name["bm25"].run == {"q1": {"c0": 1.0}, "q2": {"c1": 1.0}, "q3": {"c2": 1.0}}


def test_each_text_is_embedded_once_per_run_and_once_ever_with_a_cache_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = CountingEmbeddings()
    embeddings: Embeddings = cached(model, "fake")
    embeddings.embed_documents(["a", "b"])
    embeddings.embed_documents(["a", "b", "c"])
    embeddings.embed_query("q")
    embeddings.embed_query("q")
    assert model.texts == ["a", "b", "c", "q"]
    monkeypatch.setenv(EVAL_CACHE, str(tmp_path / "vectors"))
    first, second = CountingEmbeddings(), CountingEmbeddings()
    cached(first, "fake").embed_documents(["a", "b"])
    again = cached(second, "fake").embed_documents(["a", "b"])  # another process, same folder
    assert (first.texts, second.texts) == (["a", "b"], [])
    assert again == FakeEmbeddings().embed_documents(["a", "b"])


def test_describe_reports_the_fusion_of_ours() -> None:
    assert describe(Settings(bm25_weight=0.5, rrf_c=30, adaptive_fusion=False)) == {
        "hybrid": True,
        "bm25_stem_languages": ["pt", "es", "it", "fr", "de"],
        "card_rows": True,
        "sentence_rows": True,
        "weights": {"dense": 1.0, "card": 1.0, "bm25": 0.5, "sentence": 1.0},
        "rrf_c": 30,
        "adaptive_fusion": False,
        "chunker": "parent_child",
        "rerank": False,
    }


def test_the_systems_take_turns_on_every_question_and_who_goes_first_rotates() -> None:
    calls: list[tuple[str, str]] = []

    def system(name: str, returned: int):
        def search(text: str) -> list[Document]:
            calls.append((name, text))
            return [Document("", id=f"{name}{i}") for i in range(returned)]

        return search

    runs = timed_runs({"a": system("a", 1), "b": system("b", 3)}, {"1": "x", "2": "y"}, 2)
    assert calls == [("a", "x"), ("b", "x"), ("b", "y"), ("a", "y")]
    assert [(r.name, r.run["2"], r.parents_per_query) for r in runs] == [
        ("a", {"a0": 1.0}, 1.0),
        ("b", {"b0": 3.0, "b1": 2.0, "b2": 1.0}, 2.0),
    ]
