import json
from pathlib import Path

import numpy as np
import pytest

from cardrag.evals.cases import MatrixCase
from cardrag.evals.judge.data import Group, matrix_groups, pairs, squad_groups
from cardrag.evals.judge.figures import centred, table
from cardrag.ingest.cards import Card

CONTEXT = "Rome is in Italy. It was founded long ago. The Tiber runs through it."


def _squad(folder: Path, lang: str, questions: list[dict[str, object]]) -> Path:
    folder.mkdir()
    data = {"data": [{"title": "Rome", "paragraphs": [{"context": CONTEXT, "qas": questions}]}]}
    (folder / "dev-v2.0.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


def test_squad_groups_label_the_sentence_holding_the_answer_and_cross_the_languages(
    tmp_path: Path,
) -> None:
    found = {"id": "a", "question": "Where?", "answers": [{"text": "Italy", "answer_start": 9}]}
    moved = {
        "id": "b",
        "question": "Which river?",
        "answers": [{"text": "Tiber", "answer_start": 30}],
    }
    lost = {"id": "c", "question": "Who?", "answers": [{"text": "Romulus", "answer_start": 5}]}
    none = {"id": "d", "question": "When?", "is_impossible": True, "answers": []}
    pt = _squad(tmp_path / "pt", "pt", [found, moved, lost, none])
    es = _squad(tmp_path / "es", "es", [{**found, "question": "¿Dónde?"}])
    groups = squad_groups({"pt": pt, "es": es})
    assert [(g.source, g.key, g.question, g.answers) for g in groups] == [
        ("squad2-es", "a", "¿Dónde?", (True, False, False)),
        ("squad2-es>pt", "a", "¿Dónde?", (True, False, False)),
        ("squad2-pt>es", "a", "Where?", (True, False, False)),
        ("squad2-pt", "a", "Where?", (True, False, False)),
        ("squad2-pt", "b", "Which river?", (False, False, True)),
        ("squad2-pt", "d", "When?", (False, False, False)),
    ]
    assert groups[0].sentences == (
        "Rome is in Italy.",
        "It was founded long ago.",
        "The Tiber runs through it.",
    )


def _card() -> Card:
    body = "Take it with food. Keep it in the fridge. It lowers sugar."
    return Card(
        id="card-a",
        title="A",
        license="CC0-1.0",
        topics=["x"],
        accessed_at="2026-01-01",
        sensitivity="public",
        body=body,
    )  # type: ignore[arg-type]


def _case(qid: str, label: str, sentence: str | None = None) -> MatrixCase:
    return MatrixCase(
        query_id=qid,
        card="card-a",
        type="storage",
        language="en",
        query=f"q{qid}",
        label=label,
        must_cite_one_of=["card-a"] if label == "answered" else [],  # type: ignore[arg-type]
        answer_sentence=sentence,
    )


def test_matrix_groups_label_the_answer_sentence_and_leave_out_other_cards() -> None:
    groups = matrix_groups(
        [_case("1", "answered", "Keep it in"), _case("2", "not_covered"), _case("3", "other_card")],
        [_card()],
    )
    assert [(g.key, g.answers) for g in groups] == [
        ("1", (False, True, False)),
        ("2", (False, False, False)),
    ]
    assert list(pairs(groups[:1])) == [
        ("q1", "Take it with food.", False),
        ("q1", "Keep it in the fridge.", True),
        ("q1", "It lowers sugar.", False),
    ]


def test_a_matrix_answer_no_sentence_holds_is_refused() -> None:
    with pytest.raises(ValueError, match="no sentence of card-a holds 'Swallow it'"):
        matrix_groups([_case("1", "answered", "Swallow it")], [_card()])


def _group(card: str, language: str, answers: tuple[bool, ...]) -> Group:
    return Group("q", ("a", "b"), answers, "matrix", language, card=card)


def test_table_counts_auroc_and_best_sentence_per_part_and_language() -> None:
    groups = [
        _group("card-t", "en", (False, True)),  # best 0.9 at the answer
        _group("card-t", "en", (False, False)),  # best 0.5
        _group("card-h", "pt", (True, False)),  # best 0.8 at the wrong sentence
        _group("card-h", "pt", (False, False)),  # best 0.9
    ]
    scores = [
        np.array([0.1, 0.9]),
        np.array([0.5, 0.2]),
        np.array([0.3, 0.8]),
        np.array([0.9, 0.0]),
    ]
    out = table(groups, scores, frozenset({"card-h"}))
    assert out["tuning"] == {"auroc": 1.0, "best_is_labelled": 1.0, "answered": 1, "not_covered": 1}
    assert out["held_out pt"] == {
        "auroc": 0.0,
        "best_is_labelled": 0.0,
        "answered": 1,
        "not_covered": 1,
    }
    shifted = centred(groups, scores, frozenset({"card-h"}))
    # the tuning cards' English questions' best scores, 0.9 and 0.5, average 0.7
    assert np.concatenate(shifted[:2]).tolist() == pytest.approx([-0.6, 0.2, -0.2, -0.5])
    # held-out languages have no tuning mean: left as they are
    assert np.concatenate(shifted[2:]).tolist() == pytest.approx([0.3, 0.8, 0.9, 0.0])
