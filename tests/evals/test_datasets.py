from __future__ import annotations

import json
from pathlib import Path

import pytest

from cardrag.evals.cases import GOLDEN
from cardrag.evals.datasets import load_beir, load_golden
from tests.conftest import CARDS_DIR


def _folder(root: Path, *, parents: bool = True) -> Path:
    def jsonl(name: str, rows: list[dict[str, str]]) -> None:
        (root / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    root.mkdir()
    jsonl(
        "corpus.jsonl",
        [
            {"_id": "p1", "title": "\ufeffAlpha", "text": "\ufeffFirst paragraph.", "parent": "a1"},
            {"_id": "p2", "title": "Alpha", "text": "Second paragraph.", "parent": "a1"},
            {"_id": "p3", "title": "Beta", "text": "   ", "parent": "a2"},  # empty: dropped
        ],
    )
    jsonl("queries.jsonl", [{"_id": "q1", "text": " Which? "}, {"_id": "q2", "text": "Unjudged"}])
    (root / "qrels.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\tp2\t1\nq1\tp1\t0\n", encoding="utf-8"
    )
    if parents:
        jsonl("parents.jsonl", [{"_id": "a1", "title": "Alpha", "text": "Whole article."}])
        (root / "qrels_parent.tsv").write_text(
            "query-id\tcorpus-id\tscore\nq1\ta1\t1\n", encoding="utf-8"
        )
    return root


def test_a_paragraph_level_folder_becomes_cards_queries_and_qrels(tmp_path: Path) -> None:
    data = load_beir(_folder(tmp_path / "toy"), "paragraph")
    assert data.name == "toy/paragraph"
    assert [(c.id, c.metadata["title"], c.page_content) for c in data.cards] == [
        ("p1", "Alpha", "First paragraph."),  # byte-order marks stripped
        ("p2", "Alpha", "Second paragraph."),
    ]
    assert data.queries == {"q1": "Which?"}  # a query without judgements is left out
    assert data.qrels == {"q1": {"p2": 1}}  # score 0 is not relevant
    assert data.language == "en"


def test_an_article_level_folder_judges_parents(tmp_path: Path) -> None:
    data = load_beir(_folder(tmp_path / "toy"), "article")
    assert [c.id for c in data.cards] == ["a1"]
    assert data.qrels == {"q1": {"a1": 1}}


def test_a_missing_file_names_itself_and_the_level(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "toy", parents=False)
    with pytest.raises(FileNotFoundError, match=r"parents.jsonl not found \(needed for level"):
        load_beir(folder, "article")


def test_the_golden_set_on_the_shipped_cards() -> None:
    data = load_golden(GOLDEN, CARDS_DIR)
    assert (len(data.cards), len(data.queries)) == (38, 88)
    assert data.qrels["g001"] == {"card-levothyroxine-routine": 1}
    assert data.kinds["g001"] == "narrow"


def test_a_shared_dataset_loads_at_both_levels(shared_dataset: Path) -> None:
    folder = shared_dataset / "xquad-en"
    if not folder.is_dir():
        pytest.skip("xquad-en is not in ../shared/datasets")
    paragraphs = load_beir(folder, "paragraph")
    articles = load_beir(folder, "article")
    assert (len(paragraphs.cards), len(articles.cards)) == (240, 48)
    assert len(paragraphs.queries) == len(articles.queries) == 1190
