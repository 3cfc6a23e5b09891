from __future__ import annotations

from pathlib import Path

import pytest

from cardrag.app.extractive import ExtractiveAnswerer
from cardrag.evals.datasets import Dataset
from cardrag.evals.run import dataset_app_checks, offline_context
from cardrag.ingest.cards import Card
from cardrag.ingest.embeddings import load_embeddings
from cardrag.ingest.settings import Settings


@pytest.mark.real
def test_a_shared_dataset_is_answered_through_the_graph_and_false_refusals_are_split(
    tmp_path: Path, shipped_cards: list[Card]
) -> None:
    picked = ["card-iron-tablets", "card-levothyroxine-routine", "card-insulin-storage"]
    questions = {
        "right": "Should I drink orange juice with my iron tablet?",
        "wrong": "Posso tomar levotiroxina com café da manhã?",  # its qrels name another card
        "gate": "Who wrote Don Quixote?",
        "grading": "Can I take clopidogrel and aspirin together every day?",
    }
    qrels = {
        "right": {"card-iron-tablets": 1},
        "wrong": {"card-insulin-storage": 1},
        "gate": {"card-iron-tablets": 1},
        "grading": {"card-levothyroxine-routine": 1},
    }
    dataset = Dataset(
        name="picked/paragraph",
        license="CC-BY-4.0",
        cards=[c.to_document() for c in shipped_cards if c.id in picked],
        queries=questions,
        qrels=qrels,
        kinds={},
    )
    settings = Settings()
    embeddings = load_embeddings(settings.embedding_model, settings.threads)
    answerer = ExtractiveAnswerer(embeddings)
    ctx = offline_context(dataset.cards, embeddings, settings, tmp_path, answerer)
    assert dataset_app_checks(dataset, ctx) == {
        "questions": 4,
        "false_refusal_rate": 0.5,
        "refused_by_the_gate": 1,
        "refused_by_grading": 1,
        "answered_citing_a_relevant_card": 0.5,
    }
